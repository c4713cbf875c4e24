"""What a method declares of itself, beside its component (no FLARE import): its topology, the classes FLARE builds,
its settings, how its records read as detections and which adaptive attack targets it. The toolkit reads declarations
through :mod:`lightyear.jobs.registry`; no other module names a method."""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

P2P, STAR = "p2p", "star"
TOPOLOGIES = (P2P, STAR)
ORACLE = "oracle"
"""``Method.adaptive`` of a peer-to-peer method whose site predicts its own decision (``predicted_outcome``), which
the adaptive attack (:mod:`lightyear.p2p.attack.adaptive`) queries."""
NAME = re.compile(r"^[a-z][a-z0-9_]*$")


@dataclass(frozen=True)
class Detection:
    """How a method's decisions are read as detections (FedCAP's DAcc / FPR / FNR): ``label(record, peers)`` reads a
    receiver's ``rounds.csv`` row or a star rule's history entry into a ``Labelling``; ``needs``: the columns it reads;
    ``peer_suffix``: a per-sender column (``<peer><suffix>``); ``text``: what counts as flagged, in words;
    ``per_client``: exclusion is permanent, so per-client counts (FedCAP's Table III) are reported too."""

    label: Callable
    needs: tuple[str, ...]
    peer_suffix: str
    text: str
    per_client: bool = False


STAR_SITE = "lightyear.star.executor.StarExecutor"
"""The site every star method runs unless it declares its own (named, not imported, so that no PyTorch is imported)."""


def class_path(cls: type) -> str:
    """The path a job configuration names a class by (``package.module.Class``)."""
    return f"{cls.__module__}.{cls.__qualname__}"


@dataclass(frozen=True)
class Settings:
    """A method's own values of job settings (:mod:`lightyear.jobs.settings`): for all jobs, per task, per dataset."""

    defaults: Mapping[str, object] = field(default_factory=dict)
    tasks: Mapping[str, Mapping] = field(default_factory=dict)
    datasets: Mapping[str, Mapping] = field(default_factory=dict)


@dataclass(frozen=True)
class Method:
    """One method, as the toolkit sees it: its ``name`` (``lightyear-jobs --method NAME``), ``topology`` (``p2p``:
    rounds run on the sites; ``star``: a server rule), one-sentence ``description``, ``site`` executor class (star: None
    runs :data:`STAR_SITE`), star only the server ``rule`` class, own ``settings``, ``fixed`` non-setting arguments (set
    in the topology's templates, else given to the site executor), ``omit``: template arguments it does not take
    (``--set`` still reaches them), ``detection`` (None: excludes no sender), ``adaptive`` attack targeting it (None or
    :data:`ORACLE`). Its classes' constructor arguments are its job settings (docs/extending.md)."""

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
        return STAR_SITE if self.site is None else class_path(self.site)

    @property
    def rule_path(self) -> str | None:
        return None if self.rule is None else class_path(self.rule)

    @property
    def layers(self) -> dict:
        """The method's settings in the form :func:`lightyear.jobs.settings.layered_settings` reads."""
        return {
            "defaults": dict(self.settings.defaults),
            "tasks": {k: dict(v) for k, v in self.settings.tasks.items()},
            "datasets": {k: dict(v) for k, v in self.settings.datasets.items()},
        }
