"""The parameters of a SLURM batch template and their checks, read from ``app_configs/slurm/templates.yaml`` (named
templates, each with its ``mode``, over shared ``defaults``); a bad value is refused with its fix before any script."""

from __future__ import annotations

import dataclasses
import math
import re

from lightyear.checks import int_in, raising
from lightyear.cli import UserError, read_text
from lightyear.documents import DocumentError, plain_document

MODES = ("simulator", "deploy")
PARAMETERS = ("partition", "account", "time", "gpu_type", "gpus", "cpus", "nodes", "mem_per_cpu", "sites")

_TIME = re.compile(r"^(\d+-\d{1,2}(:\d{2}){0,2}|\d+(:\d{2}){0,2})$")
_NAME = re.compile(r"^[A-Za-z0-9_.,-]+$")
_MEM = re.compile(r"^\d+[KMGT]?$")
_GRES = re.compile(r"^[A-Za-z0-9_.-]+(:[A-Za-z0-9_.-]+){0,2}(,[A-Za-z0-9_.-]+(:[A-Za-z0-9_.-]+){0,2})*$")


class SlurmInputError(UserError):
    """A template parameter, a mode or a job that cannot make a working batch script."""


def check_time(value) -> str:
    """A SLURM time limit (``HH:MM:SS``, ``D-HH:MM:SS``, minutes...)."""
    if not isinstance(value, str) or not _TIME.fullmatch(value):
        raise SlurmInputError(f"--time {value!r} is not a SLURM time: use HH:MM:SS or D-HH:MM:SS")
    return value


def check_gres(value) -> str:
    """A SLURM ``--gres`` value: ``name[:type][:count]``, comma-separated (``gpu:1``, ``gpu:a100:2``)."""
    if not isinstance(value, str) or not _GRES.fullmatch(value):
        raise SlurmInputError(
            f"--gres {value!r:.80} is not a SLURM gres: "
            "use e.g. gpu:1 or gpu:a100:2 (letters, digits, ':', ',', '_', '.', '-')"
        )
    return value


@dataclasses.dataclass(frozen=True)
class SlurmParams:
    """One template's settings: ``gpus`` a node (0: CPU only), ``cpus`` a site process; ``sites`` sizes the job."""

    name: str
    mode: str
    description: str = ""
    partition: str | None = None
    account: str | None = None
    time: str = "04:00:00"
    gpu_type: str | None = "a100"
    gpus: int = 0
    cpus: int = 4
    nodes: int = 1
    mem_per_cpu: str | None = None
    sites: int = 8

    @property
    def gres(self) -> str | None:
        kind = f"{self.gpu_type}:" if self.gpu_type else ""
        return f"gpu:{kind}{self.gpus}" if self.gpus else None

    def checked(self) -> SlurmParams:
        """Self, when every value can work; else :class:`SlurmInputError` naming the fix."""
        if self.mode not in MODES:
            raise SlurmInputError(f"template {self.name!r}: mode must be one of {', '.join(MODES)}, got {self.mode!r}")
        counts = (("gpus", self.gpus, 0), ("cpus", self.cpus, 1), ("nodes", self.nodes, 1), ("sites", self.sites, 1))
        with raising(SlurmInputError):
            for label, value, low in counts:
                int_in(f"--{label}", value, low)
        check_time(self.time)
        for label, value in (("partition", self.partition), ("account", self.account), ("gpu-type", self.gpu_type)):
            if value is not None and (not isinstance(value, str) or not _NAME.fullmatch(value)):
                raise SlurmInputError(f"--{label} {value!r} is not a valid SLURM name (letters, digits, '_', '.', '-')")
        mem = self.mem_per_cpu
        if mem is not None and (not isinstance(mem, str) or not _MEM.fullmatch(mem)):
            raise SlurmInputError(f"--mem-per-cpu {mem!r} is not a SLURM size: use e.g. 4G or 4000M")
        (self._check_simulator if self.mode == "simulator" else self._check_deploy)()
        return self

    def _check_simulator(self) -> None:
        if self.nodes != 1:
            raise SlurmInputError(
                f"the simulator runs on one node, got --nodes {self.nodes}: use the deploy mode for several nodes"
            )
        if self.gpus > self.sites:
            raise SlurmInputError(
                f"{self.gpus} GPUs for {self.sites} sites: each site process uses one GPU, so {self.gpus - self.sites} "
                f"would idle (FLARE's simulator refuses more GPU groups than sites): use --gpus {self.sites}"
            )

    def _check_deploy(self) -> None:
        if self.gpus:
            total = self.nodes * self.gpus
            if total < self.sites:
                raise SlurmInputError(
                    f"{self.sites} sites need {self.sites} GPUs (one a site) but {self.nodes} node(s) x "
                    f"{self.gpus} GPUs give {total}: use --nodes {math.ceil(self.sites / self.gpus)}"
                )
            if (self.nodes - 1) * self.gpus >= self.sites:
                raise SlurmInputError(
                    f"{self.nodes} nodes x {self.gpus} GPUs for {self.sites} sites leave a node without a "
                    f"site: use --nodes {math.ceil(self.sites / self.gpus)}"
                )
        elif self.nodes > self.sites + 1:
            raise SlurmInputError(
                f"{self.nodes} nodes for a server and {self.sites} sites leave a node idle: "
                f"use --nodes {self.sites + 1} or fewer"
            )


def load_description(path: str) -> dict[str, SlurmParams]:
    """Every template of the description, checked, by name."""
    text = read_text(path, "the template description", "give a YAML file like app_configs/slurm/templates.yaml")
    try:
        spec = plain_document(text, f"the template description {path}", yaml_format=True)
    except DocumentError as e:
        raise SlurmInputError(str(e)) from None
    if not isinstance(spec, dict) or not isinstance(spec.get("templates"), dict):
        raise SlurmInputError(f"{path} must map 'templates' to named templates")
    defaults = spec.get("defaults") or {}
    if not isinstance(defaults, dict):
        raise SlurmInputError(f"{path}: 'defaults' must map parameters to values, got {defaults!r:.60}")
    out = {}
    for name, entry in spec["templates"].items():
        if not isinstance(name, str) or not _NAME.fullmatch(name):
            raise SlurmInputError(
                f"{path}: template name {name!r:.60} must be letters, digits, '_', '.' or '-' (it names a script)"
            )
        if entry is not None and not isinstance(entry, dict):
            raise SlurmInputError(f"{path}: template {name!r} must map parameters to values, got {entry!r:.60}")
        values = {**defaults, **(entry or {})}
        unknown = set(map(str, values)) - set(PARAMETERS) - {"mode", "description"}
        if unknown:
            raise SlurmInputError(
                f"{path}: template {name!r} has unknown keys {sorted(unknown)}; known: {', '.join(PARAMETERS)}"
            )
        if "mode" not in values:
            raise SlurmInputError(f"{path}: template {name!r} needs a mode: {' or '.join(MODES)}")
        out[name] = SlurmParams(name=name, **values).checked()
    return out


def template(templates: dict[str, SlurmParams], name: str) -> SlurmParams:
    """The template called ``name`` (the MODE argument of ``lightyear-slurm``)."""
    if name not in templates:
        raise SlurmInputError(f"unknown mode {name!r}: choose one of {', '.join(templates)}")
    return templates[name]


def for_job(base: SlurmParams, sites: int, given: dict) -> SlurmParams:
    """``base`` sized for ``sites`` sites (a GPU each; a GPU deployment the nodes they need), ``given`` on top."""
    values = dataclasses.asdict(base)
    values["sites"] = sites
    if base.mode == "simulator" and base.gpus and "gpus" not in given:
        values["gpus"] = sites
    values.update({k: v for k, v in given.items() if v is not None})
    if base.mode == "deploy" and values["gpus"] and "nodes" not in given:
        values["nodes"] = math.ceil(sites / values["gpus"])
    return SlurmParams(**values).checked()
