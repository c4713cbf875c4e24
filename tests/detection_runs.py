"""Hand-made run records for the detection and report tests: a sweep's run folders with the
decisions of LIGHTYEAR sites and of a Krum server, and their counts worked out by hand."""

import csv
import json
import os

from lightyear.algorithms.detection import DetectionCounts

SITES4 = ["site-1", "site-2", "site-3", "site-4"]


def make_run(
    folder,
    method,
    faulty,
    topology="p2p",
    sites=SITES4,
    dataset="digits",
    seed=0,
    malfunction="sfa",
    summary=True,
    **info,
):
    """A run folder as lightyear-sweep leaves it: job/meta.json and (``summary``) a finished summary.csv."""
    meta = {
        "name": os.path.basename(folder),
        "deploy_map": {"app": ["server"] + [s for s in sites if s not in faulty], "app_faulty": faulty},
        "lightyear": {
            "method": method,
            "dataset": dataset,
            "topology": topology,
            "malfunction": malfunction if faulty else "none",
            "faulty_sites": faulty,
            "seed": seed,
            **info,
        },
    }
    (folder / "job").mkdir(parents=True)
    (folder / "job" / "meta.json").write_text(json.dumps(meta))
    server = folder / "ws" / "server" / "simulate_job"
    server.mkdir(parents=True)
    if summary:
        lines = ["site,malfunction,status,acc"] + [
            f"{s},{'sfa' if s in faulty else 'none'},finished,0.5" for s in sites
        ]
        (server / "summary.csv").write_text("\n".join(lines) + "\n")
    return folder


def write_rounds(run, site, rows, columns):
    folder = run / "ws" / site / "simulate_job"
    folder.mkdir(parents=True, exist_ok=True)
    with open(folder / "rounds.csv", "w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=columns, restval="")
        writer.writeheader()
        writer.writerows(rows)


def write_history(run, history):
    (run / "ws" / "server" / "simulate_job" / "aggregator_state.json").write_text(json.dumps({"history": history}))


def lightyear_row(rnd, site, selected, scores, rejected="", late="", warming_up=0):
    senders = ";".join(s for s in SITES4 if s != site)
    return {
        "round": rnd,
        "site": site,
        "selected": selected,
        "warming_up": warming_up,
        **{f"{p}_score": v for p, v in scores.items()},
        "late": late,
        "rejected": rejected,
        "senders": senders,
    }


def lightyear_columns(site):
    return (
        ["round", "site", "selected", "warming_up"]
        + [f"{p}_score" for p in SITES4 if p != site]
        + ["late", "rejected", "senders"]
    )


def lightyear_run(folder, seed=0):
    """site-4 is faulty. Hand counts per benign receiver and round (TP, FP, TN, FN):
    site-1 r0: selects 2, leaves 3 and 4 out              -> (1, 1, 1, 0)
    site-1 r1: selects 2, 3; 4 rejected by the checks     -> (1, 0, 2, 0)
    site-2 r0: selects all three                          -> (0, 0, 2, 1)
    site-2 r1: 4 late (not evaluated); selects 1, not 3   -> (0, 1, 1, 0)
    site-3 r0: warming up, nothing rejected: no judgement -> (0, 0, 0, 0)
    site-3 r1: warming up, 4 rejected                     -> (1, 0, 0, 0)
    site-4 (faulty) selects nobody: never counted."""
    run = make_run(folder, "lightyear", ["site-4"], seed=seed)
    rows = {
        "site-1": [
            lightyear_row(0, "site-1", "site-2", {"site-2": 0.8, "site-3": 0.6, "site-4": 0.7}),
            lightyear_row(1, "site-1", "site-2;site-3", {"site-2": 0.8, "site-3": 0.8}, rejected="site-4"),
        ],
        "site-2": [
            lightyear_row(0, "site-2", "site-1;site-3;site-4", {"site-1": 0.9, "site-3": 0.9, "site-4": 0.9}),
            lightyear_row(1, "site-2", "site-1", {"site-1": 0.9, "site-3": 0.5}, late="site-4"),
        ],
        "site-3": [
            lightyear_row(0, "site-3", "", {"site-1": 0.9, "site-2": 0.9, "site-4": 0.1}, warming_up=1),
            lightyear_row(1, "site-3", "", {"site-1": 0.9, "site-2": 0.9}, rejected="site-4", warming_up=1),
        ],
        "site-4": [lightyear_row(r, "site-4", "", {"site-1": 0.1, "site-2": 0.1, "site-3": 0.1}) for r in (0, 1)],
    }
    for site, site_rows in rows.items():
        write_rounds(run, site, site_rows, lightyear_columns(site))
    return run


def krum_run(folder, seed=0):
    """site-4 is faulty. Server per round (TP, FP, TN, FN):
    r0: keeps 1, leaves 2, 3, 4 out                         -> (1, 2, 1, 0)
    r1: keeps 1, 2, leaves 3 out; 4's result refused         -> (1, 1, 2, 0)
    r2: an older record (no 'rejected'): keeps all four      -> (0, 0, 3, 1)"""
    run = make_run(folder, "krum", ["site-4"], topology="star", seed=seed)
    write_history(
        run,
        [
            {"round": 0, "kept": ["site-1"], "excluded": ["site-2", "site-3", "site-4"], "rejected": [], "f": 1},
            {"round": 1, "kept": ["site-1", "site-2"], "excluded": ["site-3"], "rejected": ["site-4"], "f": 0},
            {"round": 2, "kept": SITES4, "excluded": []},
        ],
    )
    return run


def counts(*values):
    return DetectionCounts(*values)
