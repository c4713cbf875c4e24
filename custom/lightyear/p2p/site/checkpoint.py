"""A site's checkpoint after every finished round: its model, the round and the method's state.

Written atomically (``site_model.npz`` in the site's run folder), so a crash leaves the last
finished round on disk. A site process that restarts within the same run reads it and continues
with the next round instead of starting again at round 0. No FLARE import.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field

import numpy as np

from lightyear.records import save_npz_atomic

CHECKPOINT_FILE = "site_model.npz"
_WEIGHT = "weights/"
_EXTRA = "state/"
_META = "__meta__"


@dataclass
class SiteCheckpoint:
    round: int
    weights: dict
    meta: dict = field(default_factory=dict)
    state: dict = field(default_factory=dict)
    arrays: dict = field(default_factory=dict)


def save_site_checkpoint(folder: str, ckpt: SiteCheckpoint) -> str:
    """Write ``ckpt`` to ``<folder>/site_model.npz``; ``state`` must be JSON-serialisable,
    ``arrays`` holds the method's array state (e.g. a personal model)."""
    blob = {_WEIGHT + k: np.asarray(v) for k, v in ckpt.weights.items()}
    blob.update({_EXTRA + k: np.asarray(v) for k, v in ckpt.arrays.items()})
    meta = {"round": int(ckpt.round), "meta": ckpt.meta, "state": ckpt.state}
    blob[_META] = np.frombuffer(json.dumps(meta).encode(), dtype=np.uint8)
    return save_npz_atomic(os.path.join(folder, CHECKPOINT_FILE), blob)


def load_site_checkpoint(folder: str) -> SiteCheckpoint | None:
    """The checkpoint in ``folder``, or None if there is none. A damaged file is an error that
    names it (delete it to start the site from round 0)."""
    path = os.path.join(folder, CHECKPOINT_FILE)
    if not os.path.exists(path):
        return None
    try:
        with np.load(path, allow_pickle=False) as data:
            meta = json.loads(bytes(data[_META]).decode())
            weights = {k[len(_WEIGHT):]: data[k] for k in data.files if k.startswith(_WEIGHT)}
            arrays = {k[len(_EXTRA):]: data[k] for k in data.files if k.startswith(_EXTRA)}
    except Exception as exc:  # noqa: BLE001 - any damage is reported the same way
        raise RuntimeError(f"the site checkpoint {path} cannot be read ({exc}); delete it to start this site from round 0") from exc
    return SiteCheckpoint(round=int(meta["round"]), weights=weights, meta=meta.get("meta", {}), state=meta.get("state", {}), arrays=arrays)
