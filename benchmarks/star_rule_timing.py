"""Seconds per round of each star-topology server rule, for 8 sites and a digits-CNN-sized model.

    python benchmarks/star_rule_timing.py                # 8 sites, 5 timed rounds
    python benchmarks/star_rule_timing.py --sites 5 --rounds 3

Each rule is the FLARE component a job uses (``lightyear.star.rules.*``), called as the star
controller calls it, on random models shaped like the digits CNN (1.66 M float32 parameters):
site k sends the round's global model plus small Gaussian noise (sd 0.002, an update norm of about 2.6,
below FedCAP's T_norm), and the last site a sign-flipped
model, so the robust rules have something to leave out. FedCAP is timed over what its server does
in a round: customising one model per site (``site_models``) and calibration and detection
(``aggregate``). One untimed round comes first (FedCAP's round 0 has no pool yet). Prints the
median and maximum wall-clock seconds over the timed rounds, and the median CPU seconds of this
process (the better measure on a machine shared with other work).
"""

from __future__ import annotations

import argparse
import logging
import os
import statistics
import sys
import time

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "custom"))

from nvflare.apis.fl_context import FLContext  # noqa: E402

from lightyear.star.aggregator import FedAvgAggregator  # noqa: E402
from lightyear.star.rules.afa import AfaAggregator  # noqa: E402
from lightyear.star.rules.asmr import AsmrAggregator  # noqa: E402
from lightyear.star.rules.cfl import CflAggregator  # noqa: E402
from lightyear.star.rules.fedcap import FedCapAggregator  # noqa: E402
from lightyear.star.rules.krum import KrumAggregator  # noqa: E402

DIGITS_CNN = {  # lightyear.models "cnn" with 1 input channel and 10 classes
    "features.0.weight": (32, 1, 5, 5),
    "features.0.bias": (32,),
    "features.3.weight": (64, 32, 5, 5),
    "features.3.bias": (64,),
    "classifier.1.weight": (512, 3136),
    "classifier.1.bias": (512,),
    "classifier.4.weight": (10, 512),
    "classifier.4.bias": (10,),
}


def rules(num_sites: int) -> dict:
    return {
        "fedavg (fedprox, ditto)": FedAvgAggregator(),
        "krum": KrumAggregator(),
        "multi-krum (m = n - f)": KrumAggregator(m=num_sites - max(0, (num_sites - 3) // 2)),
        "afa": AfaAggregator(),
        "asmr": AsmrAggregator(),
        "cfl": CflAggregator(),
        "fedcap": FedCapAggregator(),
    }


def round_results(global_weights: dict, sites: list[str], rng: np.random.Generator) -> dict:
    out = {}
    for k, site in enumerate(sites):
        noisy = {key: (v + rng.normal(0.0, 0.002, v.shape)).astype(np.float32) for key, v in global_weights.items()}
        out[site] = {
            "weights": {key: -v for key, v in noisy.items()} if k == len(sites) - 1 else noisy,
            "num_samples": 120.0 + k,
        }
    return out


def time_rule(rule, sites: list[str], rounds: int, seed: int) -> tuple[list[float], list[float]]:
    rng = np.random.default_rng(seed)
    ctx = FLContext()
    global_weights = {k: (rng.normal(0.0, 0.02, shape)).astype(np.float32) for k, shape in DIGITS_CNN.items()}
    wall, cpu = [], []
    for r in range(rounds + 1):
        results = round_results(global_weights, sites, rng)
        start, start_cpu = time.perf_counter(), time.process_time()
        rule.site_models(sites, global_weights, r, ctx)
        global_weights = rule.aggregate(global_weights, results, r, ctx)
        if r > 0:
            wall.append(time.perf_counter() - start)
            cpu.append(time.process_time() - start_cpu)
    return wall, cpu


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sites", type=int, default=8)
    parser.add_argument("--rounds", type=int, default=5, help="timed rounds per rule")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    logging.disable(logging.CRITICAL)
    sites = [f"site-{k}" for k in range(1, args.sites + 1)]
    params = sum(int(np.prod(s)) for s in DIGITS_CNN.values())
    print(
        f"{args.sites} sites, {params:,} float32 parameters a model ({params * 4 / 1e6:.2f} MB), "
        f"{args.rounds} timed rounds"
    )
    print(f"{'rule':<26} {'median s/round':>15} {'max s/round':>12} {'median CPU s/round':>19}")
    for name, rule in rules(args.sites).items():
        wall, cpu = time_rule(rule, sites, args.rounds, args.seed)
        print(f"{name:<26} {statistics.median(wall):>15.3f} {max(wall):>12.3f} {statistics.median(cpu):>19.3f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
