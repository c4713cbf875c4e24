"""DeFTA's decentralised trust system (DTS), as numbers in and decisions out (pure NumPy, no FLARE).

Reference: Zhou et al., "DeFTA: A Plug-and-Play Decentralized Replacement for FedAvg", Section 3.3, Eqs. 12-13 and
Algorithm 3. A site's confidence c_{i->j} in each peer starts at 0 and moves against the change of its training
loss, in proportion to the peer's aggregation weight; scores become sampling weights (cRELU, softmax). A "time
machine" backup of the lowest-loss model replaces a damaged model, whose peers lose all trust. The class holds no
model: the executor acts on the returned decisions.

Where the paper is silent: a NaN or Inf loss is damage, and with ``damage_ratio`` so is a loss above that multiple
of the previous one (off by default: damage cuts peers off for good, so a false alarm costs honest peers); line 13
uses the scores just updated; the first loss moves no score; p_i is the weights actually used this round
(``lightyear.algorithms.p2p.defta``); a blocked peer's -inf score is kept under "blocked" in ``to_dict``.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

import numpy as np

from lightyear.checks import int_in, number_in

POSITIVE_SLOPE = 0.2  # Eq. 13
SAMPLE_SIZE = 2  # peers aggregated per round in the paper's experiments (Section 4.2)


def crelu(x, positive_slope: float = POSITIVE_SLOPE) -> np.ndarray:
    """cRELU(x) = x for x <= 0, positive_slope * x for x > 0 (DeFTA Eq. 13, slope 0.2)."""
    x = np.asarray(x, dtype=np.float64)
    return np.where(x > 0, positive_slope * x, x)


def trust_sample_weights(scores: Mapping[str, float], positive_slope: float = POSITIVE_SLOPE) -> dict[str, float]:
    """theta_i = softmax(cRELU(c_i)) (DeFTA Eq. 12); a score of -inf gets weight 0 (all -inf: all 0)."""
    names = sorted(scores)
    z = crelu([scores[p] for p in names], positive_slope)
    finite = np.isfinite(z)
    w = np.zeros(len(names))
    if finite.any():
        e = np.exp(z[finite] - z[finite].max())
        w[finite] = e / e.sum()
    return {p: float(v) for p, v in zip(names, w)}


@dataclass(frozen=True)
class TrustDecision:
    """What the executor must do after one observation (DeFTA Algorithm 3). damaged: load the backup, train it once
    more and send that. save_backup: the model has the lowest loss so far: store it as the backup (never both).
    loss_trust: the loss change charged to the aggregated peers (+inf when damaged). score_changes: -p_ij * loss_trust
    per aggregated peer."""

    damaged: bool
    save_backup: bool
    loss_trust: float
    score_changes: dict[str, float] = field(default_factory=dict)


def _check_settings(sample_size, positive_slope, damage_ratio) -> None:
    int_in("sample_size", sample_size, 1, note="peers aggregated per round; the paper uses 2")
    note = "cRELU's slope above 0; the paper uses 0.2"
    number_in("positive_slope", positive_slope, 0.0, 1.0, low_open=True, note=note)
    if damage_ratio is not None:
        number_in("damage_ratio", damage_ratio, 1.0, low_open=True, note="or None: only NaN/Inf losses are damage")


class DeftaTrust:
    """One site's DTS state: confidence scores of its ``peers`` (its in-neighbours) and the bookkeeping of its backup.
    ``sample_size``: peers aggregated per round; ``positive_slope``: cRELU's (Eq. 13); ``damage_ratio``: see the module
    docstring."""

    def __init__(
        self,
        peers: Iterable[str],
        sample_size: int = SAMPLE_SIZE,
        positive_slope: float = POSITIVE_SLOPE,
        damage_ratio: float | None = None,
    ):
        _check_settings(sample_size, positive_slope, damage_ratio)
        names = sorted(peers)
        if len(set(names)) != len(names):
            raise ValueError(f"peers {names} contain duplicates; list each peer once")
        self.peers = tuple(names)
        self.sample_size = sample_size
        self.positive_slope = float(positive_slope)
        self.damage_ratio = None if damage_ratio is None else float(damage_ratio)
        self.scores = dict.fromkeys(self.peers, 0.0)  # c_i^0 = 0: neutral
        self.best_loss: float | None = None  # loss of the backup model
        self.last_loss: float | None = None  # loss_last of Algorithm 3
        self.observations = 0

    def blocked(self) -> list[str]:
        """Peers whose score is -inf: never sampled again."""
        return [p for p in self.peers if self.scores[p] == -math.inf]

    def sample_weights(self) -> dict[str, float]:
        """theta_i = softmax(cRELU(c_i)) over the peers (Eq. 12)."""
        return trust_sample_weights(self.scores, self.positive_slope)

    def sample_peers(self, rng: np.random.Generator, among: Iterable[str] | None = None) -> list[str]:
        """The peers to aggregate this round, sorted (Algorithm 1, WeightedSample). Every peer before the first
        observation; then ``sample_size`` drawn without replacement with probabilities theta_i (fewer if fewer have a
        non-zero weight). ``among`` restricts the draw to those peers, theta_i renormalised over them. ``rng``: the
        caller's seeded numpy Generator."""
        if not isinstance(rng, np.random.Generator):
            raise ValueError(f"rng must be a numpy Generator (np.random.default_rng(seed)), got {type(rng).__name__}")
        pool = self.peers if among is None else tuple(p for p in self.peers if p in set(among))
        if self.observations == 0:
            return list(pool)
        # softmax over the pool itself: renormalising the softmax over every peer would lose a pool
        # peer whose weight underflowed next to a far better peer outside the pool
        weights = trust_sample_weights({p: self.scores[p] for p in pool}, self.positive_slope)
        w = np.array([weights[p] for p in pool])
        size = min(self.sample_size, int(np.count_nonzero(w)))
        if size == 0:
            return []
        chosen = rng.choice(len(pool), size=size, replace=False, p=w / w.sum())
        return sorted(pool[i] for i in chosen)

    def is_damaged(self, loss: float) -> bool:
        """True if a trained model with this loss counts as damaged (see the module notes)."""
        if not math.isfinite(loss):
            return True
        if self.damage_ratio is None or self.last_loss is None or self.last_loss <= 0:
            return False
        return loss > self.damage_ratio * self.last_loss

    def observe(self, loss: float, used_weights: Mapping[str, float]) -> TrustDecision:
        """One round of DTS (Algorithm 3) after local training; updates the scores and returns what to do. ``loss``: of
        the model just trained (NaN/Inf allowed: damage); ``used_weights``: p_ij of each peer aggregated into it (from
        ``defta_aggregate``, own site left out). c_i^{t+1} = c_i^t - m_i^t o p_i * loss_trust,
        loss_trust = loss^t - loss_last, or +inf when damaged (loss_last then unchanged)."""
        if isinstance(loss, bool) or not isinstance(loss, (int, float)):
            raise ValueError(f"loss must be a number, got {loss!r}")
        unknown = sorted(set(used_weights) - set(self.peers))
        if unknown:
            raise ValueError(f"used_weights name {unknown}, which are not peers of this site {list(self.peers)}")
        for p, w in used_weights.items():
            if isinstance(w, bool) or not isinstance(w, (int, float)) or not 0 < w <= 1:
                raise ValueError(f"the aggregation weight of {p!r} must be in (0, 1], got {w!r}")
        damaged = self.is_damaged(float(loss))
        save = False
        if damaged:
            loss_trust = math.inf
        else:
            save = self.best_loss is None or loss < self.best_loss
            if save:
                self.best_loss = float(loss)
            loss_trust = 0.0 if self.last_loss is None else float(loss) - self.last_loss
            self.last_loss = float(loss)
        changes = {p: 0.0 - float(w) * loss_trust for p, w in sorted(used_weights.items())}
        for p, delta in changes.items():
            self.scores[p] += delta
        self.observations += 1
        return TrustDecision(damaged, save, loss_trust, changes)

    def to_dict(self) -> dict:
        """A JSON-serialisable copy of the state (strict JSON: no NaN or Inf)."""
        return {
            "peers": list(self.peers),
            "scores": {p: s for p, s in self.scores.items() if math.isfinite(s)},
            "blocked": self.blocked(),
            "best_loss": self.best_loss,
            "last_loss": self.last_loss,
            "observations": self.observations,
            "sample_size": self.sample_size,
            "positive_slope": self.positive_slope,
            "damage_ratio": self.damage_ratio,
        }

    @classmethod
    def from_dict(cls, data: Mapping) -> DeftaTrust:
        """The state saved by ``to_dict``."""
        state = cls(data["peers"], data["sample_size"], data["positive_slope"], data["damage_ratio"])
        blocked = set(data.get("blocked", []))
        if set(data["scores"]) | blocked != set(state.peers):
            raise ValueError("saved DTS state: scores and blocked must together name every peer once")
        state.scores = {p: (-math.inf if p in blocked else float(data["scores"][p])) for p in state.peers}
        state.best_loss = data["best_loss"]
        state.last_loss = data["last_loss"]
        state.observations = int(data["observations"])
        return state
