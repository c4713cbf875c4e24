"""What sealing a model end to end costs a site (``model_route=server`` with ``secure_messages`` on).

    python benchmarks/sealing_cost.py                  # the digits CNN's size, 7 receivers
    python benchmarks/sealing_cost.py --mb 16 --receivers 31

Builds a throwaway project CA and site certificates (RSA 2048, as FLARE provisions them), a model of
``--mb`` megabytes of float32, and prints the median time of sealing it once for ``--receivers``
receivers (pack, AES-256-GCM, one RSA-OAEP wrap a receiver, one RSA-PSS signature) and of one
receiver opening it (certificate check, signature check, unwrap, decrypt, unpack): the CPU a
sealed round adds to a sender and to each receiver (:mod:`lightyear.p2p.wire.sealing`).
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "tests"))

from lightyear.p2p.wire.sealing import Sealer  # noqa: E402
from project_ca import ProjectCA  # noqa: E402 - the test suite's throwaway project CA


def median_ms(call, repeat: int) -> tuple[float, object]:
    times, out = [], None
    for _ in range(repeat):
        start = time.perf_counter()
        out = call()
        times.append(time.perf_counter() - start)
    return statistics.median(times) * 1000, out


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="benchmarks/sealing_cost.py", description=__doc__.splitlines()[0])
    parser.add_argument("--mb", type=float, default=6.65, help="model size in MB (default: the digits CNN)")
    parser.add_argument("--receivers", type=int, default=7)
    parser.add_argument("--repeat", type=int, default=7)
    args = parser.parse_args(argv)
    if not 0 < args.mb <= 4096 or args.receivers < 1 or args.repeat < 1:
        parser.error("--mb must be in (0, 4096], --receivers and --repeat at least 1")
    ca = ProjectCA()
    names = [f"site-{i}" for i in range(1, args.receivers + 2)]
    creds = {name: ca.issue(name) for name in names}
    fetch = lambda wanted: {n: creds[n][1] for n in wanted}  # noqa: E731
    model = {"w": np.random.default_rng(0).normal(size=int(args.mb * 1e6 / 4)).astype(np.float32)}
    sender = Sealer(names[0], "job", *creds[names[0]], ca.root_pem, fetch)
    receiver = Sealer(names[1], "job", *creds[names[1]], ca.root_pem, fetch)
    keys, _ = sender.receiver_keys(names[1:])
    seal_ms, (weights, seal) = median_ms(lambda: sender.seal(0, "float32", 1, model, keys), args.repeat)
    open_ms, (_, problem, _) = median_ms(
        lambda: receiver.open(names[0], 0, "float32", 1, weights, seal, creds[names[0]][1], 1, 1 << 33), args.repeat
    )
    assert problem == "", problem
    print(f"{args.mb:g} MB model, {args.receivers} receivers: seal {seal_ms:.1f} ms, open {open_ms:.1f} ms (median)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
