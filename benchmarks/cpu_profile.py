"""Where one FLARE process's CPU time goes: a sampling profiler by phase and by thread (Linux).

:class:`CPUProfile` is a FLARE component for a job's client (and server) configuration, outside the
package: ``benchmarks/site_profile.py``, its one user, puts this folder on the simulator's
``PYTHONPATH`` and admits ``cpu_profile.`` in the workspace's component policy. From
``START_RUN`` to ``END_RUN`` a thread of its own wakes every ``interval`` seconds and reads, for
every Python thread of the process, the kernel's per-thread scheduler figures
(``/proc/self/task/<tid>/schedstat``: nanoseconds on a CPU and nanoseconds runnable but waiting for
one). What a thread consumed since the previous sample is put down to the phase its Python stack
shows now (:data:`PHASES`: the first rule, in order, that any frame of the stack matches), and to
its thread group (its name without numbers). Time a busy thread spent neither on a CPU nor in the
run queue is time it was blocked: for a thread that computes, mostly waiting for Python's GIL
while another thread of the process holds it.

At ``END_RUN`` it writes ``cpu_profile.json`` in the run folder: per phase and per thread group
the CPU seconds, run-queue seconds and active seconds (the time between samples in which the thread ran
or waited to run: an active thread's blocked time is what is left), the process's user and system CPU seconds, minor
page faults, peak resident size, resident anonymous/file memory at the end, the peak of the
anonymous memory over the samples with the phases active then, how many threads were alive
at most, and the CPU seconds of the :data:`STACKS_KEPT` busiest stacks (``stacks``: a thread group
and its innermost :data:`STACK_DEPTH` frames; a thread pool's worker that finished its work before
the sample shows as its idle loop, ``thread.py:_worker``). ``benchmarks/site_profile.py`` adds
this component to a star and a peer-to-peer job and prints the figures side by side.

A sample reads every thread's clock and walks the stacks of those that ran, holding the GIL
meanwhile: its cost grows with the threads alive and shows as the phase ``profiler`` (its share
of a site's CPU is in docs/results.md, "Training compute per topology"), so compare phases, not
totals, and lengthen ``interval`` for less. A phase's figure is the CPU a thread used between two
samples, credited to what it was doing at the second: short bursts are credited to a neighbour
phase at times, long phases (training, scoring) are exact to a sample. A thread's CPU before the
first sample that sees it, and after the last, is not counted: threads that live less than an
interval go uncounted.
"""

from __future__ import annotations

import json
import os
import re
import resource
import sys
import threading
import time

from nvflare.apis.event_type import EventType
from nvflare.apis.fl_component import FLComponent
from nvflare.apis.fl_context import FLContext

from lightyear.flare.process_memory import resident_private_bytes

PROFILE_FILE = "cpu_profile.json"
PHASES = (
    ("slot_wait", "lightyear/training/compute_slots.py", "_acquire"),
    ("aggregate", "lightyear/algorithms/p2p/validated_update.py", None),
    ("aggregate", "lightyear/algorithms/p2p/decayed_update.py", None),
    ("score", "lightyear/training/site_runtime.py", "assess"),
    ("train", "lightyear/training/trainer.py", "train"),
    ("eval", "lightyear/training/trainer.py", "predict"),
    ("setup", "lightyear/training/site_runtime.py", "__init__"),
    ("checkpoint", "lightyear/p2p/site/checkpoint.py", None),
    ("receive_check", "lightyear/p2p/wire/exchange.py", "on_model"),
    ("cell_gate", "lightyear/p2p/wire/cell_gate.py", None),
    ("server_aggregate", "lightyear/star/aggregator.py", None),
    ("serialise", "nvflare/fuel/utils/fobs/", None),
    ("download", "nvflare/fuel/f3/streaming/download_service.py", None),
    ("streaming", "nvflare/fuel/f3/streaming/", None),
    ("transport", "nvflare/fuel/f3/", None),
    ("flare_other", "nvflare/", None),
    ("lightyear_other", "lightyear/", None),
)
"""(phase, path fragment, function or None for any): a stack's phase is that of the first rule that
one of its frames matches; a stack that matches none is ``other``. The fragments name the package's
files: a renamed file or function needs its rule renamed here."""
_DIGITS = re.compile(r"\d+")
STACK_DEPTH = 4
"""Frames, innermost first, that name a stack in the report's ``stacks`` table."""
STACKS_KEPT = 60
"""Rows of the ``stacks`` table written, the most CPU first."""


_RANKS: dict = {}  # code object -> the rank of the first rule of PHASES it matches (len(PHASES): none)
_GROUPS: dict = {}


def _rank(code) -> int:
    rank = _RANKS.get(code)
    if rank is None:
        path = code.co_filename.replace(os.sep, "/")
        rank = next(
            (
                i
                for i, (_, fragment, function) in enumerate(PHASES)
                if fragment in path and (function is None or code.co_name == function)
            ),
            len(PHASES),
        )
        _RANKS[code] = rank
    return rank


def phase_of(frame) -> str:
    """The phase of a Python stack (its innermost ``frame``), by :data:`PHASES`."""
    best = len(PHASES)
    while frame is not None:
        best = min(best, _rank(frame.f_code))
        frame = frame.f_back
    return PHASES[best][0] if best < len(PHASES) else "other"


def stack_key(group: str, frame, depth: int = STACK_DEPTH) -> str:
    """``group | file:function < caller < ...``: a thread group and its innermost ``depth`` frames."""
    parts = []
    while frame is not None and len(parts) < depth:
        code = frame.f_code
        parts.append(f"{os.path.basename(code.co_filename)}:{code.co_name}")
        frame = frame.f_back
    return f"{group} | {' < '.join(parts)}"


def thread_group(name: str) -> str:
    """A thread's group: its name with every number replaced by ``N``."""
    group = _GROUPS.get(name)
    if group is None:
        group = _GROUPS[name] = _DIGITS.sub("N", name or "?")
    return group


class ThreadClock:
    """Reads one thread's (CPU ns, run-queue ns) from its ``schedstat``; (0, 0) once it is gone."""

    def __init__(self, native_id: int):
        try:
            self.fd = os.open(f"/proc/self/task/{native_id}/schedstat", os.O_RDONLY)
        except OSError:
            self.fd = None
        self.last = self.read()

    def read(self) -> tuple[int, int]:
        if self.fd is None:
            return 0, 0
        try:
            fields = os.pread(self.fd, 128, 0).split()
            return int(fields[0]), int(fields[1])
        except (OSError, ValueError, IndexError):
            return self.last

    def delta(self) -> tuple[int, int]:
        now = self.read()
        cpu, queued = now[0] - self.last[0], now[1] - self.last[1]
        self.last = now
        return max(cpu, 0), max(queued, 0)

    def close(self) -> None:
        if self.fd is not None:
            os.close(self.fd)
            self.fd = None


class Sampler:
    """The sampling loop of :class:`CPUProfile`, usable without FLARE (``start``/``stop``/``report``)."""

    def __init__(self, interval: float = 0.05):
        if not interval > 0:
            raise ValueError(f"interval must be a positive number of seconds, got {interval!r}")
        self.interval = float(interval)
        self.phases: dict[str, list[float]] = {}
        self.groups: dict[str, list[float]] = {}
        self.stacks: dict[str, float] = {}
        self.clocks: dict[int, ThreadClock] = {}
        self.max_threads = 0
        self.peak_anonymous: tuple[int, list] = (0, [])
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._start = (0.0, resource.getrusage(resource.RUSAGE_SELF))
        self._last = time.perf_counter()

    def start(self) -> None:
        self._start = (time.perf_counter(), resource.getrusage(resource.RUSAGE_SELF))
        self._last = self._start[0]
        self._thread = threading.Thread(target=self._loop, name="lightyear-cpu-profile", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5.0)

    def _loop(self) -> None:
        me = threading.get_ident()
        while not self._stop.wait(self.interval):
            self.sample(me)
        self.sample(me)
        for clock in self.clocks.values():
            clock.close()
        self.clocks.clear()

    def sample(self, skip: int | None = None) -> None:
        now = time.perf_counter()
        elapsed, self._last = now - self._last, now
        frames = sys._current_frames()
        threads = {t.ident: t for t in threading.enumerate()}
        self.max_threads = max(self.max_threads, len(threads))
        active = set()
        for ident, frame in frames.items():
            thread = threads.get(ident)
            if thread is None or thread.native_id is None:
                continue
            clock = self.clocks.get(thread.native_id)
            if clock is None:
                self.clocks[thread.native_id] = ThreadClock(thread.native_id)
                continue
            cpu, queued = clock.delta()
            if not cpu and not queued:
                continue
            phase = "profiler" if ident == skip else phase_of(frame)
            active.add(phase)
            group = thread_group(thread.name)
            if ident != skip:
                key = stack_key(group, frame)
                self.stacks[key] = self.stacks.get(key, 0.0) + cpu / 1e9
            for table, key in ((self.phases, phase), (self.groups, group)):
                row = table.setdefault(key, [0.0, 0.0, 0])
                row[0] += cpu / 1e9
                row[1] += queued / 1e9
                row[2] += elapsed
        alive = {t.native_id for t in threads.values()}
        for native_id in [n for n in self.clocks if n not in alive]:
            self.clocks.pop(native_id).close()
        anonymous = resident_private_bytes()
        if anonymous > self.peak_anonymous[0]:
            self.peak_anonymous = (anonymous, sorted(active - {"profiler"}))

    def report(self) -> dict:
        """The figures :class:`CPUProfile` writes (module docstring)."""
        began, usage0 = self._start
        usage = resource.getrusage(resource.RUSAGE_SELF)
        status = _status()

        def table(rows):
            return {
                k: {"cpu_s": v[0], "runqueue_s": v[1], "active_s": v[2]}
                for k, v in sorted(rows.items(), key=lambda kv: -kv[1][0])
            }

        return {
            "pid": os.getpid(),
            "wall_s": time.perf_counter() - began,
            "user_s": usage.ru_utime - usage0.ru_utime,
            "system_s": usage.ru_stime - usage0.ru_stime,
            "minor_faults": usage.ru_minflt - usage0.ru_minflt,
            "peak_rss_MiB": status.get("VmHWM", 0) / 1024,
            "rss_anon_MiB": status.get("RssAnon", 0) / 1024,
            "rss_file_MiB": status.get("RssFile", 0) / 1024,
            "max_threads": self.max_threads,
            "peak_anonymous_MiB": self.peak_anonymous[0] / 2**20,
            "phases_at_peak_anonymous": self.peak_anonymous[1],
            "interval_s": self.interval,
            "phases": table(self.phases),
            "thread_groups": table(self.groups),
            "stacks": dict(sorted(self.stacks.items(), key=lambda kv: -kv[1])[:STACKS_KEPT]),
        }


def _status() -> dict[str, int]:
    """The kB figures of ``/proc/self/status`` (empty where there is none)."""
    out = {}
    try:
        with open("/proc/self/status") as f:
            for line in f:
                key, _, value = line.partition(":")
                if value.strip().endswith("kB"):
                    out[key] = int(value.split()[0])
    except OSError:
        pass
    return out


class CPUProfile(FLComponent):
    """FLARE component: profiles its process from ``START_RUN`` to ``END_RUN`` (module docstring)."""

    def __init__(self, interval: float = 0.05, file_name: str = PROFILE_FILE):
        super().__init__()
        self.sampler = Sampler(interval)
        if not isinstance(file_name, str) or not file_name or os.sep in file_name:
            raise ValueError(f"file_name must be a plain file name, got {file_name!r}")
        self.file_name = file_name
        self.run_dir = ""

    def handle_event(self, event_type: str, fl_ctx: FLContext):
        if event_type == EventType.START_RUN:
            self.run_dir = fl_ctx.get_engine().get_workspace().get_run_dir(fl_ctx.get_job_id())
            self.sampler.start()
        elif event_type == EventType.END_RUN and self.run_dir:
            self.sampler.stop()
            report = {"identity": fl_ctx.get_identity_name(), **self.sampler.report()}
            try:
                with open(os.path.join(self.run_dir, self.file_name), "w") as f:
                    json.dump(report, f, indent=1)
            except OSError as exc:
                self.log_warning(fl_ctx, f"could not write {self.file_name}: {exc}")
            self.run_dir = ""
