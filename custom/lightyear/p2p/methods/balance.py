"""BALANCE's site (Fang et al., "Byzantine-Robust Decentralized Federated Learning", ACM CCS 2024): accept neighbours
within gamma * exp(-kappa * t / T) * ||theta_i||, then alpha * theta_i + (1 - alpha) * mean(accepted)
(:mod:`lightyear.algorithms.p2p.balance`, which says where it departs from the authors' code)."""

from __future__ import annotations

import time

import numpy as np

from lightyear.algorithms.detection import Labelling, filled, names
from lightyear.algorithms.p2p.balance import balance_threshold, balance_update, check_balance_settings
from lightyear.algorithms.vectors import flatten, float_keys
from lightyear.flare.declarations import ORACLE, P2P, Detection, Method
from lightyear.p2p.site.executor import Aggregation, P2PExecutor


class BalanceExecutor(P2PExecutor):
    SETTING_NAMES = {"gamma": "balance_gamma", "kappa": "balance_kappa", "alpha": "balance_alpha"}
    """Constructor argument -> the job setting that gives it (``--set balance_gamma=...``)."""

    def __init__(self, gamma: float = 0.3, kappa: float = 1.0, alpha: float = 0.5, **kwargs):
        """Args (the paper's values in brackets; others: ``P2PExecutor``'s):
        gamma: acceptance radius as a share of the own model's norm (> 0; 0.3).
        kappa: how fast the radius shrinks over the run (>= 0; 1; 0 keeps it fixed).
        alpha: weight of the own model in the update, in [0, 1] (0.5).
        """
        check_balance_settings(0, 1, gamma, kappa, alpha)
        self.gamma, self.kappa, self.alpha = float(gamma), float(kappa), float(alpha)
        super().__init__(**kwargs)

    def aggregate(self, round_num: int, own: dict, received: dict[str, dict], inbox=None) -> Aggregation:
        start = time.perf_counter()
        weights, accepted, distances = balance_update(
            own, received, round_num, self.rounds, self.gamma, self.kappa, self.alpha
        )
        own_norm = float(np.linalg.norm(flatten(own, float_keys(own))))
        radius = balance_threshold(own_norm, round_num, self.rounds, self.gamma, self.kappa)
        fields = {
            "selected": accepted,
            "n_selected": len(accepted),
            "radius": radius,
            "lambda": round_num / self.rounds,
        }
        for peer in self.in_neighbours:
            fields[f"{peer}_distance"] = distances.get(peer, "")
            fields[f"{peer}_accepted"] = int(peer in accepted) if peer in distances else ""
        return Aggregation(weights=weights, fields=fields, score_s=time.perf_counter() - start)

    def predicted_outcome(self, round_num: int, receiver: dict, others: dict[str, dict], copies: int):
        """The oracle (``P2PExecutor.predicted_outcome``): BALANCE's radius and mean, without a forward pass."""
        names = [f"crafted-{i}" for i in range(max(1, copies))]

        def predict(crafted: dict) -> tuple[bool, dict]:
            received = {**others, **{n: crafted for n in names}}
            weights, accepted, _ = balance_update(
                receiver, received, round_num, self.rounds, self.gamma, self.kappa, self.alpha
            )
            return names[0] in accepted, weights

        return predict


def balance_labels(row: dict, peers) -> Labelling:
    """BALANCE's detections: a peer not accepted (distance above the radius), or a rejected one."""
    evaluated = filled(row, peers, "_distance") | names(row.get("rejected"))
    return Labelling(evaluated, evaluated - names(row["selected"]))


METHOD = Method(
    "balance",
    P2P,
    "BALANCE (Fang et al., CCS 2024): accept a neighbour within gamma exp(-kappa t/T) of the own model's norm; "
    "alpha own + (1 - alpha) mean(accepted)",
    site=BalanceExecutor,
    detection=Detection(
        balance_labels,
        ("round", "selected", "rejected"),
        "_distance",
        "not accepted (distance above the acceptance radius) or rejected",
    ),
    adaptive=ORACLE,
)
