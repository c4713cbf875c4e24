"""What a method declares of itself: one :class:`Method` per method, beside its component (no FLARE import).

A method's module (a peer-to-peer executor in ``lightyear.p2p.methods``, a star rule in
``lightyear.star.rules``, or a plugin's module) declares everything the toolkit needs to know of
it: its topology, the classes FLARE builds, its settings per dataset task and dataset, how its
records are read as detections, and which adaptive attack targets it. The job generator, the
detection metrics, the attack checks and the reports read these declarations through the registry
(:mod:`lightyear.jobs.registry`); no other module names a method.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

P2P, STAR = "p2p", "star"
TOPOLOGIES = (P2P, STAR)
ORACLE = "oracle"
"""``Method.adaptive`` of a peer-to-peer method whose site predicts its own decision
(``predicted_outcome``): the adaptive attack that queries that prediction targets it
(:mod:`lightyear.p2p.attack.adaptive`; its settings are declared with the attacks)."""
NAME = re.compile(r"^[a-z][a-z0-9_]*$")


@dataclass(frozen=True)
class Detection:
    """How a method's decisions are read as detections (FedCAP's DAcc / FPR / FNR).

    ``label(record, peers) -> Labelling`` reads one record (a ``rounds.csv`` row of a receiving
    site, or a star rule's history entry) into the senders evaluated and flagged
    (:class:`~lightyear.algorithms.detection.Labelling`); ``needs``: the record columns
    (or history keys) it reads, ``round`` and lists of sites (a record naming a site the job does not
    run is refused as damaged); ``peer_suffix``: a per-sender column it reads (``<peer><suffix>``);
    ``text``: what counts as flagged, in words; ``per_client``: the exclusion is permanent, so the
    counts per client at the end of a run (FedCAP's Table III) are reported too."""

    label: Callable
    needs: tuple[str, ...]
    peer_suffix: str
    text: str
    per_client: bool = False


STAR_SITE = "lightyear.star.executor.StarExecutor"
"""The site every star method runs unless it declares its own (named, not imported: a declaration
that names no site of its own imports no PyTorch)."""


def class_path(cls: type) -> str:
    """The path a job configuration names a class by (``package.module.Class``)."""
    return f"{cls.__module__}.{cls.__qualname__}"


@dataclass(frozen=True)
class Settings:
    """A method's own values of job settings, in three layers (:mod:`lightyear.jobs.settings`): for
    all its jobs (``defaults``), per dataset task (``tasks``: ``{"segmentation": {...}}``) and per
    dataset (``datasets``: ``{"digits": {...}}``)."""

    defaults: Mapping[str, object] = field(default_factory=dict)
    tasks: Mapping[str, Mapping] = field(default_factory=dict)
    datasets: Mapping[str, Mapping] = field(default_factory=dict)


@dataclass(frozen=True)
class Method:
    """One method, as the toolkit sees it.

    Every constructor argument of its classes that the topology's templates do not set is a job
    setting of the same name (or the name the class's ``SETTING_NAMES`` gives it), written into the
    job when a layer or ``--set`` gives it (:func:`lightyear.jobs.settings.direct_arguments`): a
    setting no layer gives is left out, so the constructor's default applies.

    Args:
        name: the name jobs and sweeps use (``lightyear-jobs --method NAME``).
        topology: ``p2p`` (the rounds run on the sites) or ``star`` (a server rule).
        description: one sentence, for listings.
        site: the site executor's class (star: None runs the star topology's own, :data:`STAR_SITE`).
        rule: star only, the server aggregator's class.
        settings: the method's own values of job settings (:class:`Settings`).
        fixed: arguments with a value of the job's own, not settings: one the topology's templates set
            is replaced there (``topology: none`` for the controller), any other goes to the site
            executor (e.g. an aggregation mode).
        omit: arguments of the topology's templates this method does not take (a layer's value of
            them is not written; ``--set`` still reaches the component that takes it).
        detection: how its records are read as detections (None: it excludes no sender).
        adaptive: the declaration of the adaptive attack that targets it (None: none does; :data:`ORACLE`
            for a peer-to-peer method whose site predicts its own decision).
    """

    name: str
    topology: str
    description: str
    site: type | None = None
    rule: type | None = None
    settings: Settings = field(default_factory=Settings)
    fixed: Mapping[str, object] = field(default_factory=dict)
    omit: tuple[str, ...] = ()
    detection: Detection | None = None
    adaptive: object | None = None

    def __post_init__(self):
        if not isinstance(self.name, str) or not NAME.fullmatch(self.name):
            raise ValueError(
                f"a method's name must be lower-case letters, digits and '_', starting with a letter; got {self.name!r}"
            )
        if self.topology not in TOPOLOGIES:
            raise ValueError(
                f"method {self.name}: topology must be one of {', '.join(TOPOLOGIES)}, got {self.topology!r}"
            )
        for label, cls in (("site", self.site), ("rule", self.rule)):
            if cls is not None and not isinstance(cls, type):
                raise ValueError(f"method {self.name}: {label} must be a class (site=MyExecutor), got {cls!r}")
        if self.topology == P2P and self.site is None:
            raise ValueError(f"method {self.name}: a peer-to-peer method names its site executor (site=...)")
        if (self.topology == STAR) != (self.rule is not None):
            raise ValueError(
                f"method {self.name}: a star method names its server rule (rule=...), a peer-to-peer one none"
            )
        if not isinstance(self.settings, Settings):
            raise ValueError(f"method {self.name}: settings must be a Settings")
        if self.detection is not None and not isinstance(self.detection, Detection):
            raise ValueError(f"method {self.name}: detection must be a Detection or None")
        if isinstance(self.adaptive, str) and (self.adaptive != ORACLE or self.topology != P2P):
            raise ValueError(
                f"method {self.name}: adaptive {self.adaptive!r} is not a declaration; a peer-to-peer method whose "
                f"site predicts its own decision declares adaptive={ORACLE!r}, any other method the attack's target"
            )

    @property
    def site_path(self) -> str:
        """The site executor's class path, as the job configuration names it."""
        return STAR_SITE if self.site is None else class_path(self.site)

    @property
    def rule_path(self) -> str | None:
        """The server rule's class path (None for a peer-to-peer method)."""
        return None if self.rule is None else class_path(self.rule)

    @property
    def layers(self) -> dict:
        """The method's settings in the form :func:`lightyear.jobs.settings.layered_settings` reads."""
        return {
            "defaults": dict(self.settings.defaults),
            "tasks": {k: dict(v) for k, v in self.settings.tasks.items()},
            "datasets": {k: dict(v) for k, v in self.settings.datasets.items()},
        }
