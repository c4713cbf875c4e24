"""Real `nvflare simulator` runs of small generated jobs (tens of seconds each)."""

import csv
import json
import os
import shutil
import subprocess
import sys

import pytest

from lightyear.jobs import generate

from repo import ROOT, start_timeouts

CONFIGS = os.path.join(ROOT, "app_configs")
NVFLARE = os.path.join(os.path.dirname(sys.executable), "nvflare")

pytestmark = pytest.mark.simulator


def run_job(tmp_path, method, sites, malfunction="none", faulty=0, dataset="digits", **overrides):
    # generous start timeouts: a loaded 2-core machine can take over a minute to start the sites
    settings = {"sites": sites, "rounds": 2, **start_timeouts(method), **overrides}
    name, files = generate.build_job(CONFIGS, method, dataset, malfunction, faulty, seed=0, overrides=settings)
    job = tmp_path / "jobs" / name
    generate.write_job(files, str(job))
    ws = tmp_path / "ws"
    (ws / "local").mkdir(parents=True)
    shutil.copy(os.path.join(ROOT, "workspace", "local", "resources.json"), ws / "local")
    proc = subprocess.run(
        [NVFLARE, "simulator", str(job), "-w", str(ws), "-t", str(len(sites))],
        capture_output=True,
        text=True,
        timeout=400,
        cwd=str(tmp_path),
    )
    log = proc.stdout + proc.stderr
    summary = ws / "server" / "simulate_job" / "summary.json"
    assert summary.exists(), f"no summary written; simulator output ends with:\n{log[-3000:]}"
    return ws, json.loads(summary.read_text()), log


def rounds(ws, site):
    with open(ws / site / "simulate_job" / "rounds.csv", newline="") as f:
        return list(csv.DictReader(f))


def test_lightyear_benign_sites_never_select_a_sign_flipping_site(tmp_path):
    sites = ["site-1", "site-2", "site-3", "site-4"]
    ws, summary, log = run_job(
        tmp_path, "lightyear", sites, "sfa", 1, train_args={"local_epochs": 8, "batch_size": 16, "lr": 0.002}
    )
    for site in sites[:3]:
        rows = rounds(ws, site)
        assert [int(r["round"]) for r in rows] == [0, 1]
        for r in rows:
            assert "site-4" not in r["selected"].split(";"), f"{site} selected the faulty site in round {r['round']}"
            assert float(r["site-4_score"]) < 0.75
            assert r["late"] == "" and r["rejected"] == ""
    faulty_rows = rounds(ws, "site-4")
    assert {r["malfunction"] for r in faulty_rows} == {"sfa"}
    by_site = {row["site"]: row for row in summary}
    assert by_site["site-4"]["malfunction"] == "sfa"
    assert by_site["mean_benign"]["malfunction"] == "n=3"
    assert 0.0 <= by_site["mean_benign"]["acc"] <= 1.0
    assert (ws / "server" / "simulate_job" / "progress.jsonl").exists()
    # per-round metrics reached TensorBoard (one message a site and round, written by the server)
    events = list((ws / "server" / "simulate_job" / "tb_events").rglob("events.out.tfevents.*"))
    assert events and any("site-1" in str(e) for e in events), events
    # a healthy run logs no ERROR line (a peer's ping before a site registered its handler is none)
    logs = log + "".join(p.read_text(errors="replace") for p in ws.glob("*/log.txt"))
    assert [line for line in logs.splitlines() if " - ERROR - " in line] == []


def test_fedavg_star_run_writes_summary_and_checkpoint(tmp_path):
    sites = ["site-1", "site-2", "site-3"]
    ws, summary, log = run_job(tmp_path, "fedavg", sites)
    assert (ws / "server" / "simulate_job" / "global_model.npz").exists()
    by_site = {row["site"]: row for row in summary}
    assert set(by_site) == set(sites) | {"mean_benign", "std_benign"}
    # every site evaluates the same final global model on its own test set
    assert [int(r["round"]) for r in rounds(ws, "site-1")] == [0, 1, 2]


@pytest.mark.extended
def test_lightyear_shapes_segmentation_run(tmp_path):
    sites = ["site-1", "site-2", "site-3", "site-4", "site-5"]
    ws, summary, log = run_job(tmp_path, "lightyear", sites, dataset="shapes")
    by_site = {row["site"]: row for row in summary}
    assert by_site["mean_benign"]["malfunction"] == "n=5"
    assert 0.0 <= by_site["mean_benign"]["dice"] <= 1.0
    rows = rounds(ws, "site-1")
    assert [int(r["round"]) for r in rows] == [0, 1]
    for r in rows:
        assert 0.0 <= float(r["val_dice"]) <= 1.0
        # the performance term of the agreement score is the Dice agreement (Eq. 16)
        assert 0.0 <= float(r["site-2_perf"]) <= 1.0
        assert r["selected"] == "" or set(r["selected"].split(";")) <= set(sites[1:])


def _site_worker_pid(ws, site):
    """The simulator worker process of ``site`` (its command line names the site's workspace folder)."""
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                args = f.read().split(b"\0")
        except OSError:
            continue
        text = [a.decode(errors="replace") for a in args]
        if (
            any("simulator_worker" in a for a in text)
            and "--client" in text
            and text[text.index("--client") + 1] == site
        ):
            if any(str(ws) in a for a in text):
                return int(pid)
    return None


@pytest.mark.extended
def test_a_killed_site_is_dropped_and_the_others_finish(tmp_path):
    import signal
    import time

    sites = ["site-1", "site-2", "site-3", "site-4"]
    overrides = {
        "sites": sites,
        "rounds": 3,
        "peer_deadline": 10.0,
        "train_args": {"local_epochs": 1, "batch_size": 64},
        "start_timeout": 240.0,
        "ready_timeout": 240.0,
    }
    name, files = generate.build_job(CONFIGS, "lightyear", "digits", seed=0, overrides=overrides)
    job = tmp_path / "jobs" / name
    generate.write_job(files, str(job))
    ws = tmp_path / "ws"
    (ws / "local").mkdir(parents=True)
    shutil.copy(os.path.join(ROOT, "workspace", "local", "resources.json"), ws / "local")
    log = open(tmp_path / "simulator.log", "w")
    proc = subprocess.Popen(
        [NVFLARE, "simulator", str(job), "-w", str(ws), "-t", "4"],
        stdout=log,
        stderr=subprocess.STDOUT,
        cwd=str(tmp_path),
        start_new_session=True,
    )
    try:
        # kill site-4 once the server has heard of its first round (what the summary then reports),
        # not merely once the site wrote it: on a loaded machine the report can lag behind the file
        progress = ws / "server" / "simulate_job" / "progress.jsonl"
        deadline = time.monotonic() + 300
        while time.monotonic() < deadline and not _server_heard(progress, "site-4"):
            assert proc.poll() is None, "the simulator ended before site-4 reported a round"
            time.sleep(0.5)
        pid = _site_worker_pid(ws, "site-4")
        assert pid, "site-4's worker process not found"
        os.kill(pid, signal.SIGKILL)
        killed_at = time.monotonic()
        proc.wait(timeout=400)
        after_kill = time.monotonic() - killed_at
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
        log.close()
    output = (tmp_path / "simulator.log").read_text()
    summary = ws / "server" / "simulate_job" / "summary.json"
    assert summary.exists(), f"no summary written; simulator output ends with:\n{output[-3000:]}"
    by_site = {row["site"]: row for row in json.loads(summary.read_text())}
    assert by_site["site-4"]["status"] == "dropped", by_site["site-4"]
    assert by_site["site-4"]["last_round"] in (0, 1)
    for site in sites[:3]:
        assert by_site[site]["status"] == "finished"
        assert [int(r["round"]) for r in rounds(ws, site)] == [0, 1, 2]
    # one deadline for the dead neighbour, then the remaining rounds without waiting for it
    assert after_kill < 150, f"the run took {after_kill:.0f} s after the kill"


def _server_heard(progress, site):
    """Whether the server's progress log holds a finished round of ``site``."""
    if not progress.exists():
        return False
    for line in progress.read_text().splitlines():
        try:
            if json.loads(line).get("site") == site:
                return True
        except ValueError:
            continue  # a line being written
    return False


STAR_BASELINES = ["fedprox", "ditto", "krum", "afa", "asmr", "cfl", "fedcap"]


@pytest.mark.extended
@pytest.mark.parametrize("method", STAR_BASELINES)
def test_star_baseline_with_a_sign_flipping_site_finishes_and_writes_its_summary(tmp_path, method):
    sites = ["site-1", "site-2", "site-3"]
    # every round waits for all three sites, so a slow machine cannot leave one out of a round
    ws, summary, log = run_job(
        tmp_path, method, sites, "sfa", 1, train_args={"local_epochs": 1, "batch_size": 64}, min_clients=3
    )
    by_site = {row["site"]: row for row in summary}
    assert by_site["site-3"]["malfunction"] == "sfa"
    assert by_site["mean_benign"]["malfunction"] == "n=2"
    assert all(by_site[s]["status"] == "finished" for s in sites)
    assert 0.0 <= by_site["mean_benign"]["acc"] <= 1.0
    assert [int(r["round"]) for r in rounds(ws, "site-1")] == [0, 1, 2]
    server = ws / "server" / "simulate_job"
    assert (server / "global_model.npz").exists()
    if method in ("fedprox", "ditto"):
        assert not (server / "aggregator_state.json").exists()  # FedAvg on the server: no state
    else:
        state = json.loads((server / "aggregator_state.json").read_text())
        assert [h["round"] for h in state["history"]] == [0, 1]
        if method == "krum":  # default_f(3) = 0: the model nearest the other one is kept
            assert all("site-3" not in h["kept"] for h in state["history"])
        if method == "afa":
            assert set(state["reputation"]["alpha"]) == set(sites)
        if method == "fedcap":
            # ||-w - w^0|| is about twice the initial model's norm (2 x 14.4), above digits' T_norm = 20
            assert state["fedcap"]["removed"] == {"site-3": 0}
            assert (server / "aggregator_state.npz").exists()
            # a removed site is sent no more training tasks, only the final evaluation
            assert [int(r["round"]) for r in rounds(ws, "site-3")] == [0, 2]
    if method in ("ditto", "fedcap"):
        assert (ws / "site-1" / "simulate_job" / "personal_model.npz").exists()
        assert {r["model"] for r in rounds(ws, "site-1")} == {"personal"}


SPARSE = {"topology": "random", "topology_args": {"degree": 2}, "train_args": {"local_epochs": 1, "batch_size": 64}}
"""4 sites, 8 directed edges drawn from the seed and strongly connected: every site hears 2 peers."""


@pytest.mark.parametrize(
    "method, settings, columns",
    [
        ("lightyear", {}, ["site-2_score"]),
        ("p2p_fedavg", {"sample_neighbours": 1}, []),
        ("balance", {}, ["site-2_distance", "site-2_accepted", "radius"]),
        ("scclip", {}, ["site-2_distance", "site-2_scale", "radius"]),
        ("defta", {}, ["site-2_trust", "site-2_theta", "site-2_p", "sampled"]),
        ("defta", {"asynchronous": True}, ["site-2_trust", "site-2_staleness"]),
    ],
    ids=["lightyear", "p2p_fedavg-sampled", "balance", "scclip", "defta", "defta-async"],
)
@pytest.mark.extended
def test_p2p_methods_finish_on_a_sparse_topology_with_a_sign_flipping_site(tmp_path, method, settings, columns):
    sites = ["site-1", "site-2", "site-3", "site-4"]
    ws, summary, log = run_job(tmp_path, method, sites, "sfa", 1, **SPARSE, **settings)
    by_site = {row["site"]: row for row in summary}
    assert all(by_site[s]["status"] == "finished" for s in sites), summary
    assert by_site["site-4"]["malfunction"] == "sfa" and by_site["mean_benign"]["malfunction"] == "n=3"
    assert 0.0 <= by_site["mean_benign"]["acc"] <= 1.0
    for site in ("site-1", "site-3"):  # site-1 hears site-2 and site-3; site-3 hears site-2 and the faulty site-4
        rows = rounds(ws, site)
        assert [int(r["round"]) for r in rows] == [0, 1]
        for column in columns:
            assert column in rows[0], f"{method}: no {column} in {site}'s records"
        for r in rows:
            senders = [s for s in r["senders"].split(";") if s]
            assert len(senders) == settings.get("sample_neighbours", 2)
            assert r["rejected"] == "" and (settings.get("asynchronous") or r["late"] == "")
    assert {r["malfunction"] for r in rounds(ws, "site-4")} == {"sfa"}
