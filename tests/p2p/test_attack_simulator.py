"""A real `nvflare simulator` run of a peer-to-peer job with colluding attackers (tens of seconds)."""

import csv
import json
import os
import shutil
import subprocess
import sys

import pytest

from lightyear.jobs import generate

from repo import ROOT, start_timeouts

NVFLARE = os.path.join(os.path.dirname(sys.executable), "nvflare")

pytestmark = [pytest.mark.simulator, pytest.mark.extended]


def rounds(ws, site):
    with open(ws / site / "simulate_job" / "rounds.csv", newline="") as f:
        return list(csv.DictReader(f))


def test_lightyear_with_two_colluding_lie_attackers_finishes_and_its_detection_can_be_scored(tmp_path):
    sites = ["site-1", "site-2", "site-3", "site-4"]
    attackers = ["site-3", "site-4"]
    overrides = {
        "sites": sites,
        "rounds": 2,
        "train_args": {"local_epochs": 1, "batch_size": 64},
        "peer_deadline": 60.0,
        "skill_floor": 0.0,
        **start_timeouts("lightyear"),
    }  # no warm-up: every round is judged
    # the generator's attack wiring: the last 2 sites attack
    name, files = generate.build_job(
        os.path.join(ROOT, "app_configs"), "lightyear", "digits", attack="lie", attackers=2, overrides=overrides
    )
    assert name == "lightyear_digits_lie2" and files["meta.json"]["lightyear"]["faulty_sites"] == attackers
    job = str(tmp_path / "job")
    generate.write_job(files, job)
    ws = tmp_path / "ws"
    (ws / "local").mkdir(parents=True)
    shutil.copy(os.path.join(ROOT, "workspace", "local", "resources.json"), ws / "local")
    proc = subprocess.run(
        [NVFLARE, "simulator", job, "-w", str(ws), "-t", "4"],
        capture_output=True,
        text=True,
        timeout=500,
        cwd=str(tmp_path),
    )
    summary = ws / "server" / "simulate_job" / "summary.json"
    assert summary.exists(), f"no summary written; simulator output ends with:\n{(proc.stdout + proc.stderr)[-3000:]}"
    by_site = {row["site"]: row for row in json.loads(summary.read_text())}
    assert all(by_site[s]["status"] == "finished" for s in sites), by_site
    assert by_site["site-4"]["malfunction"] == "lie" and by_site["mean_benign"]["malfunction"] == "n=2"
    for attacker, colluder in (("site-3", "site-4"), ("site-4", "site-3")):
        rows = rounds(ws, attacker)
        assert [int(r["round"]) for r in rows] == [0, 1]
        for r in rows:
            assert r["malfunction"] == "lie" and r["attack_knowledge"] == "partial"
            # the colluder's honest model came through FLARE's relay and the cell gate
            assert r["attack_colluders"] == colluder and r["attack_known"] == "2" and r["attack_refused"] == ""
            assert float(r["attack_wait_s"]) < 0.25 * 60.0 + 1.0
    for site in ("site-1", "site-2"):
        rows = rounds(ws, site)
        assert [int(r["round"]) for r in rows] == [0, 1]
        assert all(
            r["site-4_score"] != "" and r["late"] == "" and r["rejected"] == "" for r in rows
        )  # crafted models arrive in time
    out = subprocess.run(
        [
            sys.executable,
            "-m",
            "lightyear.experiments.detection",
            str(ws),
            "--job",
            job,
            "--csv",
            str(tmp_path / "detection.csv"),
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert out.returncode == 0, out.stderr
    with open(tmp_path / "detection.csv", newline="") as f:
        pooled = [r for r in csv.DictReader(f) if r["round"] == "all" and r["receiver"] == "all"]
    assert len(pooled) == 1
    counts = {k: int(pooled[0][k]) for k in ("tp", "fp", "tn", "fn")}
    # 2 benign receivers x 2 rounds, each scoring 1 benign and 2 attacking in-neighbours
    assert counts["tp"] + counts["fn"] == 8 and counts["fp"] + counts["tn"] == 4
    assert 0.0 <= float(pooled[0]["dacc"]) <= 1.0 and pooled[0]["fnr"] != ""
