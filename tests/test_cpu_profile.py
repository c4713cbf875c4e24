"""The CPU profile of a FLARE process (benchmarks/cpu_profile.py): phases from stacks, thread groups,
per-thread clocks, the report."""

import json
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from nvflare.apis.event_type import EventType

from flare_fakes import FakeWorkspace, context
from repo import ROOT

sys.path.insert(0, os.path.join(ROOT, "benchmarks"))  # as for benchmarks/site_profile.py, its one user
from cpu_profile import (  # noqa: E402
    PROFILE_FILE,
    STACK_DEPTH,
    CPUProfile,
    Sampler,
    ThreadClock,
    phase_of,
    stack_key,
    thread_group,
)


def functions(path: str, source: str) -> dict:
    """The functions of ``source`` as if defined in a module at ``path`` (their code's file name)."""
    scope = {"sys": sys}
    exec(compile(source, path, "exec"), scope)
    return scope


HERE = "def here():\n    return sys._getframe()\n"
SLOTS = functions("/x/lightyear/training/compute_slots.py", HERE.replace("here", "_acquire"))
TRAINER = functions(
    "/x/lightyear/training/trainer.py",
    "def train(inner):\n    return inner()\n\ndef predict(inner):\n    return inner()\n\n"
    "def helper(inner):\n    return inner()\n",
)
STREAMING = functions("/x/nvflare/fuel/f3/streaming/stream.py", "def send(inner):\n    return inner()\n")
PLAIN = functions("/x/app.py", HERE)


def test_a_stack_takes_the_phase_of_the_first_rule_any_of_its_frames_matches():
    assert phase_of(TRAINER["train"](PLAIN["here"])) == "train"  # the outer frame decides
    assert phase_of(TRAINER["predict"](PLAIN["here"])) == "eval"
    # waiting for a compute slot inside training counts as slot_wait: its rule comes first
    assert phase_of(TRAINER["train"](SLOTS["_acquire"])) == "slot_wait"
    # a rule naming a function matches only that function; the file's catch-all rule takes the rest
    assert phase_of(TRAINER["helper"](PLAIN["here"])) == "lightyear_other"
    # FLARE's streaming before its transport rule (a prefix of the path)
    assert phase_of(STREAMING["send"](PLAIN["here"])) == "streaming"
    assert phase_of(PLAIN["here"]()) == "other"
    assert phase_of(None) == "other"


def test_threads_are_grouped_by_their_name_without_numbers():
    assert thread_group("stm_12") == "stm_N"
    assert thread_group("Thread-3 (_do_learn)") == "Thread-N (_do_learn)"
    assert thread_group("MainThread") == "MainThread"
    assert thread_group("") == "?"


def spin(seconds: float) -> None:
    end = time.thread_time() + seconds
    while time.thread_time() < end:
        pass


def test_a_thread_clock_reads_what_its_thread_used_since_the_last_reading():
    clock = ThreadClock(threading.get_native_id())
    clock.delta()
    spin(0.05)
    cpu, queued = clock.delta()
    assert 0.04e9 <= cpu < 5e9 and queued >= 0
    assert clock.delta()[0] < cpu  # read again at once: little or nothing more
    clock.close()
    assert clock.read() == (0, 0) and clock.delta() == (0, 0)
    gone = ThreadClock(2**22 + 12345)  # above Linux's largest thread id: no such thread
    assert gone.fd is None and gone.delta() == (0, 0)


def test_an_interval_must_be_a_positive_number_of_seconds():
    for bad in (0, -1, float("nan")):
        with pytest.raises(ValueError, match="interval"):
            Sampler(bad)


def test_a_sample_credits_each_busy_thread_to_its_phase_and_its_group():
    sampler = Sampler(interval=1.0)
    started, stop = threading.Event(), threading.Event()

    def work():
        started.set()
        while not stop.is_set():
            spin(0.01)

    busy = threading.Thread(target=TRAINER["train"], args=(work,), name="busy-7")
    busy.start()
    started.wait()
    try:
        sampler.sample()  # sees the thread first: no CPU is credited before it was seen
        assert sampler.phases.get("train") is None
        time.sleep(0.3)
        sampler.sample()
    finally:
        stop.set()
        busy.join()
    report = sampler.report()
    assert report["phases"]["train"]["cpu_s"] > 0.0
    assert report["thread_groups"]["busy-N"]["cpu_s"] == report["phases"]["train"]["cpu_s"]
    # active: the time between the two samples, which holds what the thread ran and queued
    active = report["phases"]["train"]["active_s"]
    assert 0.3 <= active < 5 and report["phases"]["train"]["cpu_s"] <= active + 0.05
    assert report["max_threads"] >= 2 and report["peak_anonymous_MiB"] > 0
    assert "train" in report["phases_at_peak_anonymous"] or report["phases_at_peak_anonymous"] == []
    # its stacks: the group, then the innermost frames (the spin or its loop, inside the trainer's train)
    mine = {k: v for k, v in report["stacks"].items() if k.startswith("busy-N | ")}
    assert sum(mine.values()) == pytest.approx(report["phases"]["train"]["cpu_s"])
    assert all("trainer.py:train" in k and len(k.split(" < ")) == STACK_DEPTH for k in mine)
    assert stack_key("g", None) == "g | "
    sampler.sample()  # the thread has ended: its clock is dropped
    assert busy.native_id not in sampler.clocks


def test_the_profiler_thread_counts_as_profiler_and_the_report_holds_the_process_figures():
    sampler = Sampler(interval=0.01)
    sampler.start()
    spin(0.1)
    time.sleep(0.1)
    sampler.stop()
    report = sampler.report()
    assert not sampler._thread.is_alive() and sampler.clocks == {}  # every clock closed at the end
    # this test's stack matches no rule (or, in a checkout named lightyear, the catch-all one)
    assert "profiler" in report["phases"] and set(report["phases"]) <= {"profiler", "other", "lightyear_other"}
    assert report["user_s"] + report["system_s"] >= 0.09 and report["wall_s"] >= 0.2
    assert report["peak_rss_MiB"] >= report["rss_anon_MiB"] > 0 and report["interval_s"] == 0.01
    for table in (report["phases"], report["thread_groups"]):
        cpu = [row["cpu_s"] for row in table.values()]
        assert cpu == sorted(cpu, reverse=True)


class Engine:
    def __init__(self, root):
        self.workspace = FakeWorkspace(root)

    def get_workspace(self):
        return self.workspace


def test_the_component_profiles_from_start_to_end_of_the_run_and_writes_its_file(tmp_path):
    for bad in ("", "a/b.json", None):
        with pytest.raises(ValueError, match="file_name"):
            CPUProfile(file_name=bad)
    profile = CPUProfile(interval=0.01)
    ctx = context(Engine(str(tmp_path)), site="site-2")
    profile.handle_event(EventType.END_RUN, ctx)  # before the run started: nothing to write
    assert not (tmp_path / PROFILE_FILE).exists()
    profile.handle_event(EventType.START_RUN, ctx)
    spin(0.05)
    profile.handle_event(EventType.END_RUN, ctx)
    written = json.loads((tmp_path / PROFILE_FILE).read_text())
    assert written["identity"] == "site-2" and written["interval_s"] == 0.01
    assert {"phases", "thread_groups", "user_s", "system_s", "minor_faults", "max_threads"} <= set(written)
    assert profile.run_dir == ""


class Workspace:
    def __init__(self, resources: str):
        self.resources = resources

    def get_resources_file_path(self):
        return self.resources


def test_site_profiles_simulator_admits_and_imports_the_profiler_from_outside_the_package(tmp_path):
    """What benchmarks/site_profile.py gives the simulator: a workspace policy that admits the profiler's
    class path (FLARE refuses any other, star_vs_p2p.run_job), and a PYTHONPATH on which it imports."""
    import site_profile
    from nvflare.apis.fl_exception import UnsafeComponentError
    from nvflare.app_common.widgets.component_path_authorizer import ComponentPathAuthorizer

    from lightyear.flare.component_policy import allow_package

    local = tmp_path / "local"
    local.mkdir()
    (local / "resources.json").write_text((Path(ROOT) / "workspace" / "local" / "resources.json").read_text())
    component = {"id": "cpu_profile", "path": site_profile.COMPONENT, "args": {}}
    authorizer = ComponentPathAuthorizer()
    with pytest.raises(UnsafeComponentError, match="not in allow_list"):
        authorizer.authorize_component_config(component, workspace=Workspace(str(local / "resources.json")))
    allow_package(str(local), site_profile.ALLOW)  # what run_job does with allow=ALLOW
    authorizer.authorize_component_config(component, workspace=Workspace(str(local / "resources.json")))

    module, name = site_profile.COMPONENT.rsplit(".", 1)
    env = {**os.environ, "PYTHONPATH": site_profile.simulator_pythonpath(os.path.join(ROOT, "custom"))}
    found = subprocess.run(
        [sys.executable, "-c", f"import {module}; print({module}.{name}.__module__, {module}.PROFILE_FILE)"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert found.returncode == 0, found.stderr
    assert found.stdout.split() == ["cpu_profile", site_profile.PROFILE_FILE]
