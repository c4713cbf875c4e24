"""Detection metrics of a defence: DAcc, FPR and FNR (FedCAP, Sec. VI-C and Table III), pure Python.

Positive = malicious: TP/FN are malicious senders labelled malicious/benign, FP/TN benign ones labelled
malicious/benign, among the senders the defence evaluated. DAcc = (TP + TN) / evaluated, FPR = FP / (FP + TN),
FNR = FN / (FN + TP); a ratio over 0 is NaN (undefined, and kept out of a mean). :func:`pool` sums counts before
taking ratios, so every labelling decision weighs the same.
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
    """Count one labelling: ``evaluated`` senders, of which ``flagged`` were labelled malicious. ``malicious`` senders
    not evaluated are left out; a flagged sender that was not evaluated is a ValueError. Arguments are collections of
    sender names (a single string is refused: pass ``{"site-1"}``)."""
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
    """Star rules: a site the rule left out (``excluded``) or whose result the server refused (``rejected``)."""
    rejected = names(entry.get("rejected"))
    return Labelling(names(entry["kept"]) | names(entry["excluded"]) | rejected, names(entry["excluded"]) | rejected)


STAR_RECORD = ("round", "kept", "excluded")
"""The history keys every star rule's detection reads (:func:`excluded_labels`)."""
