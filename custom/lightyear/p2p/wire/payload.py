"""What a peer-to-peer site puts on the wire for its model, and how a receiver reads it back. No FLARE import.

Encodings (``transfer_dtype``, one per job): ``float32``; ``float16`` (floating entries cast); ``float16_delta`` (the
difference from the seeded initial model every site builds identically, in float16, or float32 where it overflows;
it keeps no state between rounds). Non-floating entries travel unchanged. A delta names its base by a fingerprint, so
sites with different initial models reject each other's deltas with a reason. A received payload is bounded by
:func:`payload_limit` before it is decoded, and a delta's structure is checked before it is rebuilt.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from typing import Any

import numpy as np

from lightyear.algorithms.model_check import model_problems
from lightyear.algorithms.vectors import is_float_entry

FLOAT32, FLOAT16, FLOAT16_DELTA = "float32", "float16", "float16_delta"
TRANSFER_DTYPES = (FLOAT32, FLOAT16, FLOAT16_DELTA)
FULL_MODELS = (FLOAT32, FLOAT16)


def check_transfer_dtype(value) -> str:
    if value not in TRANSFER_DTYPES:
        raise ValueError(
            f"transfer_dtype must be one of {TRANSFER_DTYPES} (float16_delta: the difference from the seeded "
            f"initial model in float16), got {value!r}"
        )
    return value


PAYLOAD_SLACK_BYTES = 1 << 20
"""Bytes a model message may take beyond twice the model: the message's keys, headers and framing."""


def payload_limit(reference: Mapping[str, np.ndarray]) -> int:
    """The most bytes a model message for a site whose model is ``reference`` may take (any dtype up to 8 bytes)."""
    return 2 * int(sum(np.asarray(v).nbytes for v in reference.values())) + PAYLOAD_SLACK_BYTES


def payload_bytes(payload: Mapping) -> int:
    """The bytes of a payload's arrays and strings (what its size bound counts). Reads sizes only."""
    size = 0
    for value in payload.values():
        if isinstance(value, (np.ndarray, np.generic)):
            size += int(value.nbytes)
        elif isinstance(value, (bytes, bytearray, str)):
            size += len(value)
    return size


def payload_size_problem(payload: Any, reference: Mapping[str, np.ndarray]) -> str | None:
    """Why ``payload`` is too large to be a model for ``reference``, or None. Reads sizes only."""
    if not isinstance(payload, Mapping):
        return None  # not a model at all: decoding names it
    if len(payload) > len(reference):
        return f"payload has {len(payload)} entries, this site's model {len(reference)}"
    size = payload_bytes(payload)
    limit = payload_limit(reference)
    if size > limit:
        return (
            f"payload of {size} bytes is larger than the {limit} bytes a model of this site takes (twice its own size)"
        )
    return None


def fingerprint(weights: Mapping[str, np.ndarray]) -> str:
    """16 hex digits identifying a model's keys, dtypes, shapes and values."""
    digest = hashlib.sha256()
    for key in sorted(weights):
        arr = np.ascontiguousarray(weights[key])
        digest.update(f"{key}|{arr.dtype.str}|{arr.shape}|".encode())
        digest.update(arr.tobytes())
    return digest.hexdigest()[:16]


def _shown(value: Any) -> str:
    return repr(value)[:60] if isinstance(value, str) else type(value).__name__


class PayloadCodec:
    """Encodes and decodes models for one ``transfer_dtype``; ``initial``: the base of every ``float16_delta``."""

    def __init__(self, transfer_dtype: str = FLOAT32, initial: Mapping[str, np.ndarray] | None = None):
        self.transfer_dtype = check_transfer_dtype(transfer_dtype)
        self.base: dict[str, np.ndarray] = {}
        self.marker = transfer_dtype
        if transfer_dtype == FLOAT16_DELTA:
            if initial is None:
                raise ValueError("transfer_dtype float16_delta needs the seeded initial model as its base")
            self.base = {k: np.array(v, copy=True) for k, v in initial.items()}
            self.marker = f"{FLOAT16_DELTA}@{fingerprint(self.base)}"

    def encode(self, weights: Mapping[str, np.ndarray]) -> dict:
        """The payload for ``weights`` (a new dict; the arrays of ``float32`` are not copied)."""
        if self.transfer_dtype == FLOAT32:
            return dict(weights)
        if self.transfer_dtype == FLOAT16:
            return {k: (v.astype(np.float16) if is_float_entry(v) else v) for k, v in weights.items()}
        out = {}
        for key, value in weights.items():
            value = np.asarray(value)
            if not is_float_entry(value):
                out[key] = value
                continue
            diff = value - self.base[key]
            with np.errstate(over="ignore"):
                half = diff.astype(np.float16)
            finite = np.isfinite(half) | ~np.isfinite(diff)
            out[key] = half if finite.all() else diff.astype(np.float32)
        return out

    def decode(self, payload: Any, marker: Any, reference: Mapping[str, np.ndarray]) -> tuple[Any, list[str]]:
        """(the model a payload stands for, or None; problems): the model still needs ``model_problems``."""
        if self.transfer_dtype in FULL_MODELS:
            if marker is None or marker in FULL_MODELS:
                return payload, []
            return None, [
                f"payload {_shown(marker)} is not a full model, which this site takes (transfer_dtype "
                f"{self.transfer_dtype}): every site of a job must use the same transfer_dtype"
            ]
        if marker != self.marker:
            if isinstance(marker, str) and marker.startswith(FLOAT16_DELTA + "@"):
                return None, [
                    f"delta on another initial model ({marker[len(FLOAT16_DELTA) + 1 :][:16]!r}, this site's "
                    f"{self.marker[len(FLOAT16_DELTA) + 1 :]!r}): the sites built different seeded initial models "
                    "(different seed or torch version?); use transfer_dtype float16"
                ]
            return None, [
                f"payload {_shown(marker)} is not a float16_delta, which this site takes: every site of a job "
                "must use the same transfer_dtype"
            ]
        problems = model_problems(payload, reference, max_abs=None)
        if problems:
            return None, [f"delta: {p}" for p in problems]
        model = {}
        for key, ref in reference.items():
            value = np.asarray(payload[key])
            if not is_float_entry(np.asarray(ref)):
                model[key] = value
                continue
            with np.errstate(over="ignore", invalid="ignore"):
                model[key] = self.base[key] + value.astype(self.base[key].dtype)
        return model, []
