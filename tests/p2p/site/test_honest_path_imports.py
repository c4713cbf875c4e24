"""A peer-to-peer site that attacks nobody loads no attack code: the honest round's modules and the networks they
build import none of ``lightyear.algorithms.attacks`` or ``lightyear.p2p.attack``."""

from __future__ import annotations

import json
import os
import subprocess
import sys

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
HONEST_PATH = (
    "lightyear.p2p.site.executor",
    "lightyear.p2p.methods.lightyear",
    "lightyear.p2p.wire.exchange",
    "lightyear.p2p.server.controller",
    "lightyear.models.femnist_cnn",
    "lightyear.models.transunet",
)


def test_the_honest_path_imports_no_attack_code():
    script = (
        "import importlib, json, sys; [importlib.import_module(m) for m in sys.argv[1:]]; "
        "print(json.dumps(sorted(m for m in sys.modules if m.startswith(('lightyear.algorithms.attacks', "
        "'lightyear.p2p.attack')))))"
    )
    env = {**os.environ, "PYTHONPATH": os.path.join(REPO, "custom")}
    command = [sys.executable, "-c", script, *HONEST_PATH]
    done = subprocess.run(command, capture_output=True, text=True, env=env, check=True)
    assert json.loads(done.stdout.strip().splitlines()[-1]) == []
