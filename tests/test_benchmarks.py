"""The benchmark scripts refuse bad arguments in one line, before any simulator starts."""

import os
import subprocess
import sys

import pytest

from repo import ROOT


@pytest.mark.parametrize(
    "argv, message",
    [
        (["--set", "rounds"], "--set takes KEY=VALUE"),
        (["--set", "tua=1"], "has no setting 'tua'"),
        (["--dataset", "nope"], "unknown dataset 'nope'"),
        (["--star", "nope"], "unknown method 'nope'"),
        (["--star", "lightyear"], "--star lightyear is a p2p method: give a star one"),
        (["--p2p-set", "train_args=null"], "train_args=null would drop"),
        (["--repeat", "0"], "argument --repeat: 0: give at least 1 pair"),
        (["--seed", "-1"], "argument --seed: -1 is outside 0..4294967295"),
    ],
)
def test_star_vs_p2p_refuses_bad_arguments_before_running(argv, message, tmp_path):
    done = subprocess.run(
        [sys.executable, os.path.join(ROOT, "benchmarks", "star_vs_p2p.py"), *argv, "--keep", str(tmp_path / "k")],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "TMPDIR": str(tmp_path)},
    )
    assert done.returncode == 2, done.stdout + done.stderr
    last = done.stderr.splitlines()[-1]  # after argparse's usage lines, where argparse refuses it
    assert last.startswith("benchmarks/star_vs_p2p.py: error: ") and message in last and "Traceback" not in done.stderr
    # no job folder left behind, no --keep folder made (the compute slots' lightyear-<uid> folder is shared)
    assert done.stdout == "" and [n for n in os.listdir(tmp_path) if not n.startswith(f"lightyear-{os.getuid()}")] == []


@pytest.mark.parametrize(
    "argv, message",
    [
        (["--interval", "0"], "argument --interval: 0: the interval must be above 0 seconds"),
        (["--interval", "soon"], "argument --interval: 'soon' is not a number of seconds"),
        (["--p2p", "fedavg"], "--p2p fedavg is a star method: give a p2p one"),
    ],
)
def test_site_profile_refuses_bad_arguments_before_running(argv, message, tmp_path):
    done = subprocess.run(
        [sys.executable, os.path.join(ROOT, "benchmarks", "site_profile.py"), *argv],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "TMPDIR": str(tmp_path)},
    )
    assert done.returncode == 2, done.stdout + done.stderr
    last = done.stderr.splitlines()[-1]
    assert last.startswith("benchmarks/site_profile.py: error: ") and message in last and "Traceback" not in done.stderr
    assert [n for n in os.listdir(tmp_path) if not n.startswith(f"lightyear-{os.getuid()}")] == []
