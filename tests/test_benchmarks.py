"""The benchmark scripts refuse bad arguments in one line, before any simulator starts."""

import mmap
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
    assert_refused("site_profile.py", argv, message, tmp_path)


def assert_refused(script: str, argv: list, message: str, tmp_path) -> None:
    """``benchmarks/<script> argv`` ends with exit status 2 and one ``error:`` line naming ``message``,
    no traceback, and leaves nothing in its temporary folder."""
    done = subprocess.run(
        [sys.executable, os.path.join(ROOT, "benchmarks", script), *argv],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "TMPDIR": str(tmp_path)},
    )
    assert done.returncode == 2, done.stdout + done.stderr
    last = done.stderr.splitlines()[-1]
    assert last.startswith(f"benchmarks/{script}: error: ") and message in last and "Traceback" not in done.stderr
    assert [n for n in os.listdir(tmp_path) if not n.startswith(f"lightyear-{os.getuid()}")] == []


def _workspace(root, rows_by_site):
    import csv

    for site, rows in rows_by_site.items():
        folder = root / site / "simulate_job"
        folder.mkdir(parents=True)
        with open(folder / "rounds.csv", "w", newline="") as f:
            writer = csv.DictWriter(f, fieldnames=sorted({k for r in rows for k in r}))
            writer.writeheader()
            writer.writerows(rows)
    return str(root)


def test_validated_cost_prints_passes_time_and_the_honest_peers_kept_from_two_runs(tmp_path):
    row = {"n_selected": 2, "selected": "site-2;site-3", "aggregate_s": 0.2, "test_acc": 0.9}
    validated = _workspace(
        tmp_path / "v",
        {
            "site-1": [{**row, "validation_evals": 1, "adopted": "site-2;site-3"}],
            "site-2": [{**row, "selected": "site-1;site-3", "validation_evals": 5, "adopted": "site-1"}],
        },
    )
    paper = _workspace(
        tmp_path / "p", {"site-1": [{**row, "aggregate_s": 0.1}], "site-2": [{**row, "aggregate_s": 0.1}]}
    )
    script = os.path.join(ROOT, "benchmarks", "validated_cost.py")
    done = subprocess.run(
        [sys.executable, script, "--validated", validated, "--paper", paper], capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr
    # passes 1 and 5 (|S| + 2 = 4: one of two within); 0.2 s against 0.1 s; 4 selected, 1 left out
    assert "mean 3.00, max 5, within |S| + 2 in 1 of 2 site-rounds" in done.stdout
    assert "validated 0.200 s, paper 0.100 s, ratio 2.00" in done.stdout and "left out 1 (25.0 %)" in done.stdout
    refused = subprocess.run(
        [sys.executable, script, "--validated", validated], capture_output=True, text=True, timeout=60
    )
    assert refused.returncode == 2 and "give both --validated and --paper" in refused.stderr.splitlines()[-1]


@pytest.mark.parametrize(
    "argv, message",
    [
        (["--dataset", "digits", "--sites", "16"], "--dataset digits has its own 8 sites: give --sites 8"),
        (["--sites", "1"], "argument --sites: 1 is less than 2"),
        (["--rounds", "0"], "argument --rounds: 0 is less than 1"),
        (["--routes", "relay"], "argument --routes: invalid choice: 'relay'"),
    ],
)
def test_scale_curve_refuses_bad_arguments_before_running(argv, message, tmp_path):
    assert_refused("scale_curve.py", argv, message, tmp_path)


def test_sealing_cost_prints_what_sealing_and_opening_a_model_take_and_refuses_bad_sizes(tmp_path):
    script = os.path.join(ROOT, "benchmarks", "sealing_cost.py")
    done = subprocess.run(
        [sys.executable, script, "--mb", "0.5", "--receivers", "2", "--repeat", "1"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("0.5 MB model, 2 receivers: seal ") and " ms, open " in done.stdout
    assert_refused("sealing_cost.py", ["--mb", "0"], "--mb must be in (0, 4096]", tmp_path)


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="minor faults are read from /proc")
def test_scale_curve_counts_the_pages_a_process_had_the_kernel_fill():
    sys.path.insert(0, os.path.join(ROOT, "benchmarks"))
    from scale_curve import minor_faults

    block = mmap.mmap(-1, 16 << 20)  # a fresh mapping: the kernel fills each of its pages once it is written
    block.madvise(getattr(mmap, "MADV_NOHUGEPAGE", 0))  # in 4 KiB pages, not 2 MiB ones
    before = minor_faults(os.getpid())
    for page in range(0, len(block), 4096):
        block[page] = 1
    assert minor_faults(os.getpid()) - before >= 4096 * 0.9  # 16 MiB is 4096 pages
    block.close()
    assert minor_faults(2**22 + 12345) != minor_faults(2**22 + 12345)  # no such process: NaN
