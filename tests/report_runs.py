"""A hand-written sweep folder for the lightyear-report tests: run folders as lightyear-sweep leaves
them (job/meta.json, summary.csv, the sites' rounds.csv), with numbers worked out by hand."""

import csv
import json

SITES3 = ["site-1", "site-2", "site-3"]


def make_run(
    sweep,
    name,
    method,
    dataset,
    malfunction,
    faulty,
    seed,
    values,
    topology=None,
    metric="acc",
    rounds=None,
    statuses=None,
):
    """A run folder as lightyear-sweep leaves it: job/meta.json, summary.csv and optionally rounds.csv."""
    run = sweep / "runs" / name
    sites = sorted(values or dict.fromkeys(SITES3))
    meta = {
        "name": name,
        "deploy_map": {"app": ["server"] + [s for s in sites if s not in faulty], "app_faulty": faulty},
        "lightyear": {
            "method": method,
            "dataset": dataset,
            "topology": topology or ("star" if method == "fedavg" else "p2p"),
            "malfunction": malfunction,
            "faulty_sites": faulty,
            "seed": seed,
        },
    }
    (run / "job" / "app" / "config").mkdir(parents=True)
    (run / "job" / "meta.json").write_text(json.dumps(meta))
    (run / "job" / "app" / "config" / "config_fed_client.json").write_text(
        json.dumps({"executors": [{"executor": {"args": {"tau": 0.75}}}]})
    )
    if values is None:
        return run
    server = run / "ws" / "server" / "simulate_job"
    server.mkdir(parents=True)
    with open(server / "summary.csv", "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["site", "malfunction", "status", metric, "ece"])
        for site in sites:
            w.writerow(
                [
                    site,
                    malfunction if site in faulty else "none",
                    (statuses or {}).get(site, "finished"),
                    values[site],
                    0.1,
                ]
            )
        w.writerow(["mean_benign", "n=?", "", 0.123, 0.1])  # summary rows are recomputed, never read
        w.writerow(["std_benign", "n=?", "", 0.456, 0.0])
    for site, rows in (rounds or {}).items():
        folder = run / "ws" / site / "simulate_job"
        folder.mkdir(parents=True)
        cols = ["round", "site", "malfunction", "selected"] + [f"{p}_score" for p in sites if p != site] + ["val_acc"]
        with open(folder / "rounds.csv", "w", newline="") as f:
            w = csv.DictWriter(f, fieldnames=cols, restval="")
            w.writeheader()
            for rnd, (chosen, scores) in enumerate(rows):
                w.writerow(
                    {
                        "round": rnd,
                        "site": site,
                        "malfunction": "sfa" if site in faulty else "none",
                        "selected": ";".join(chosen),
                        **{f"{p}_score": v for p, v in scores.items()},
                        "val_acc": 0.5,
                    }
                )
    return run


# site-1 picks the faulty site-3 in round 0, site-2 in round 1; site-2 did not score site-3 in round 2
SFA_ROUNDS = {
    "site-1": [
        (["site-2", "site-3"], {"site-2": 0.8, "site-3": 0.76}),
        (["site-2"], {"site-2": 0.8, "site-3": 0.5}),
        (["site-2"], {"site-2": 0.9, "site-3": 0.4}),
    ],
    "site-2": [
        (["site-1"], {"site-1": 0.8, "site-3": 0.6}),
        (["site-1", "site-3"], {"site-1": 0.8, "site-3": 0.77}),
        (["site-1"], {"site-1": 0.9}),
    ],
    "site-3": [(["site-1", "site-2"], {"site-1": 0.8, "site-2": 0.8})] * 3,
}
# the faulty peers are still picked in the last round
DYN_ROUNDS = {"site-1": [(["site-2"], {"site-2": 0.8, "site-3": 0.1}), (["site-3"], {"site-2": 0.2, "site-3": 0.9})]}


def write_sweep(s):
    """The hand-written sweep folder ``s`` the report tests read; returns ``s``."""
    make_run(
        s,
        "lightyear_digits_sfa1_s0",
        "lightyear",
        "digits",
        "sfa",
        ["site-3"],
        0,
        {"site-1": 0.8, "site-2": 0.9, "site-3": 0.1},
        rounds=SFA_ROUNDS,
    )
    make_run(
        s,
        "lightyear_digits_sfa1_s1",
        "lightyear",
        "digits",
        "sfa",
        ["site-3"],
        1,
        {"site-1": 0.7, "site-2": 1.0, "site-3": 0.1},
    )
    make_run(
        s,
        "fedavg_digits_sfa1_s0",
        "fedavg",
        "digits",
        "sfa",
        ["site-3"],
        0,
        {"site-1": 0.5, "site-2": 0.7, "site-3": 0.2},
    )
    make_run(
        s,
        "fedavg_digits_sfa1_s1",
        "fedavg",
        "digits",
        "sfa",
        ["site-3"],
        1,
        {"site-1": 0.6, "site-2": 0.6, "site-3": 0.2},
    )
    # a benign site that failed is left out of the pool
    make_run(
        s,
        "fedavg_digits_sfa1_s2",
        "fedavg",
        "digits",
        "sfa",
        ["site-3"],
        2,
        {"site-1": 0.6, "site-2": 0.0, "site-3": 0.2},
        statuses={"site-2": "failed"},
    )
    make_run(
        s,
        "lightyear_digits_clean_s0",
        "lightyear",
        "digits",
        "none",
        [],
        0,
        {"site-1": 0.9, "site-2": 0.9, "site-3": 0.9},
    )
    make_run(
        s, "fedavg_digits_clean_s0", "fedavg", "digits", "none", [], 0, {"site-1": 0.8, "site-2": 1.0, "site-3": 0.9}
    )
    make_run(
        s,
        "lightyear_digits_dynamic2_s0",
        "lightyear",
        "digits",
        "dynamic",
        ["site-2", "site-3"],
        0,
        {"site-1": 0.75, "site-2": 0.1, "site-3": 0.1},
        rounds=DYN_ROUNDS,
    )
    make_run(
        s, "lightyear_digits_dynamic2_s1", "lightyear", "digits", "dynamic", ["site-2", "site-3"], 1, None
    )  # never finished
    # every benign site dropped: a summary, but no finished run
    make_run(
        s,
        "lightyear_digits_sfa2_s0",
        "lightyear",
        "digits",
        "sfa",
        ["site-2", "site-3"],
        0,
        {"site-1": "nan", "site-2": "nan", "site-3": "nan"},
        statuses=dict.fromkeys(SITES3, "dropped"),
    )
    make_run(
        s,
        "lightyear_shapes_clean_s0",
        "lightyear",
        "shapes",
        "none",
        [],
        0,
        {"site-1": 0.5, "site-2": 0.7},
        metric="dice",
    )
    return s


def by_stem(all_tables):
    return {t.stem: t for t in all_tables}


def visible_axes(fig):
    return [ax for ax in fig.axes if ax.get_visible()]
