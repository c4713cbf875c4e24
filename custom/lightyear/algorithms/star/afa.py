"""Adaptive Federated Averaging, AFA (Munoz-Gonzalez, Co, Lupu, "Byzantine-Robust Federated Machine Learning
through Adaptive Model Averaging", arXiv:1909.05125, 2019), pure NumPy/SciPy.

One round (the paper's Algorithm 1) over the sites not yet blocked: (1) aggregate with weights n_k * p_k,
p_k = alpha_k / (alpha_k + beta_k) the expected Beta reputation; (2) s_k = cosine of each update with the aggregate;
(3) if mean(s) < median(s) remove s_k < median(s) - xi * std(s), else s_k > median(s) + xi * std(s) (population
std); (4) repeat with xi += delta_xi until nobody is removed. Then every site seen updates its Beta counts, and a site
with P(p_k < 0.5) above the threshold is blocked for good. Defaults are the authors'. Unlike the LIGHTYEAR authors'
code, the score is alpha / (alpha + beta), not alpha / beta, and the reputation persists in an :class:`AfaReputation`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

import numpy as np
from scipy.special import betainc

from lightyear.algorithms.aggregation import normalised
from lightyear.algorithms.vectors import check_finite, cosine_similarity, stack
from lightyear.checks import number_in, positive_number

PRIOR = 3.0
XI0 = 2.0
DELTA_XI = 0.25
BLOCK_THRESHOLD = 0.95


def check_prior(name: str, value: float) -> float:
    """A Beta prior count must be a finite number > 0 (the authors use 3)."""
    return positive_number(f"{name} (Beta prior count)", value, note="the authors use 3")


def check_xi(xi0: float, delta_xi: float) -> tuple[float, float]:
    """xi0 must be a finite number > 0 (authors: 2) and delta_xi a finite number > 0 (authors: 0.25)."""
    return (
        positive_number("xi0 (initial threshold in standard deviations)", xi0, note="the authors use 2"),
        positive_number("delta_xi (threshold increment per pass)", delta_xi, note="the authors use 0.25"),
    )


def check_block_threshold(value: float) -> float:
    """The blocking threshold is a probability in (0.5, 1) (authors: 0.95)."""
    note = "a probability; the authors use 0.95"
    return number_in("block_threshold", value, 0.5, 1.0, low_open=True, high_open=True, note=note)


@dataclass
class AfaReputation:
    """Per-site Beta(alpha, beta) reputation counts (the prior for a new site) and the blocked sites; one instance for
    the whole run, saved with :meth:`to_dict`."""

    alpha0: float = PRIOR
    beta0: float = PRIOR
    alpha: dict[str, float] = field(default_factory=dict)
    beta: dict[str, float] = field(default_factory=dict)
    blocked: set[str] = field(default_factory=set)

    def __post_init__(self):
        check_prior("alpha0", self.alpha0)
        check_prior("beta0", self.beta0)

    def counts(self, site: str) -> tuple[float, float]:
        """(alpha, beta) of ``site``, the prior if it has not been seen yet."""
        return self.alpha.get(site, float(self.alpha0)), self.beta.get(site, float(self.beta0))

    def expected(self, site: str) -> float:
        """E[p] = alpha / (alpha + beta), the expected probability that the site sends good updates."""
        a, b = self.counts(site)
        return a / (a + b)

    def prob_bad(self, site: str) -> float:
        """P(p < 0.5) = I_0.5(alpha, beta) under Beta(alpha, beta), the posterior probability that the site is mostly
        bad (``scipy.special.betainc``, without importing scipy.stats)."""
        a, b = self.counts(site)
        return float(betainc(a, b, 0.5))

    def record(self, site: str, good: bool) -> None:
        """One observation: a good update adds 1 to alpha, a bad one adds 1 to beta."""
        a, b = self.counts(site)
        self.alpha[site], self.beta[site] = (a + 1.0, b) if good else (a, b + 1.0)

    def to_dict(self) -> dict:
        """A JSON-serialisable snapshot (sorted lists, plain floats)."""
        return {
            "alpha0": float(self.alpha0),
            "beta0": float(self.beta0),
            "alpha": {k: float(self.alpha[k]) for k in sorted(self.alpha)},
            "beta": {k: float(self.beta[k]) for k in sorted(self.beta)},
            "blocked": sorted(self.blocked),
        }


@dataclass
class AfaOutcome:
    """The result of one AFA round, site lists sorted. good: aggregated; bad: removed this round; blocked: all blocked
    after it; newly_blocked: blocked by it; weights: n_k * p_k normalised over ``good``; similarity: cosine to the
    aggregate (of the final pass, or the one that removed the site); aggregate: the aggregated update (float64)."""

    good: list[str]
    bad: list[str]
    blocked: list[str]
    newly_blocked: list[str]
    weights: dict[str, float]
    similarity: dict[str, float]
    aggregate: np.ndarray


def _weights(sites: list[str], num_samples: Mapping[str, float], reputation: AfaReputation) -> np.ndarray:
    return normalised([num_samples[s] * reputation.expected(s) for s in sites])


def afa_round(
    updates: Mapping[str, np.ndarray],
    num_samples: Mapping[str, float],
    reputation: AfaReputation,
    xi0: float = XI0,
    delta_xi: float = DELTA_XI,
    block_threshold: float = BLOCK_THRESHOLD,
) -> AfaOutcome:
    """One AFA round: robust aggregate of ``updates`` (site -> flattened update or model) and the reputation update.
    ``num_samples`` gives n_k > 0 per site; updates of blocked sites are ignored; ``reputation`` is changed in place,
    the round's aggregate using the reputations it started with. Raises ValueError on non-finite updates, bad settings,
    or when no unblocked site is left."""
    xi0, delta_xi = check_xi(xi0, delta_xi)
    block_threshold = check_block_threshold(block_threshold)
    sites = sorted(s for s in updates if s not in reputation.blocked)
    if not sites:
        raise ValueError(f"no unblocked site left to aggregate (blocked: {sorted(reputation.blocked)})")
    for s in sites:
        positive_number(f"num_samples[{s!r}]", num_samples.get(s))
    x = dict(zip(sites, stack([updates[s] for s in sites], name="updates")))

    good, bad, xi = list(sites), [], xi0
    similarity: dict[str, float] = {}
    while True:
        agg = _weights(good, num_samples, reputation) @ np.stack([x[s] for s in good])
        sims = np.array([cosine_similarity(x[s], agg) for s in good])
        similarity.update(zip(good, sims.tolist()))
        mean, median, std = sims.mean(), float(np.median(sims)), sims.std()
        if mean < median:
            removed = [s for s, v in zip(good, sims) if v < median - xi * std]
        else:
            removed = [s for s, v in zip(good, sims) if v > median + xi * std]
        if not removed:
            break
        good = [s for s in good if s not in removed]
        bad += removed
        xi += delta_xi

    weights = _weights(good, num_samples, reputation)
    aggregate = check_finite("aggregate", weights @ np.stack([x[s] for s in good]))
    newly_blocked = []
    for s in sites:
        reputation.record(s, good=s in good)
        if reputation.prob_bad(s) > block_threshold:
            reputation.blocked.add(s)
            newly_blocked.append(s)
    return AfaOutcome(
        good=good,
        bad=sorted(bad),
        blocked=sorted(reputation.blocked),
        newly_blocked=newly_blocked,
        weights={s: float(w) for s, w in zip(good, weights)},
        similarity=similarity,
        aggregate=aggregate,
    )
