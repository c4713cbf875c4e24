"""A site's checkpoint after every finished round: its model, the round and the method's state (no FLARE import).

Written atomically (``site_model.npz`` in the run folder); read back like a peer's model: no pickle, headers checked
before data, weights checked as a received model's; a :class:`CheckpointError` names the file and the fix.
"""

from __future__ import annotations

import json
import os
import zipfile
from collections.abc import Mapping
from dataclasses import dataclass, field

import numpy as np
from numpy.lib import format as npy

from lightyear.algorithms.model_check import model_problems
from lightyear.records import save_npz_atomic

CHECKPOINT_FILE = "site_model.npz"
_WEIGHT = "weights/"
_EXTRA = "state/"
_META = "__meta__"
_SUFFIX = ".npy"
MAX_META_BYTES = 1 << 20
"""Largest ``__meta__`` entry (round, job settings, the method's JSON state) read back."""
STATE_SLACK_BYTES = 1 << 20
"""The method's array state may take twice the model's bytes plus this much."""
DEFAULT_FIX = "remove it to start this site from round 0"


class CheckpointError(ValueError):
    """A checkpoint that cannot be used: the message names the file, what is wrong and the fix."""


@dataclass
class SiteCheckpoint:
    round: int
    weights: dict
    meta: dict = field(default_factory=dict)
    state: dict = field(default_factory=dict)
    arrays: dict = field(default_factory=dict)


def save_site_checkpoint(folder: str, ckpt: SiteCheckpoint) -> str:
    """Write ``ckpt`` to ``<folder>/site_model.npz``; ``state`` must be JSON-serialisable."""
    blob = {_WEIGHT + k: np.asarray(v) for k, v in ckpt.weights.items()}
    blob.update({_EXTRA + k: np.asarray(v) for k, v in ckpt.arrays.items()})
    meta = {"round": int(ckpt.round), "meta": ckpt.meta, "state": ckpt.state}
    blob[_META] = np.frombuffer(json.dumps(meta).encode(), dtype=np.uint8)
    return save_npz_atomic(os.path.join(folder, CHECKPOINT_FILE), blob)


def read_checkpoint_meta(folder: str, fix: str = DEFAULT_FIX) -> SiteCheckpoint | None:
    """The checkpoint in ``folder`` without its arrays, or None if there is none; cheap (read before the model)."""
    path = os.path.join(folder, CHECKPOINT_FILE)
    if not os.path.exists(path):
        return None
    with _archive(path, fix) as zf:
        return _meta(zf, path, fix)


def load_site_checkpoint(
    folder: str,
    reference: Mapping[str, np.ndarray] | None = None,
    max_abs: float | None = None,
    rounds: int | None = None,
    fix: str = DEFAULT_FIX,
) -> SiteCheckpoint | None:
    """The checkpoint in ``folder`` (None if none), checked against ``reference`` and ``rounds`` (CheckpointError)."""
    path = os.path.join(folder, CHECKPOINT_FILE)
    if not os.path.exists(path):
        return None
    with _archive(path, fix) as zf:
        ckpt = _meta(zf, path, fix)
        _check_round(ckpt.round, rounds, path, fix)
        entries = _headers(zf, path, fix)
        _fits(path, _header_problems(entries, reference), fix)
        ckpt.weights = {
            k.removeprefix(_WEIGHT): _read(zf, n, path, fix)
            for k, (n, _, _) in entries.items()
            if k.startswith(_WEIGHT)
        }
        ckpt.arrays = {
            k.removeprefix(_EXTRA): _read(zf, n, path, fix) for k, (n, _, _) in entries.items() if k.startswith(_EXTRA)
        }
    if reference is not None:
        _fits(path, model_problems(ckpt.weights, reference, max_abs), fix)
    return ckpt


# ---------------------------------------------------------------------- reading
def _fits(path: str, problems: list[str], fix: str) -> None:
    if problems:
        shown = _joined(problems)
        raise CheckpointError(f"the site checkpoint {path} does not fit this site's model ({shown}); {fix}")


def _damaged(path: str, what: str, fix: str) -> CheckpointError:
    return CheckpointError(f"the site checkpoint {path} is damaged or not a checkpoint this tool wrote ({what}); {fix}")


def _archive(path: str, fix: str) -> zipfile.ZipFile:
    try:
        return zipfile.ZipFile(path)
    except (zipfile.BadZipFile, OSError, ValueError) as exc:
        what = "not an .npz archive" if isinstance(exc, zipfile.BadZipFile) else type(exc).__name__
        raise _damaged(path, what, fix) from None


def _meta(zf: zipfile.ZipFile, path: str, fix: str) -> SiteCheckpoint:
    try:
        info = zf.getinfo(_META + _SUFFIX)
    except KeyError:
        raise _damaged(path, f"no {_META} entry", fix) from None
    shape, dtype = _header(zf, info.filename, path, fix)
    if dtype != np.uint8 or len(shape) != 1 or shape[0] > MAX_META_BYTES:
        raise _damaged(path, f"its {_META} entry is no text of at most {MAX_META_BYTES} bytes", fix)
    raw = _read(zf, info.filename, path, fix)
    try:
        meta = json.loads(bytes(np.asarray(raw, dtype=np.uint8)).decode())
    except (ValueError, TypeError, RecursionError):
        raise _damaged(path, f"its {_META} entry is not the JSON this tool writes", fix) from None
    if not isinstance(meta, dict) or not all(isinstance(meta.get(k, {}), dict) for k in ("meta", "state")):
        raise _damaged(path, f"its {_META} entry is not the JSON object this tool writes", fix)
    number = meta.get("round")
    if isinstance(number, bool) or not isinstance(number, int):
        raise _damaged(path, f"round {_shown(number)} is not an integer", fix)
    return SiteCheckpoint(round=number, weights={}, meta=meta.get("meta", {}), state=meta.get("state", {}))


def _check_round(number: int, rounds: int | None, path: str, fix: str) -> None:
    if number < 0 or (rounds is not None and number >= rounds):
        last = "" if rounds is None else f" (this job's rounds are 0..{rounds - 1})"
        raise CheckpointError(
            f"the site checkpoint {path} holds round {number}, outside the rounds a job runs{last}; {fix}"
        )


def _headers(zf: zipfile.ZipFile, path: str, fix: str) -> dict[str, tuple[str, tuple, np.dtype]]:
    """key -> (entry name, shape, dtype) for every weight and state entry, from the headers alone."""
    out = {}
    for info in zf.infolist():
        key = info.filename[: -len(_SUFFIX)] if info.filename.endswith(_SUFFIX) else None
        if key == _META:
            continue
        if key is None or not (key.startswith(_WEIGHT) or key.startswith(_EXTRA)):
            raise _damaged(path, f"unexpected entry {_shown(info.filename)}", fix)
        shape, dtype = _header(zf, info.filename, path, fix)
        out[key] = (info.filename, shape, dtype)
    return out


def _header(zf: zipfile.ZipFile, name: str, path: str, fix: str) -> tuple[tuple, np.dtype]:
    try:
        with zf.open(name) as f:
            version = npy.read_magic(f)
            if version not in ((1, 0), (2, 0)):
                raise ValueError(f"unsupported .npy version {version}")
            reader = npy.read_array_header_1_0 if version == (1, 0) else npy.read_array_header_2_0
            shape, _, dtype = reader(f)
    except (ValueError, OSError, zipfile.BadZipFile, EOFError, SyntaxError, TypeError):
        raise _damaged(path, f"entry {_shown(name)} is no readable array", fix) from None
    return tuple(shape), dtype


def _header_problems(entries: dict, reference: Mapping[str, np.ndarray] | None) -> list[str]:
    """What the headers alone show to be wrong: no numbers, shapes unlike the model's, too large array state."""
    problems, state_bytes = [], 0
    if reference is not None:
        held = {k[len(_WEIGHT) :] for k in entries if k.startswith(_WEIGHT)}
        missing, extra = sorted(set(reference) - held), sorted(held - set(reference))
        problems += [f"missing weights {_listed(missing)}"] if missing else []
        problems += [f"unexpected weights {_listed(extra)}"] if extra else []
    for key, (_, shape, dtype) in entries.items():
        if dtype.hasobject or dtype.fields is not None or dtype.kind not in "biuf":
            problems.append(f"{_shown(key.removeprefix(_WEIGHT))}: dtype {dtype} is no number")
        elif key.startswith(_EXTRA):
            state_bytes += int(np.prod(shape, dtype=np.float64)) * dtype.itemsize
        elif reference is not None and key[len(_WEIGHT) :] in reference:
            expected = np.shape(reference[key[len(_WEIGHT) :]])
            if shape != expected:
                problems.append(f"{key[len(_WEIGHT) :]}: shape {shape} != expected {expected}")
    if reference is not None:
        allowed = 2 * sum(np.asarray(v).nbytes for v in reference.values()) + STATE_SLACK_BYTES
        if state_bytes > allowed:
            problems.append(f"the method's array state takes {state_bytes} bytes, more than the {allowed} allowed")
    return problems


def _read(zf: zipfile.ZipFile, name: str, path: str, fix: str) -> np.ndarray:
    try:
        with zf.open(name) as f:
            return npy.read_array(f, allow_pickle=False)
    except (ValueError, OSError, zipfile.BadZipFile, EOFError, SyntaxError, TypeError, MemoryError):
        raise _damaged(path, f"entry {_shown(name)} cannot be read", fix) from None


def _shown(value) -> str:
    """A name or value from the file as it may be printed on one line."""
    if isinstance(value, str) and value.isprintable() and len(value) <= 60:
        return value
    return repr(value)[:60]


def _listed(keys: list[str], n: int = 5) -> str:
    more = f", ... ({len(keys)})" if len(keys) > n else ""
    return "[" + ", ".join(_shown(k) for k in keys[:n]) + more + "]"


def _joined(problems: list[str], n: int = 3) -> str:
    more = f"; and {len(problems) - n} more" if len(problems) > n else ""
    return "; ".join(problems[:n]) + more
