"""DeFTA's site: trusted averaging, the decentralised trust system, and AsyncDeFTA.

Zhou et al., "DeFTA: A Plug-and-Play Decentralized Replacement for FedAvg" (the rules:
:mod:`lightyear.algorithms.p2p.defta`, :mod:`lightyear.algorithms.p2p.defta_trust`). Algorithm 1 on the exchange's
rounds: train and let the trust system judge the last aggregation (Algorithm 3); sample peers (Eq. 12, seeded by seed,
site and round; all in round 0); send with the training-set size; aggregate (Algorithm 2, Corollary 3.3.2), each d_j
computed from the graph and the seed. AsyncDeFTA (Section 3.4) aggregates the newest model held from each sampled
peer after at most ``async_wait`` s.
"""

from __future__ import annotations

import math
import time
import zlib

import numpy as np

from lightyear.algorithms.detection import Labelling, names
from lightyear.algorithms.model_check import model_problems
from lightyear.algorithms.p2p.defta import DeftaTrust, async_inputs, defta_aggregate
from lightyear.checks import boolean, number_in, positive_seconds
from lightyear.flare.declarations import P2P, Detection, Method
from lightyear.p2p.site.executor import Aggregation, P2PExecutor
from lightyear.p2p.wire.exchange import Inbox

BACKUP = "backup/"
SAMPLING_STREAM = 0xDEF7A


class DeftaExecutor(P2PExecutor):
    shares_dataset_size = True
    SETTING_NAMES = {
        "sample_size": "defta_sample_size",
        "positive_slope": "defta_positive_slope",
        "damage_ratio": "defta_damage_ratio",
        "max_size_ratio": "defta_max_size_ratio",
    }
    """Constructor argument -> the job setting that gives it (``--set defta_sample_size=...``)."""

    def __init__(
        self,
        sample_size: int = 2,
        positive_slope: float = 0.2,
        damage_ratio: float | None = None,
        asynchronous: bool = False,
        async_wait: float = 5.0,
        max_size_ratio: float | None = 10.0,
        **kwargs,
    ):
        """Args (others: ``P2PExecutor``'s):
        sample_size: peers aggregated per round (2 in the paper's experiments).
        positive_slope: cRELU's slope above 0 (Eq. 13; 0.2).
        damage_ratio: None or a number > 1: a loss above this multiple of the previous one also means damage.
        asynchronous: AsyncDeFTA (Section 3.4) instead of the synchronous rounds.
        async_wait: seconds (>= 1) an asynchronous site waits for new models before aggregating.
        max_size_ratio: cap (>= 1; None: none) on a peer's claimed training-set size, as a multiple of the own size.
        """
        DeftaTrust([], sample_size, positive_slope, damage_ratio)  # raises naming a bad setting
        boolean("asynchronous", asynchronous)
        wait = positive_seconds("async_wait", async_wait)
        if max_size_ratio is not None:
            number_in("max_size_ratio", max_size_ratio, 1.0, note="or null: no cap")
        self.sample_size, self.positive_slope, self.damage_ratio = sample_size, float(positive_slope), damage_ratio
        self.max_size_ratio = None if max_size_ratio is None else float(max_size_ratio)
        self.asynchronous, self.async_wait = asynchronous, wait
        super().__init__(**kwargs)
        self.trust: DeftaTrust | None = None
        self.backup: dict | None = None
        self.last_used: dict[str, float] = {}  # p_ij of the peers in the last aggregation, judged next round
        self.sampled: list[str] = []
        self.decision = None

    # ------------------------------------------------------------------ the trust system
    def _trust(self) -> DeftaTrust:
        if self.trust is None:
            self.trust = DeftaTrust(self.in_neighbours, self.sample_size, self.positive_slope, self.damage_ratio)
        return self.trust

    def _rng(self, round_num: int) -> np.random.Generator:
        return np.random.default_rng(
            [self.seed & 0xFFFFFFFF, round_num, zlib.crc32(self.site.encode()), SAMPLING_STREAM]
        )

    def local_update(self, round_num: int) -> dict:
        rt, trust = self.runtime, self._trust()
        if self.backup is None:
            self.backup = rt.get_weights()  # the initial model: what a damaged first round falls back to
        stats = rt.train(round_num, flip_labels=self.flip_labels)
        self.decision = trust.observe(float(stats["train_loss"]), self.last_used)
        if self.decision.save_backup:
            self.backup = rt.get_weights()
        if self.decision.damaged:
            rt.set_weights(self.backup)
            stats = rt.train(round_num, flip_labels=self.flip_labels)  # the compensation step of Algorithm 3
        self.last_used = {}
        senders = self.round_senders(round_num)
        self.sampled = list(senders) if round_num == 0 else trust.sample_peers(self._rng(round_num), among=senders)
        return stats

    def awaited_senders(self, round_num: int, senders: list[str]) -> list[str]:
        return [p for p in senders if p in self.sampled] if self.asynchronous else senders

    # ------------------------------------------------------------------ the aggregation
    def _size(self, claimed, own_size: int) -> int:
        if claimed is None:
            return own_size
        if self.max_size_ratio is None:
            return int(claimed)
        return max(1, min(int(claimed), int(self.max_size_ratio * own_size)))

    def _degree(self, site: str, round_num: int) -> int:
        """d_j: sites that receive ``site``'s model in ``round_num``, plus its own model."""
        sends = self.sampling.out_degree(site, round_num) if self.sampling is not None else 1
        return max(sends, 1) + 1

    def exchange_mode(self) -> tuple[bool, float]:
        """AsyncDeFTA's exchange (``asynchronous``) keeps the newest model of each sender."""
        return self.asynchronous, self.async_wait

    def aggregate(
        self, round_num: int, own: dict, received: dict[str, dict], inbox: Inbox | None = None
    ) -> Aggregation:
        start = time.perf_counter()
        inbox = inbox or Inbox()
        if self.asynchronous:
            held = {p: (inbox.sent_round.get(p, round_num), m) for p, m in received.items()}
            models, staleness = async_inputs(self.sampled, held, round_num)
        else:
            models, staleness = {p: received[p] for p in self.sampled if p in received}, {}
        own_size = int(self.runtime.data.sizes()["train"])
        sizes = {self.site: own_size}
        degrees = {self.site: self._degree(self.site, round_num)}
        for peer in models:
            sizes[peer] = self._size(inbox.num_samples.get(peer), own_size)
            degrees[peer] = self._degree(peer, inbox.sent_round.get(peer, round_num))
        weights, used = defta_aggregate(self.site, own, models, sizes, degrees)
        self.last_used = {p: w for p, w in used.items() if p != self.site}
        return Aggregation(
            weights=weights, fields=self._fields(received, models, used, staleness), score_s=time.perf_counter() - start
        )

    def _fields(self, received: dict, models: dict, used: dict, staleness: dict) -> dict:
        trust, decision = self._trust(), self.decision
        theta = trust.sample_weights()
        fields = {
            "received": sorted(received),
            "selected": sorted(models),
            "n_selected": len(models),
            "sampled": self.sampled,
            "own_weight": used.get(self.site, 1.0),
            "damaged": int(bool(decision and decision.damaged)),
            "backup_saved": int(bool(decision and decision.save_backup)),
            "loss_trust": _number(decision.loss_trust) if decision else "",
            "blocked": trust.blocked(),
        }
        for peer in self.in_neighbours:
            fields[f"{peer}_trust"] = _number(trust.scores.get(peer, 0.0))
            fields[f"{peer}_theta"] = theta.get(peer, "")
            fields[f"{peer}_p"] = used.get(peer, "")
            if self.asynchronous:
                fields[f"{peer}_staleness"] = staleness.get(peer, "")
        return fields

    # ------------------------------------------------------------------ state across restarts
    def method_state(self) -> tuple[dict, dict]:
        state = {"trust": self.trust.to_dict() if self.trust is not None else None, "last_used": dict(self.last_used)}
        arrays = {BACKUP + k: v for k, v in (self.backup or {}).items()}
        return state, arrays

    def restore_method_state(self, state: dict, arrays: dict) -> None:
        if state.get("trust") is not None:
            trust = DeftaTrust.from_dict(state["trust"])
            if set(trust.peers) != set(self.in_neighbours):
                raise ValueError(
                    f"the checkpoint's trust state is for peers {list(trust.peers)}, but this site now hears "
                    f"{self.in_neighbours}; delete the site checkpoint to start this site from round 0"
                )
            self.trust = trust
        self.last_used = {str(p): float(w) for p, w in (state.get("last_used") or {}).items()}
        backup = {k[len(BACKUP) :]: v for k, v in arrays.items() if k.startswith(BACKUP)}
        problems = model_problems(backup, self.runtime.get_weights(), self.max_abs_weight) if backup else []
        if problems:  # the backup replaces the model after a damaged round: it must be one
            raise ValueError(
                f"the checkpoint's backup model does not fit this site's model ({'; '.join(problems[:3])})"
            )
        self.backup = backup or None


def _number(value: float):
    """A float for the records; infinities as text (strict JSON has none)."""
    return value if math.isfinite(value) else ("inf" if value > 0 else "-inf")


def defta_labels(row: dict, peers) -> Labelling:
    """DeFTA's detections: a received peer not aggregated (outside the trust-weighted sample), or a rejected one."""
    evaluated = names(row["received"]) | names(row.get("rejected"))
    return Labelling(evaluated, evaluated - names(row["selected"]))


METHOD = Method(
    "defta",
    P2P,
    "DeFTA (Zhou et al.): out-degree-corrected trusted averaging, the decentralised trust system "
    "(trust-weighted sampling, model backup), optional asynchronous variant",
    site=DeftaExecutor,
    detection=Detection(
        defta_labels,
        ("round", "received", "selected", "rejected"),
        "",
        "received but not aggregated (outside the trust-weighted sample, blocked peers included) or rejected",
    ),
)
