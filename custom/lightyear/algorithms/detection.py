"""Detection metrics of a defence: DAcc, FPR and FNR (FedCAP, Sec. VI-C and Table III), pure Python.

Positive = malicious. Among the senders a defence evaluated, it labels some malicious (excludes or
down-weights them); against the truly malicious ones that gives

    TP = malicious labelled malicious     FN = malicious labelled benign
    FP = benign labelled malicious        TN = benign labelled benign

    DAcc = (TP + TN) / evaluated   share of evaluated senders labelled correctly
    FPR  = FP / (FP + TN)          share of benign senders labelled malicious
    FNR  = FN / (FN + TP)          share of malicious senders labelled benign

A ratio whose denominator is 0 (no benign, or no malicious sender evaluated) is NaN, not an
error: the rate is undefined there, and NaN keeps it out of a mean instead of faking a 0.

Pooling (:func:`pool`) sums the counts first and takes the ratios of the sums, so "over the run"
(one count per round) and "per receiving benign site" (one per receiver and round) weigh every
labelling decision equally; a sender evaluated in 10 rounds counts 10 times.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass


@dataclass(frozen=True)
class DetectionCounts:
    """TP, FP, TN, FN of one labelling (or a pool of them), with the FedCAP ratios."""

    tp: int = 0
    fp: int = 0
    tn: int = 0
    fn: int = 0

    def __post_init__(self):
        for name in ("tp", "fp", "tn", "fn"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 0:
                raise ValueError(f"{name} must be an integer count >= 0, got {value!r}")

    @property
    def evaluated(self) -> int:
        return self.tp + self.fp + self.tn + self.fn

    @property
    def dacc(self) -> float:
        """(TP + TN) / evaluated; NaN if nothing was evaluated."""
        return _ratio(self.tp + self.tn, self.evaluated)

    @property
    def fpr(self) -> float:
        """FP / (FP + TN); NaN if no benign sender was evaluated."""
        return _ratio(self.fp, self.fp + self.tn)

    @property
    def fnr(self) -> float:
        """FN / (FN + TP); NaN if no malicious sender was evaluated."""
        return _ratio(self.fn, self.fn + self.tp)

    def __add__(self, other: DetectionCounts) -> DetectionCounts:
        if not isinstance(other, DetectionCounts):
            return NotImplemented
        return DetectionCounts(self.tp + other.tp, self.fp + other.fp, self.tn + other.tn, self.fn + other.fn)


def detection_counts(malicious: Iterable, evaluated: Iterable, flagged: Iterable) -> DetectionCounts:
    """Count one labelling: ``evaluated`` senders, of which ``flagged`` were labelled malicious.

    ``malicious`` is the set of truly malicious senders; those not in ``evaluated`` (an attacker
    that sent nothing this round, or is not a neighbour of this receiver) are left out. Every
    ``flagged`` sender must have been evaluated: a defence cannot label what it did not see.
    Arguments are collections of sender names (a single string is refused: pass ``{"site-1"}``).
    """
    bad, seen, marked = (
        _names(n, v) for n, v in (("malicious", malicious), ("evaluated", evaluated), ("flagged", flagged))
    )
    stray = marked - seen
    if stray:
        raise ValueError(
            f"flagged senders {sorted(map(str, stray))} were not evaluated; "
            "pass every sender the defence looked at in evaluated"
        )
    attackers = bad & seen
    return DetectionCounts(
        tp=len(attackers & marked),
        fp=len(marked - attackers),
        tn=len(seen - attackers - marked),
        fn=len(attackers - marked),
    )


def pool(counts: Iterable[DetectionCounts]) -> DetectionCounts:
    """The sum of several counts (rounds, receivers); its ratios are the pooled DAcc, FPR and FNR."""
    total = DetectionCounts()
    for item in counts:
        if not isinstance(item, DetectionCounts):
            raise ValueError(f"pool takes DetectionCounts, got {type(item).__name__}")
        total = total + item
    return total


def _names(name: str, values) -> set:
    if isinstance(values, (str, bytes)):
        raise ValueError(
            f"{name} must be a collection of sender names, got the single string {values!r}; wrap it: {{{values!r}}}"
        )
    return set(values)


def _ratio(num: int, den: int) -> float:
    return num / den if den else float("nan")


@dataclass(frozen=True)
class Labelling:
    """One decision: the senders evaluated and those of them labelled malicious."""

    evaluated: frozenset
    flagged: frozenset


def names(value) -> frozenset:
    """Site names of a record cell: a ``;``-separated string (CSV) or a list (JSON, a live row)."""
    if value is None:
        return frozenset()
    if isinstance(value, str):
        return frozenset(n for n in value.split(";") if n)
    return frozenset(str(n) for n in value)


def filled(row: dict, peers, suffix: str) -> frozenset:
    """The peers whose ``<peer><suffix>`` cell is not empty (the rule computed something for them)."""
    return frozenset(p for p in peers if str(row.get(f"{p}{suffix}", "")) != "")


def excluded_labels(entry: dict, peers=()) -> Labelling:
    """Star rules: a site the rule left out of the round (``excluded``: not among Krum's m, AFA's
    removed or blocked, ASMR's flagged, CFL's minority, FedCAP's removed), or whose result the
    server's model checks refused (``rejected``; absent in records written before it was kept)."""
    rejected = names(entry.get("rejected"))
    return Labelling(names(entry["kept"]) | names(entry["excluded"]) | rejected, names(entry["excluded"]) | rejected)


STAR_RECORD = ("round", "kept", "excluded")
"""The history keys every star rule's detection reads (:func:`excluded_labels`)."""
