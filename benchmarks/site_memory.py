"""What a site process holds, stage by stage, in one process without FLARE's simulator.

    PYTHONPATH=custom python benchmarks/site_memory.py                 # a LIGHTYEAR digits site, 7 peers
    PYTHONPATH=custom python benchmarks/site_memory.py --peers 3 --rounds 3

Builds what a peer-to-peer site builds, one stage at a time, and prints after each the process's
unique set size (USS: pages only this process maps, what it costs the machine on top of the shared
libraries), its proportional set size (PSS) and its resident anonymous memory, and what the stage
added to USS:

* the interpreter, NumPy, PyTorch (the CUDA build's libraries are loaded, and written, even
  on a CPU), the FLARE modules a site job imports, this toolkit's site modules;
* the site's data and seeded model (:class:`~lightyear.training.site_runtime.SiteRuntime`),
  the first training round (optimizer state, gradients, activations, kernel caches) and
  evaluation;
* ``--peers`` received models held, as the exchange holds them for a round, and the round's
  LIGHTYEAR aggregation on them (scoring, the validated update's vectors and candidates);
* ``--rounds`` more rounds of training and aggregation, then glibc's ``malloc_trim``, which the
  site calls after every round: what it gives back is allocator slack.

Measured in one process, so FLARE's own per-message buffers and threads are not in it:
``benchmarks/site_profile.py`` prints a simulated site's peak and anonymous memory beside these.
"""

from __future__ import annotations

import argparse
import gc
import logging
import os
import sys

import psutil

STAGES: list[tuple[str, float, float, float]] = []


def measure(label: str) -> None:
    gc.collect()
    info = psutil.Process().memory_full_info()
    anonymous = 0
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("RssAnon:"):
                anonymous = int(line.split()[1]) * 1024
    STAGES.append((label, info.uss / 2**20, info.pss / 2**20, anonymous / 2**20))
    before = STAGES[-2][1] if len(STAGES) > 1 else 0.0
    uss, pss, anon = STAGES[-1][1:]
    print(f"{label:<58}{uss:>9.1f}{pss:>9.1f}{anon:>9.1f}{uss - before:>+9.1f}", flush=True)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--dataset", default="digits")
    parser.add_argument("--peers", type=int, default=7, help="received models held (7: the digits job's neighbours)")
    parser.add_argument("--rounds", type=int, default=2, help="further rounds before the final trim")
    args = parser.parse_args(argv)
    print(f"{'stage (MiB)':<58}{'USS':>9}{'PSS':>9}{'anon':>9}{'+USS':>9}")
    measure("interpreter")
    import numpy  # noqa: F401

    measure("+ numpy")
    import torch

    torch.set_num_threads(1)
    measure("+ torch (imported)")
    import nvflare.private.fed.app.simulator.simulator_worker  # noqa: F401  (what a simulated site process imports)
    from nvflare.app_common.decomposers import numpy_decomposers  # noqa: F401

    measure("+ FLARE's site modules")
    from lightyear.flare.process_memory import limit_malloc_arenas, release_free_memory
    from lightyear.p2p.methods.lightyear import LightyearExecutor
    from lightyear.training.site_runtime import SiteRuntime
    from lightyear.training.weights import get_weights

    limit_malloc_arenas()
    measure("+ the toolkit's site modules")
    settings = _dataset_settings(args.dataset)
    runtime = SiteRuntime(
        "site-1", args.dataset, settings["model"], seed=0, train_args=settings["train_args"], num_threads=1
    )
    measure("+ the site's data and seeded model")
    runtime.train(0)
    measure("+ a training round")
    runtime.evaluate("val"), runtime.evaluate("test")
    measure("+ evaluation")
    own = runtime.get_weights()
    # untrained peers, each seeded differently: the whole aggregate fails this site's validation and
    # each peer is tried alone, the validated aggregation's longest path and most candidates held
    peers = {f"peer-{i}": get_weights(runtime.fresh_model(seed=100 + i)) for i in range(args.peers)}
    measure(f"+ {args.peers} received models held")
    executor = LightyearExecutor(tau=0.0)  # the validated aggregation at its defaults
    executor.logger.setLevel(logging.ERROR)  # its exclusions are expected here
    executor.runtime, executor.neighbours = runtime, sorted(peers)
    outcome = executor.aggregate(1, own, peers)
    measure(f"+ an aggregation ({outcome.fields.get('validation_evals')} validation passes)")
    del outcome
    for round_num in range(2, 2 + args.rounds):
        runtime.train(round_num)
        outcome = executor.aggregate(round_num, runtime.get_weights(), peers)
        del outcome
    measure(f"+ {args.rounds} more rounds")
    release_free_memory()
    measure("after malloc_trim (the slack it gave back is the drop)")
    return 0


def _dataset_settings(dataset: str) -> dict:
    import json

    root = os.path.join(
        os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "custom", "lightyear", "app_configs", "datasets"
    )
    with open(os.path.join(root, f"{dataset}.json")) as f:
        return json.load(f)


if __name__ == "__main__":
    sys.exit(main())
