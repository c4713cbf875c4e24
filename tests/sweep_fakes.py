"""The stand-in for ``nvflare simulator`` the lightyear-sweep tests run, and their helpers.

The stand-in (:data:`FAKE`, installed as $LIGHTYEAR_NVFLARE by the ``fake`` fixture of
``tests/experiments/conftest.py``) behaves by the job's seed: seed 1 fails the way FLARE does
(ERROR lines, exit 0, no summary), seed 4 writes a summary in which every site dropped, seeds 5 and
6 meet FLARE's start race (a worker dies at start) the first time and every time, seed 2 hangs with
a child process and a site worker in a session of its own, as FLARE starts them (to check that
Ctrl-C ends both), any other seed writes a summary after two progress records.
"""

import json
import os

from lightyear.experiments import sweep

from repo import ROOT

CONFIGS = os.path.join(ROOT, "app_configs")
CUSTOM = os.path.join(ROOT, "custom")

FAKE = r"""
import json, os, subprocess, sys, time
job, ws = sys.argv[2], sys.argv[sys.argv.index("-w") + 1]
meta = json.load(open(os.path.join(job, "meta.json")))
seed = meta["lightyear"]["seed"]
print("fake simulator", meta["name"], "sites", sys.argv[sys.argv.index("-t") + 1], flush=True)
run = os.path.join(ws, "server", "simulate_job")
os.makedirs(run, exist_ok=True)
if seed == 1:
    print("2026-01-01 - ERROR - received unknown aux message topic lightyear.ping")
    print("2026-01-01 - ERROR - site-2 failed: CUDA out of memory")
    sys.exit(0)
if seed == 4:  # peer-to-peer runs whose sites all dropped still write a summary
    print("2026-01-01 - ERROR - the peer-to-peer run failed: site-1: ValueError: no data")
    with open(os.path.join(run, "summary.csv"), "w") as f:
        f.write("site,malfunction,status,acc\nsite-1,none,dropped,nan\nmean_benign,n=0,,nan\nstd_benign,n=0,,nan\n")
    sys.exit(0)
if seed in (5, 6):  # FLARE's start race: a worker died at start (seed 5: the first time only)
    count = os.path.join(os.path.dirname(ws), "attempts")
    attempt = int(open(count).read()) + 1 if os.path.exists(count) else 1
    open(count, "w").write(str(attempt))
    if attempt == 1 or seed == 6:
        print("2026-01-01 - SimulatorRunner - ERROR - Subprocess died for client site-2 before send, exit code: 1")
        sys.exit(0)
if seed == 2:
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
    worker = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"], start_new_session=True)
    open(os.path.join(ws, "pids"), "w").write(f"{os.getpid()} {child.pid} {worker.pid}")
    time.sleep(600)
for rnd in range(2):
    with open(os.path.join(run, "progress.jsonl"), "a") as f:
        f.write(json.dumps({"round": rnd, "site": "site-1"}) + "\n")
    time.sleep(0.1)
with open(os.path.join(run, "summary.csv"), "w") as f:
    f.write("site,malfunction,status,acc\nsite-1,none,finished,0.5\nmean_benign,n=1,,0.5\nstd_benign,n=1,,0.0\n")
"""


def write_spec(tmp_path, seeds, name="s.json", **extra):
    spec = {
        "datasets": ["digits"],
        "methods": ["fedavg"],
        "faulty": [0],
        "seeds": seeds,
        "set": {"sites": ["site-1", "site-2"], "rounds": 2},
        **extra,
    }
    path = tmp_path / name
    path.write_text(json.dumps(spec))
    return str(path)


def statuses(out):
    return {n: r["status"] for n, r in json.loads((out / "sweep_status.json").read_text())["runs"].items()}


def env():
    return {**os.environ, "PYTHONPATH": CUSTOM + os.pathsep + os.environ.get("PYTHONPATH", "")}


def refused(capsys, argv, message):
    """lightyear-sweep ARGV ends in one line naming the problem, exit status 2."""
    assert sweep.main(argv) == 2
    err = capsys.readouterr().err
    assert message in err and err.count("\n") == 1 and err.startswith("lightyear-sweep: error: "), err
