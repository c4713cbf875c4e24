"""Compute slots: at most N holders at once across processes, none when disabled."""

import multiprocessing as mp
import time

import pytest

from lightyear.training.compute_slots import ComputeSlots, resolve_slots


def _hold(folder, slots, seconds, out):
    s = ComputeSlots(slots, folder=folder)
    with s.hold():
        out.put(("in", time.monotonic()))
        time.sleep(seconds)
        out.put(("out", time.monotonic()))


def test_at_most_n_processes_hold_a_slot(tmp_path):
    out = mp.Queue()
    procs = [mp.Process(target=_hold, args=(str(tmp_path), 2, 0.3, out)) for _ in range(4)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(timeout=20)
    events = sorted((t, kind) for kind, t in (out.get() for _ in range(8)))
    inside, peak = 0, 0
    for _, kind in events:
        inside += 1 if kind == "in" else -1
        peak = max(peak, inside)
    assert peak == 2


def test_zero_means_no_limit(tmp_path):
    s = ComputeSlots(0, folder=str(tmp_path / "unused"))
    with s.hold():
        with s.hold():
            pass
    assert not (tmp_path / "unused").exists()


def test_auto_is_the_cpu_count_and_bad_values_are_refused():
    assert resolve_slots("auto") >= 1
    with pytest.raises(ValueError, match="compute_slots"):
        resolve_slots(-1)
