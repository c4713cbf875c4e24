"""Client malfunctions applied to the model a faulty site sends (pure NumPy, no FLARE).

Each function returns a new model (the input is never modified); integer entries are left as they are. References:
LIGHTYEAR paper (long version), Eq. 4 (additive noise, ANA), Eq. 5 (sign flipping, SFA) and the "random update"
malfunction; the relative ANA form and its scale s are those of the authors' code and the short paper.
"""

from __future__ import annotations

import zlib
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

import numpy as np

Weights = Mapping[str, np.ndarray]

NONE = "none"
ANA = "ana"
ANA_RELATIVE = "ana_relative"
SFA = "sfa"
RANDOM = "random"
DYNAMIC = "dynamic"
KINDS = (NONE, ANA, ANA_RELATIVE, SFA, RANDOM, DYNAMIC)


def _floats(weights: Weights, change: Callable[[np.ndarray], np.ndarray]) -> dict[str, np.ndarray]:
    """``change`` applied to every floating entry (in key order, keeping its dtype); other entries copied."""
    out = {}
    for key, value in weights.items():
        arr = np.asarray(value)
        out[key] = change(arr).astype(arr.dtype) if np.issubdtype(arr.dtype, np.floating) else arr.copy()
    return out


def additive_noise(weights: Weights, sigma: float, rng: np.random.Generator) -> dict[str, np.ndarray]:
    """theta~ = theta + eps, eps ~ N(0, sigma^2 I) (Eq. 4)."""
    return _floats(weights, lambda arr: arr + rng.normal(0.0, sigma, size=arr.shape))


def relative_additive_noise(weights: Weights, scale: float, rng: np.random.Generator) -> dict[str, np.ndarray]:
    """theta~ = theta + N(0, 1) * s / 100 * theta, elementwise: noise proportional to each weight."""
    return _floats(weights, lambda arr: arr + rng.standard_normal(arr.shape) * (scale / 100.0) * arr)


def sign_flip(weights: Weights, alpha: float = 1.0) -> dict[str, np.ndarray]:
    """theta~ = -alpha * theta, alpha > 0 (Eq. 5)."""
    if alpha <= 0:
        raise ValueError(f"sign flipping needs alpha > 0, got {alpha}")
    return _floats(weights, lambda arr: -alpha * arr)


def random_weights(weights: Weights, fresh_init: Callable[[int], Weights], seed: int) -> dict[str, np.ndarray]:
    """Replace the model by a freshly initialised one (``fresh_init(seed)``): a broken pipeline."""
    fresh = fresh_init(seed)
    missing = set(weights) - set(fresh)
    if missing:
        raise ValueError(f"fresh initialisation lacks keys {sorted(missing)[:5]}: wrong model factory")
    return {
        key: np.asarray(fresh[key]).astype(np.asarray(weights[key]).dtype).reshape(np.shape(weights[key]))
        for key in weights
    }


@dataclass
class MalfunctionSpec:
    """A site's malfunction and its parameters, drawn reproducibly per round: ``kind`` ``none``, ``ana`` (``sigma``),
    ``ana_relative`` (``scale`` = s), ``sfa`` (``alpha``), ``random`` (fresh initialisation) or ``dynamic`` (each round
    one of ``dynamic_kinds``, drawn from the seed, the site and the round)."""

    kind: str = NONE
    sigma: float = 1.0
    scale: float = 120.5
    alpha: float = 1.0
    dynamic_kinds: tuple = (ANA_RELATIVE, SFA, RANDOM)
    seed: int = 0
    site: str = ""
    fresh_init: Callable[[int], Weights] | None = field(default=None, repr=False)

    def __post_init__(self):
        if self.kind not in KINDS:
            raise ValueError(f"unknown malfunction {self.kind!r}; choose one of {', '.join(KINDS)}")
        bad = [k for k in self.dynamic_kinds if k not in (ANA, ANA_RELATIVE, SFA, RANDOM)]
        if bad or not self.dynamic_kinds:
            raise ValueError(
                f"dynamic_kinds must be a non-empty subset of ana, ana_relative, sfa, random; got {self.dynamic_kinds}"
            )
        if self.sigma < 0:
            raise ValueError(f"ANA sigma must be >= 0, got {self.sigma}")
        if self.alpha <= 0:
            raise ValueError(f"SFA alpha must be > 0, got {self.alpha}")
        self.dynamic_kinds = tuple(self.dynamic_kinds)

    @property
    def active(self) -> bool:
        return self.kind != NONE

    def rng(self, round_num: int) -> np.random.Generator:
        """The generator for one round: a pure function of (seed, site, round)."""
        return np.random.default_rng([int(self.seed) & 0xFFFFFFFF, zlib.crc32(self.site.encode()), int(round_num)])

    def kind_for_round(self, round_num: int) -> str:
        """The malfunction applied in ``round_num`` (for ``dynamic``, the one drawn for that round)."""
        if self.kind != DYNAMIC:
            return self.kind
        return self.dynamic_kinds[int(self.rng(round_num).integers(len(self.dynamic_kinds)))]

    def apply(self, weights: Weights, round_num: int) -> tuple[dict[str, np.ndarray], str]:
        """Return (corrupted copy of ``weights``, kind applied) for ``round_num``."""
        kind = self.kind_for_round(round_num)
        rng = self.rng(round_num)
        if kind == DYNAMIC or kind == NONE:
            return {k: np.array(v, copy=True) for k, v in weights.items()}, NONE
        rng.integers(2)  # keep the draw for the kind separate from the noise stream
        if kind == ANA:
            return additive_noise(weights, self.sigma, rng), kind
        if kind == ANA_RELATIVE:
            return relative_additive_noise(weights, self.scale, rng), kind
        if kind == SFA:
            return sign_flip(weights, self.alpha), kind
        if self.fresh_init is None:
            raise ValueError("the random malfunction needs a model factory (fresh_init) to draw new weights")
        return random_weights(weights, self.fresh_init, int(rng.integers(2**31))), kind
