"""Adaptive Federated Averaging, AFA (Munoz-Gonzalez, Co, Lupu, "Byzantine-Robust Federated
Machine Learning through Adaptive Model Averaging", arXiv:1909.05125, 2019), pure NumPy/SciPy.

One round (the paper's Algorithm 1, robust aggregation), over the sites not yet blocked:

1. aggregate the updates with weights n_k * p_k, where n_k is the site's sample count and
   p_k = alpha_k / (alpha_k + beta_k) the expected value of its Beta(alpha_k, beta_k)
   reputation;
2. s_k = cosine similarity of each update to that aggregate;
3. if mean(s) < median(s), the bad updates sit on the low side: remove those with
   s_k < median(s) - xi * std(s); otherwise remove those with s_k > median(s) + xi * std(s);
4. repeat from 1 on the remaining sites with xi <- xi + delta_xi until a pass removes nobody.

Then every site seen this round updates its Beta counts (good: alpha + 1, bad: beta + 1), and a
site is **blocked for good** once P(p_k < 0.5) = BetaCDF(0.5; alpha_k, beta_k) exceeds the
blocking threshold (the paper's Bayesian client model; a blocked site's updates are ignored
in every later round). Defaults are the authors': xi0 = 2, delta_xi = 0.25, prior
alpha0 = beta0 = 3, threshold 0.95.

Differences from the LIGHTYEAR authors' code: the score here is the
expected reputation alpha / (alpha + beta), not alpha / beta; and the reputation lives in an
:class:`AfaReputation` the server keeps (and saves with :meth:`AfaReputation.to_dict`) across
rounds instead of being rebuilt, and lost, every round.

std is the population standard deviation (NumPy's default); the Beta counts are updated
after the round's aggregate, which uses the reputations the round started with.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field

import numpy as np
from scipy.special import betainc

from lightyear.algorithms.aggregation import normalised
from lightyear.algorithms.vectors import check_finite, cosine_similarity, stack

PRIOR = 3.0
XI0 = 2.0
DELTA_XI = 0.25
BLOCK_THRESHOLD = 0.95


def _number(value) -> bool:
    return not isinstance(value, bool) and isinstance(value, (int, float)) and math.isfinite(value)


def check_prior(name: str, value: float) -> float:
    """A Beta prior count must be a finite number > 0 (the authors use 3)."""
    if not _number(value) or value <= 0:
        raise ValueError(f"{name} (Beta prior count) must be a finite number > 0, got {value!r}; the authors use 3")
    return float(value)


def check_xi(xi0: float, delta_xi: float) -> tuple[float, float]:
    """xi0 must be a finite number > 0 (authors: 2) and delta_xi a finite number > 0 (authors: 0.25)."""
    if not _number(xi0) or xi0 <= 0:
        raise ValueError(
            f"xi0 (initial threshold in standard deviations) must be a finite number > 0, got {xi0!r}; "
            "the authors use 2"
        )
    if not _number(delta_xi) or delta_xi <= 0:
        raise ValueError(
            f"delta_xi (threshold increment per pass) must be a finite number > 0, got {delta_xi!r}; "
            "the authors use 0.25"
        )
    return float(xi0), float(delta_xi)


def check_block_threshold(value: float) -> float:
    """The blocking threshold is a probability in (0.5, 1) (authors: 0.95)."""
    if not _number(value) or not 0.5 < value < 1.0:
        raise ValueError(f"block_threshold must be a probability in (0.5, 1), got {value!r}; the authors use 0.95")
    return float(value)


@dataclass
class AfaReputation:
    """Per-site Beta(alpha, beta) reputation counts and the set of blocked sites.

    A site seen for the first time starts at the prior (alpha0, beta0). Keep one instance for
    the whole run; :meth:`to_dict` gives it as JSON (the rule's ``aggregator_state.json``).
    """

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
        """P(p < 0.5) under Beta(alpha, beta): the posterior probability that the site is mostly bad.

        This is the regularised incomplete beta function I_0.5(alpha, beta)
        (``scipy.special.betainc``, the same value as ``scipy.stats.beta.cdf(0.5, alpha, beta)``
        without importing scipy.stats).
        """
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
    """The result of one AFA round.

    good: sites aggregated this round (sorted); bad: sites removed this round (sorted);
    blocked: every site blocked after this round, including those blocked earlier whose
    updates were ignored (sorted); newly_blocked: the sites blocked by this round (sorted);
    weights: site -> aggregation weight over ``good`` (n_k * p_k normalised, sums to 1);
    similarity: site -> cosine similarity to the aggregate, from the final pass for good
    sites and from the pass that removed it for bad ones; aggregate: the aggregated update
    vector (float64).
    """

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
    """One AFA round: robust aggregate of ``updates`` and the reputation update (in place).

    ``updates`` maps each site to its flattened update (or model: cosine similarities and the
    weighted mean are then taken over models); ``num_samples`` gives n_k > 0 for every site.
    Updates from sites already blocked in ``reputation`` are ignored. ``reputation`` is
    modified: Beta counts of the sites seen, and new blocks. Raises ValueError on non-finite
    updates, bad settings, or when no unblocked site is left.
    """
    xi0, delta_xi = check_xi(xi0, delta_xi)
    block_threshold = check_block_threshold(block_threshold)
    sites = sorted(s for s in updates if s not in reputation.blocked)
    if not sites:
        raise ValueError(f"no unblocked site left to aggregate (blocked: {sorted(reputation.blocked)})")
    for s in sites:
        n = num_samples.get(s)
        if not _number(n) or n <= 0:
            raise ValueError(f"num_samples[{s!r}] must be a finite number > 0, got {n!r}")
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
