"""Star FedAvg beside peer-to-peer LIGHTYEAR as the number of sites grows: time, traffic, memory, CPU.

    python benchmarks/scale_curve.py                                 # 8 and 16 sites, full mesh, 3 rounds
    python benchmarks/scale_curve.py --sites 8 16 32 --topology full random --rounds 3
    python benchmarks/scale_curve.py --dataset digits --sites 8 --rounds 12 --repeat 3 --routes server direct
    python benchmarks/scale_curve.py --dataset digits --sites 8 --rounds 12 --forward-arrays job download small

For each number of sites and each topology it generates, from the ``digits32`` dataset settings
(the embedded digits spread over ``num_sites`` sites; ``--dataset digits``: the main job's), the
star FedAvg job and the LIGHTYEAR job with each ``--routes`` value of ``model_route``
(``server``: a site uploads its model once and the server hands it on; ``direct``: a site sends
every receiver its copy), runs them one after the other with
``nvflare simulator JOB -w WS -t SITES`` and prints, per run:

* ``wall_s``: the simulator command from launch to exit;
* ``round_s``: the median over rounds 1.. of a round's span (first site's start to last site's end);
* ``lo_MB_round``: bytes sent over the machine's loopback interface a round: every message of the
  simulator goes between a site and the server there, so this is the server's traffic in and out
  (other traffic on the machine adds to it), and ``copies_round`` the same in model copies (the
  model's size from the LIGHTYEAR site's ``rounds.csv`` ``bytes`` of the ``server`` route, or from
  the relay's log);
* ``relay_MB_round``: the model bytes the server took in and handed on a round, from its log
  (``server`` route only);
* ``peak_GiB`` and ``per_site_GiB``: the peak over time of the summed proportional set size of the
  simulator's processes, and that divided by the number of sites; ``site_GiB``: a site process's
  own peak (mean over sites), ``server_GiB`` the server process's;
* ``site_cpu_s``: a site process's user and system CPU seconds (mean over sites), ``site_sys_s`` the
  system part and ``site_kfaults`` its minor page faults in thousands (Linux; the kernel filling fresh
  or given-back pages, a count that other load on the machine does not inflate), and
  ``train_s``/``wait_s``/``score_s``/``aggregate_s``/``eval_s``: its phases' wall seconds summed over
  rounds (mean over sites), from ``rounds.csv``; ``server_cpu_s``: the server process's;
* ``acc``: the mean test accuracy of the sites.

The topology ``random`` is the directed random graph of average out-degree ``--degree`` (the
sparse topology of ``digits32``), ``full`` every site a neighbour of every other. Figures depend on
the machine's other load; runs of one invocation are side by side.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import statistics
import sys
import tempfile

import psutil

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "custom"))

from star_vs_p2p import _f, accuracy, run_job, site_rows  # noqa: E402  (this folder is on sys.path as a script)

from lightyear.cli import command  # noqa: E402
from lightyear.jobs import generate  # noqa: E402
from lightyear.jobs.settings import SettingError  # noqa: E402

PROG = "benchmarks/scale_curve.py"
RELAY_LINE = re.compile(
    r"models handed on by the server: \{'uploads': (\d+), 'forwarded': (\d+), "
    r"'bytes_in': (\d+), 'bytes_out': (\d+)"
)
FORWARD_CHUNK_BYTES = {"inline": 0, "download": 16 << 20, "small": 2 << 20}
"""The server's ``np_download_chunk_size`` of each ``--forward-arrays`` variant but ``job`` (0: arrays inline)."""
PHASE_COLUMNS = ("train_s", "wait_s", "score_s", "aggregate_s", "eval_s")


def build(
    method: str,
    sites: int,
    topology: str,
    degree: int,
    rounds: int,
    seed: int,
    route: str | None,
    dataset: str = "digits32",
):
    """(job name, files) of ``method`` on the digits over ``sites`` sites (``dataset`` ``digits``: its own 8)."""
    overrides = {"rounds": rounds}
    if dataset == "digits32":
        overrides.update({"sites": [f"site-{k}" for k in range(1, sites + 1)], "dataset_args": {"num_sites": sites}})
    elif sites != 8:
        raise SettingError(f"--dataset {dataset} has its own 8 sites: give --sites 8 (or --dataset digits32)")
    unset = []
    if method != "fedavg":
        overrides["topology"] = topology
        if topology == "random":
            overrides["topology_args"] = {"degree": degree}
        elif dataset == "digits32":  # its random topology's degree
            unset.append("topology_args")
        if route:
            overrides["model_route"] = route
    return generate.build_job(
        os.path.join(ROOT, "app_configs"), method, dataset, seed=seed, overrides=overrides, unset=unset
    )


def run(job: str, sites: int) -> dict:
    """Run ``job`` in the simulator (:func:`star_vs_p2p.run_job`), recording every process's CPU and memory."""
    ws = tempfile.mkdtemp(prefix="lightyear-scale-")
    cpu, pss = {}, {}

    def sample(tree: psutil.Process) -> int:
        """Record each process's CPU seconds, system part and minor faults, and its peak PSS, by role; the PSS of all of
        them."""
        total = 0
        try:
            processes = [tree, *tree.children(recursive=True)]
        except psutil.Error:
            processes = []
        for p in processes:
            try:
                role, times, used = _role(p.cmdline()), p.cpu_times(), p.memory_full_info().pss
            except psutil.Error:
                continue
            total += used
            cpu[p.pid] = (role, times.user + times.system, times.system, minor_faults(p.pid))
            pss[p.pid] = (role, max(used, pss.get(p.pid, (role, 0))[1]))
        return total

    lo_before = psutil.net_io_counters(pernic=True).get("lo")
    ran = run_job(job, sites, ws, sample=sample)
    lo_after = psutil.net_io_counters(pernic=True).get("lo")
    peak = ran["peak_pss_GiB"]
    out = {"rc": ran["rc"], "wall_s": ran["wall_s"], "peak_GiB": peak, "per_site_GiB": peak / sites}
    out["lo_bytes"] = (lo_after.bytes_sent - lo_before.bytes_sent) if lo_before and lo_after else float("nan")
    site_cpu = [seconds for role, seconds, *_ in cpu.values() if role == "site"]
    server_cpu = [seconds for role, seconds, *_ in cpu.values() if role == "server"]
    out["site_cpu_s"] = statistics.mean(site_cpu) if site_cpu else float("nan")
    out["server_cpu_s"] = max(server_cpu) if server_cpu else float("nan")
    site_kernel = [(system, faults) for role, _, system, faults in cpu.values() if role == "site"]
    out["site_sys_s"] = statistics.mean(s for s, _ in site_kernel) if site_kernel else float("nan")
    out["site_kfaults"] = statistics.mean(f for _, f in site_kernel) / 1000 if site_kernel else float("nan")
    site_pss = [used for role, used in pss.values() if role == "site"]
    out["site_GiB"] = statistics.mean(site_pss) / 2**30 if site_pss else float("nan")
    out["server_GiB"] = max((used for role, used in pss.values() if role == "server"), default=0) / 2**30
    out["ws"] = ws
    return out


def minor_faults(pid: int) -> float:
    """The minor page faults process ``pid`` has taken (``/proc/PID/stat``); NaN where that cannot be read."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return float(f.read().rsplit(")", 1)[1].split()[7])  # the 10th field; the name before ")" may hold spaces
    except (OSError, IndexError, ValueError):
        return float("nan")


def _role(cmdline: list[str]) -> str:
    if "--client" in cmdline:
        return "site"
    return "server" if any(part.endswith("nvflare") for part in cmdline[:2]) and "simulator" in cmdline else "other"


def rounds_figures(ws: str) -> dict:
    """The median round span over rounds 1.., and each phase's seconds summed over rounds (mean over sites)."""
    rows = site_rows(ws)
    spans: dict[int, list[float]] = {}
    for site_rows_ in rows.values():
        for r in site_rows_:
            if r.get("round_start") and r.get("round_end"):
                spans.setdefault(int(r["round"]), []).extend([_f(r, "round_start"), _f(r, "round_end")])
    per_round = [max(v) - min(v) for k, v in sorted(spans.items()) if k >= 1]
    out = {"round_s": statistics.median(per_round) if per_round else float("nan")}
    for column in PHASE_COLUMNS:
        totals = [sum(_f(r, column) for r in site_rows_) for site_rows_ in rows.values()]
        out[column] = statistics.mean(totals) if totals else float("nan")
    return out


def relay_bytes(ws: str) -> tuple[int, int] | None:
    """(model bytes the server took in and handed on, one model's bytes) from the server's log; None: no relay."""
    path = os.path.join(ws, "server", "log.txt")
    if not os.path.isfile(path):
        return None
    with open(path, errors="replace") as f:
        found = RELAY_LINE.findall(f.read())
    return (int(found[-1][2]) + int(found[-1][3]), int(found[-1][2]) // max(1, int(found[-1][0]))) if found else None


def at_least(low: int):
    """An argparse ``type``: a whole number >= ``low``."""

    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
        if value < low:
            raise argparse.ArgumentTypeError(f"{value} is less than {low}")
        return value

    return parse


@command(PROG)
def main(argv=None) -> int:
    parser = argparse.ArgumentParser(
        prog=PROG, description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--sites", type=at_least(2), nargs="+", default=[8, 16])
    parser.add_argument("--topology", nargs="+", default=["full"], choices=["full", "random"])
    parser.add_argument("--degree", type=at_least(1), default=3, help="out-degree of the random topology (default 3)")
    parser.add_argument("--routes", nargs="+", default=["server"], choices=["server", "direct"])
    parser.add_argument(
        "--forward-arrays",
        nargs="+",
        default=["job"],
        choices=["job", *FORWARD_CHUNK_BYTES],
        help="how the server sends a model it hands on: as the job says (job: inline in its message), inline, "
        "through FLARE's download service in 16 MiB chunks (download) or in its default 2 MiB chunks (small)",
    )
    parser.add_argument("--rounds", type=at_least(1), default=3)
    parser.add_argument(
        "--dataset", default="digits32", choices=["digits32", "digits"], help="digits: the main job's own 8 sites"
    )
    parser.add_argument("--repeat", type=at_least(1), default=1, help="times to run the whole set, one after the other")
    parser.add_argument("--no-star", action="store_true", help="leave out the star FedAvg runs")
    parser.add_argument("--seed", type=generate.seed_arg, default=0)
    args = parser.parse_args(argv)
    plan = []
    for sites in args.sites:
        for topology in args.topology:  # the server route first: its relay's log gives the model's size
            plan.extend((sites, topology, "lightyear", route) for route in sorted(args.routes, key="server".__ne__))
        if not args.no_star:
            plan.append((sites, "star", "fedavg", None))
    built = [  # every job built, and its settings checked, before anything is written or run
        (
            sites,
            topology,
            method,
            route,
            *build(method, sites, topology, args.degree, args.rounds, args.seed, route, args.dataset),
        )
        for sites, topology, method, route in plan
    ]
    folder = tempfile.mkdtemp(prefix="lightyear-scale-jobs-")
    jobs = {}
    for sites, topology, method, route, name, files in built:
        variants = args.forward_arrays if route == "server" else ["-"]
        for variant in variants:
            server = files["app/config/config_fed_server.json"]
            if variant in FORWARD_CHUNK_BYTES:  # the server's chunk size for the models it hands on
                server = dict(server, np_download_chunk_size=FORWARD_CHUNK_BYTES[variant])
            variant_files = dict(files, **{"app/config/config_fed_server.json": server})
            path = os.path.join(folder, f"{name}_{sites}_{topology}_{route or 'star'}_{variant}")
            generate.write_job(variant_files, path)
            jobs[(sites, topology, method, route if variant == "-" else f"{route}/{variant}")] = path
    columns = [
        "wall_s",
        "round_s",
        "lo_MB_round",
        "copies_round",
        "relay_MB_round",
        "peak_GiB",
        "per_site_GiB",
        "site_GiB",
        "server_GiB",
        "site_cpu_s",
        "site_sys_s",
        "site_kfaults",
        *PHASE_COLUMNS,
        "server_cpu_s",
        "acc",
    ]
    print(f"{os.cpu_count()} CPUs; digits over N sites, {args.rounds} rounds, seed {args.seed}")
    print(f"{'run':<30}" + "".join(f"{c:>15}" for c in columns), flush=True)
    model_bytes: dict[int, int] = {}  # sites -> one model's bytes, from a relay's log
    for repeat in range(args.repeat):
        for key, path in jobs.items():
            sites, topology, method, route = key
            r = run(path, sites)
            try:
                r.update(rounds_figures(r["ws"]))
                r["acc"] = accuracy(r["ws"])
                relayed = relay_bytes(r["ws"])
            finally:
                shutil.rmtree(r.pop("ws"), ignore_errors=True)
            r["lo_MB_round"] = r["lo_bytes"] / args.rounds / 1e6
            if relayed is not None:
                model_bytes[sites] = relayed[1]
            r["relay_MB_round"] = relayed[0] / args.rounds / 1e6 if relayed is not None else float("nan")
            size = model_bytes.get(sites)
            r["copies_round"] = r["lo_bytes"] / args.rounds / size if size else float("nan")
            label = f"{sites} {topology} {method} {route or ''}#{repeat + 1}" + (
                "" if r["rc"] == 0 else f" rc={r['rc']}"
            )
            print(f"{label:<30}" + "".join(f"{r[c]:>15.2f}" for c in columns), flush=True)
    shutil.rmtree(folder, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
