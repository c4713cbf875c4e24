"""What a method declares of itself: one :class:`Method` per method, beside its component (no FLARE import).

A method's module (a peer-to-peer executor in ``lightyear.p2p.methods``, a star rule in
``lightyear.star.rules``, or a plugin's module) declares everything the toolkit needs to know of
it: its topology, the classes FLARE builds and which job settings reach their constructors, its
settings per dataset task and dataset, how its records are read as detections, and which adaptive
attack targets it. The job generator, the detection metrics, the attack checks and the reports
read these declarations through the registry (:mod:`lightyear.jobs.registry`); no other module
names a method.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

P2P, STAR = "p2p", "star"
TOPOLOGIES = (P2P, STAR)
NAME = re.compile(r"^[a-z][a-z0-9_]*$")


@dataclass(frozen=True)
class Detection:
    """How a method's decisions are read as detections (FedCAP's DAcc / FPR / FNR).

    ``label(record, peers) -> Labelling`` reads one record (a ``rounds.csv`` row of a receiving
    site, or a star rule's history entry) into the senders evaluated and flagged
    (:class:`~lightyear.algorithms.attacks.detection.Labelling`); ``needs``: the record columns
    (or history keys) it reads, ``round`` and lists of sites (a record naming a site the job does not
    run is refused as damaged); ``peer_suffix``: a per-sender column it reads (``<peer><suffix>``);
    ``text``: what counts as flagged, in words; ``per_client``: the exclusion is permanent, so the
    counts per client at the end of a run (FedCAP's Table III) are reported too."""

    label: Callable
    needs: tuple[str, ...]
    peer_suffix: str
    text: str
    per_client: bool = False


@dataclass(frozen=True)
class Method:
    """One method, as the toolkit sees it.

    Args:
        name: the name jobs and sweeps use (``lightyear-jobs --method NAME``).
        topology: ``p2p`` (the rounds run on the sites) or ``star`` (a server rule).
        description: one sentence, for listings.
        site: the site executor's class path.
        site_args: constructor argument -> job setting, beyond the topology's common ones (a
            setting no layer gives is left out, so the constructor's default applies).
        rule: star only, the server aggregator's class path; ``rule_args`` likewise.
        fixed: site arguments with a value of their own (not a setting), e.g. an aggregation mode.
        controller_fixed: controller arguments with a value of their own (e.g. ``topology: none``).
        omit: arguments of the topology's templates this method does not take.
        defaults, tasks, datasets: the method's settings: its own defaults, its values per
            dataset task (``{"segmentation": {...}}``) and per dataset (``lightyear.jobs.settings``).
        detection: how its records are read as detections (None: it excludes no sender).
        adaptive: the declaration of the adaptive attack that targets it (None: none does).
        featured: drawn first and in black in the reports' figures (the toolkit's own method).
    """

    name: str
    topology: str
    description: str
    site: str
    site_args: Mapping[str, str] = field(default_factory=dict)
    rule: str | None = None
    rule_args: Mapping[str, str] = field(default_factory=dict)
    fixed: Mapping[str, object] = field(default_factory=dict)
    controller_fixed: Mapping[str, object] = field(default_factory=dict)
    omit: tuple[str, ...] = ()
    defaults: Mapping[str, object] = field(default_factory=dict)
    tasks: Mapping[str, Mapping] = field(default_factory=dict)
    datasets: Mapping[str, Mapping] = field(default_factory=dict)
    detection: Detection | None = None
    adaptive: object | None = None
    featured: bool = False

    def __post_init__(self):
        if not isinstance(self.name, str) or not NAME.fullmatch(self.name):
            raise ValueError(
                f"a method's name must be lower-case letters, digits and '_', starting with a letter; got {self.name!r}"
            )
        if self.topology not in TOPOLOGIES:
            raise ValueError(
                f"method {self.name}: topology must be one of {', '.join(TOPOLOGIES)}, got {self.topology!r}"
            )
        for label, path in (("site", self.site), ("rule", self.rule)):
            if path is not None and (not isinstance(path, str) or "." not in path):
                raise ValueError(
                    f"method {self.name}: {label} must be a class path such as package.module.Class, got {path!r}"
                )
        if (self.topology == STAR) != (self.rule is not None):
            raise ValueError(
                f"method {self.name}: a star method names its server rule (rule=...), a peer-to-peer one none"
            )
        if self.detection is not None and not isinstance(self.detection, Detection):
            raise ValueError(f"method {self.name}: detection must be a Detection or None")

    @property
    def layers(self) -> dict:
        """The method's settings in the form :func:`lightyear.jobs.settings.layered_settings` reads."""
        return {
            "defaults": dict(self.defaults),
            "tasks": {k: dict(v) for k, v in self.tasks.items()},
            "datasets": {k: dict(v) for k, v in self.datasets.items()},
        }
