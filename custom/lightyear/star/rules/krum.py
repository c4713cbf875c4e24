"""Krum and multi-Krum as a star aggregator (Blanchard, El Mhamdi, Guerraoui, Stainer, "Machine Learning with
Adversaries: Byzantine Tolerant Gradient Descent", NeurIPS 2017): a model's score is the sum of squared distances to
its n - f - 2 nearest others (Sec. 4); Krum keeps the lowest, multi-Krum (Sec. 5) averages the m lowest
(:func:`lightyear.algorithms.star.krum.krum`). Default f: the largest with n > 2f + 2 (Prop. 1; the LIGHTYEAR
paper's f = n // 2 breaks it and is refused). A round with fewer than 2f + 3 results (at least 3) keeps the model.
"""

from __future__ import annotations

from lightyear.algorithms.attacks.colluding import KrumTarget
from lightyear.algorithms.detection import STAR_RECORD, excluded_labels
from lightyear.algorithms.star.krum import check_krum_settings, default_f, krum
from lightyear.checks import int_in
from lightyear.flare.declarations import STAR, Detection, Method
from lightyear.star.aggregator import StarAggregator


def _check_f(f):
    if f is not None:
        int_in("f", f, 0, note="number of Byzantine sites Krum tolerates; or null: default_f of the round")
    return f


def _check_m(m):
    return int_in("m", m, 1, note="number of models multi-Krum averages; 1 = Krum")


class KrumAggregator(StarAggregator):
    ADAPTIVE = KrumTarget.ATTACK
    """The adaptive attack that targets Krum (Fang et al.)."""

    def __init__(self, f: int | None = None, m: int = 1):
        """Args: f: Byzantine sites tolerated (None: ``default_f(n)`` of each round's n results); m: models averaged
        (multi-Krum; 1 is Krum; a round with fewer results averages them all)."""
        super().__init__()
        self.f = _check_f(f)
        self.m = _check_m(m)

    def adaptive_target(self, sent: dict, keys: list[str]) -> KrumTarget:
        """What the adaptive attack knows of this rule in a round: its f and m."""
        return KrumTarget(self.f, self.m)

    def check_sites(self, num_sites: int) -> str:
        try:
            check_krum_settings(num_sites, default_f(num_sites) if self.f is None else self.f, min(self.m, num_sites))
        except ValueError as exc:
            return f"KrumAggregator with {num_sites} sites: {exc}"
        return ""

    def aggregate(self, global_weights, results, round_num, fl_ctx):
        sites = sorted(results)
        n = len(sites)
        f = default_f(n) if self.f is None else self.f
        mean, selected = krum([results[s]["weights"] for s in sites], f, min(self.m, n))
        kept = [sites[i] for i in selected]
        decision = self.decide(mean, kept, [s for s in sites if s not in kept], f=f)
        self.log_info(fl_ctx, f"round {round_num}: Krum (f={f}) kept {decision.kept}, left out {decision.excluded}")
        return decision


METHOD = Method(
    "krum",
    STAR,
    "the model nearest its n - f - 2 closest others (multi-Krum: the mean of the m best)",
    rule=KrumAggregator,
    detection=Detection(
        excluded_labels,
        STAR_RECORD,
        "",
        "not among the m models with the lowest Krum scores, or rejected by the server",
    ),
    adaptive=KrumAggregator.ADAPTIVE,
)
