"""Where a site's CPU time goes, star against peer-to-peer, on the same job: a profile by phase and thread.

    python benchmarks/site_profile.py                           # fedavg vs lightyear, digits, 8 sites
    python benchmarks/site_profile.py --set rounds=6 --keep /tmp/profiles
    python benchmarks/site_profile.py --swarm --interval 0.1       # Swarm Learning too, half the samples

Generates the star and the peer-to-peer job as ``benchmarks/star_vs_p2p.py`` does (same dataset,
seed, ``--set`` values), adds :class:`cpu_profile.CPUProfile` (``benchmarks/cpu_profile.py``) to
every participant (sites and server), runs each with ``nvflare simulator JOB -w WS -t SITES``, one after
the other, and prints for each topology, as means over the sites (and for the server process):

* per phase (``cpu_profile.PHASES``: training, scoring, aggregation, evaluation,
  FLARE's serialisation, streaming and transport, ...): CPU seconds, seconds runnable but waiting
  for a core (``runq``), and seconds blocked while active (neither: mostly the GIL, held by another
  thread of the process);
* per thread group: the same, for the groups that used at least 1 % of the process's CPU;
* the busiest stacks (a thread group and its innermost frames), CPU seconds, at least 1 % each;
* the process's user and system CPU seconds, minor page faults, peak resident size, resident
  anonymous memory at the end and the most threads alive at once;
* from ``rounds.csv``: the wall seconds of training (``train_s``, inside a compute slot).

The figures are CPU seconds unless named wall. Other load on the machine inflates ``runq``
and the wall figures, not CPU seconds.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "custom"))

from cpu_profile import PROFILE_FILE  # noqa: E402  (this folder is on sys.path as a script)
from star_vs_p2p import build_jobs, job_arguments, phases, run_job, site_rows  # noqa: E402

from lightyear.cli import command, output_folder  # noqa: E402
from lightyear.jobs import generate  # noqa: E402

PROG = "benchmarks/site_profile.py"
HERE = os.path.dirname(os.path.abspath(__file__))
COMPONENT = "cpu_profile.CPUProfile"
"""The profiler's class path: ``benchmarks/cpu_profile.py``, outside the package. :func:`main` puts
this folder on the simulator's ``PYTHONPATH`` and :data:`ALLOW` admits it in the workspace's
component policy."""
ALLOW = ("cpu_profile.",)
STACK_ROWS = 25
"""The busiest stacks printed for each topology."""


def simulator_pythonpath(current: str | None) -> str:
    """``PYTHONPATH`` for the simulator's processes: this folder (for :data:`COMPONENT`), then ``current``."""
    return os.pathsep.join(p for p in (HERE, current) if p)


def with_profile(files: dict, interval: float = 0.05) -> dict:
    """The job's files with :class:`cpu_profile.CPUProfile` in every participant's config."""
    component = {"id": "cpu_profile", "path": COMPONENT, "args": {"interval": interval}}
    out = dict(files)
    for path, config in files.items():
        if path.endswith(("config_fed_client.json", "config_fed_server.json")):
            out[path] = {**config, "components": [*config.get("components", []), component]}
    return out


def interval_arg(text: str) -> float:
    """An argparse ``type`` for ``--interval``: seconds > 0."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number of seconds") from None
    if not value > 0:
        raise argparse.ArgumentTypeError(f"{text}: the interval must be above 0 seconds")
    return value


def read_profiles(ws: str) -> dict[str, dict]:
    """{participant: its cpu_profile.json} of a finished simulator workspace."""
    found = {}
    for name in sorted(os.listdir(ws)):
        path = os.path.join(ws, name, "simulate_job", PROFILE_FILE)
        if os.path.isfile(path):
            with open(path) as f:
                found[name] = json.load(f)
    return found


def mean_table(profiles: list[dict], key: str) -> dict[str, dict]:
    """Mean over ``profiles`` of each row of table ``key`` (``phases`` or ``thread_groups``)."""
    names = {n for p in profiles for n in p[key]}
    out = {}
    for name in names:
        rows = [p[key].get(name, {}) for p in profiles]
        out[name] = {f: statistics.mean(r.get(f, 0.0) for r in rows) for f in ("cpu_s", "runqueue_s", "active_s")}
    return dict(sorted(out.items(), key=lambda kv: -kv[1]["cpu_s"]))


def print_table(title: str, table: dict, total: float, floor: float = 0.0) -> None:
    print(f"  {title:<24}{'cpu_s':>9}{'share':>8}{'runq_s':>9}{'blocked_s':>11}")
    for name, row in table.items():
        if row["cpu_s"] < floor * total:
            continue
        blocked = max(0.0, row["active_s"] - row["cpu_s"] - row["runqueue_s"])
        print(
            f"  {name:<24}{row['cpu_s']:>9.2f}{row['cpu_s'] / max(total, 1e-9):>8.1%}"
            f"{row['runqueue_s']:>9.2f}{blocked:>11.2f}"
        )


def print_stacks(profiles: list[dict], total: float, rows: int = STACK_ROWS) -> None:
    """The busiest stacks over ``profiles`` (CPU seconds, mean a profile), each at least 1 % of ``total``."""
    means: dict[str, float] = {}
    for profile in profiles:
        for key, cpu in profile.get("stacks", {}).items():
            means[key] = means.get(key, 0.0) + cpu / len(profiles)
    print(f"  {'stack (a site): thread group | innermost frames':<104}{'cpu_s':>9}")
    for key, cpu in sorted(means.items(), key=lambda kv: -kv[1])[:rows]:
        if cpu >= 0.01 * total:
            print(f"  {key[:104]:<104}{cpu:>9.2f}")


def summary(profiles: list[dict]) -> dict:
    keys = ("user_s", "system_s", "minor_faults", "peak_rss_MiB", "rss_anon_MiB", "max_threads", "peak_anonymous_MiB")
    return {k: statistics.mean(p[k] for p in profiles) for k in keys}


def report(label: str, topology: str, ws: str, run: dict) -> dict:
    """Print one run's profile; returns the site means."""
    profiles = read_profiles(ws)
    sites = [p for name, p in profiles.items() if name != "server"]
    print(
        f"\n{label}: wall {run['wall_s']:.1f} s, exit code {run['rc']}, {len(sites)} site profiles, "
        f"peak PSS {run['peak_pss_GiB']:.2f} GiB"
    )
    if not sites:
        print("  no cpu_profile.json written")
        return {}
    walls = phases(site_rows(ws), topology)
    s = summary(sites)
    total = s["user_s"] + s["system_s"]
    print(
        f"  a site, mean: CPU {total:.2f} s (user {s['user_s']:.2f}, system {s['system_s']:.2f}), minor faults "
        f"{s['minor_faults']:.0f}, peak RSS {s['peak_rss_MiB']:.0f} MiB, "
        f"anonymous at the end {s['rss_anon_MiB']:.0f} MiB, "
        f"threads up to {s['max_threads']:.0f}; peak anonymous {s['peak_anonymous_MiB']:.0f} MiB (during "
        f"{', '.join(sorted({p for site in sites for p in site['phases_at_peak_anonymous']}))}); "
        f"wall train_s {walls['train']:.2f}, score_s {walls['score']:.2f}, "
        f"aggregate_s {walls['aggregate']:.2f}, eval_s {walls['eval']:.2f}, slot_wait_s {walls['slot_wait']:.2f}"
    )
    print_table("phase (a site)", mean_table(sites, "phases"), total)
    print_table("thread group (a site)", mean_table(sites, "thread_groups"), total, floor=0.01)
    print_stacks(sites, total)
    if "server" in profiles:
        server = profiles["server"]
        cpu = server["user_s"] + server["system_s"]
        print(
            f"  server process: CPU {cpu:.2f} s (user {server['user_s']:.2f}, system {server['system_s']:.2f}), "
            f"peak RSS {server['peak_rss_MiB']:.0f} MiB"
        )
        print_table("phase (server)", mean_table([server], "phases"), cpu, floor=0.01)
    return {"cpu_s": total, **s, **{f"wall_{k}_s": v for k, v in walls.items()}}


@command(PROG)
def main(argv=None) -> int:
    parser = argparse.ArgumentParser(
        prog=PROG, description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    job_arguments(parser)
    parser.add_argument("--keep", help="copy each run's workspace here")
    parser.add_argument("--swarm", action="store_true", help="profile FLARE's Swarm Learning on the star job too")
    parser.add_argument(
        "--interval",
        type=interval_arg,
        default=0.05,
        help="seconds between samples (default 0.05; the profiler's own CPU is its row 'profiler')",
    )
    args = parser.parse_args(argv)
    folder = tempfile.mkdtemp(prefix="lightyear-profile-jobs-")
    try:
        jobs = build_jobs(args, os.path.join(ROOT, "app_configs"), folder)
        keep = output_folder(args.keep, "--keep") if args.keep is not None else None
        print(f"{os.cpu_count()} CPUs; figures are CPU seconds over the whole run unless named wall")
        os.environ["PYTHONPATH"] = simulator_pythonpath(os.environ.get("PYTHONPATH"))
        for role in jobs:
            path, sites, files = jobs[role]
            generate.write_job(with_profile(files, args.interval), path)
            ws = tempfile.mkdtemp(prefix="lightyear-profile-")
            try:
                run = run_job(path, sites, ws, allow=ALLOW)
                report(f"{os.path.basename(path)} ({role})", "p2p" if role == "p2p" else "star", ws, run)
                if keep:
                    shutil.copytree(ws, os.path.join(keep, os.path.basename(path)), dirs_exist_ok=True)
            finally:
                shutil.rmtree(ws, ignore_errors=True)
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
