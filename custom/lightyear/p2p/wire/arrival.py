"""Checks a model message must pass before anything of it is kept (no state); the exchange
(:mod:`lightyear.p2p.wire.exchange`) calls them for every message."""

from __future__ import annotations

import numpy as np
from nvflare.apis.shareable import Shareable

from lightyear.algorithms.model_check import model_problems
from lightyear.flare import constants as C
from lightyear.p2p.wire.payload import PayloadCodec, payload_limit, payload_size_problem

MAX_NUM_SAMPLES = 10**9
"""Largest training-set size a peer may claim in a model message."""


def num_samples_problem(value) -> str | None:
    """Why a claimed training-set size is unacceptable, or None if it is an integer in [1, MAX_NUM_SAMPLES]."""
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or not 1 <= value <= MAX_NUM_SAMPLES:
        shown = repr(value) if isinstance(value, (int, float, np.number)) else type(value).__name__
        return f"num_samples must be an integer in [1, {MAX_NUM_SAMPLES}], got {shown[:40]}"
    return None


def checked_model(
    payload, marker, reference: dict, codec: PayloadCodec, max_abs_weight: float | None
) -> tuple[dict | None, list[str]]:
    """(the model ``payload`` stands for, [why unacceptable]), bounded in size before it is decoded, then checked."""
    too_large = payload_size_problem(payload, reference)
    if too_large:
        return None, [too_large]
    weights, problems = codec.decode(payload, marker, reference)
    if not problems:
        problems = model_problems(weights, reference, max_abs_weight)
    return weights, problems


def open_sealed(request: Shareable, sealer, reference: dict) -> tuple[dict | None, str, bool]:
    """(the payload of a sealed forwarded model, why refused or "", whether its sender signed it), size-bounded."""
    sealed = request.get(C.KEY_WEIGHTS)
    too_large = payload_size_problem(sealed, reference)
    if too_large:
        return None, too_large, False
    return sealer.open(
        request.get(C.KEY_SENDER),
        request.get(C.KEY_ROUND),
        request.get(C.KEY_PAYLOAD),
        request.get(C.KEY_NUM_SAMPLES),
        sealed,
        request.get(C.KEY_SEAL),
        request.get(C.KEY_CERTIFICATE),
        max_entries=len(reference),
        max_bytes=payload_limit(reference),
    )
