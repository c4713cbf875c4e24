"""A sweep description (YAML or JSON) and its expansion into named runs.

Example (``app_configs/sweeps/digits_dynamic.yaml``)::

    name: digits_dynamic
    datasets: [digits]
    methods: all               # every folder of app_configs/ holding a method.json, or a list
    malfunctions: [dynamic]    # any of ana, ana_relative, sfa, random, dynamic
    faulty: [0, 1, 3, 5, 7]    # numbers of malfunctioning sites (the last K sites); 0 = clean
    seeds: [0]
    set: {rounds: 12}          # dataset settings overridden in every run (as lightyear-jobs --set)

Every combination of dataset, method, malfunction, faulty count and seed is one run, named
``<method>_<dataset>_<malfunction><k>_s<seed>``. A count of 0 is one clean run per dataset, method
and seed, named ``<method>_<dataset>_clean_s<seed>``, whatever the malfunctions.
"""

from __future__ import annotations

import json
import os
import re
from dataclasses import dataclass, field

from lightyear.algorithms.malfunctions import KINDS, NONE
from lightyear.cli import UserError, read_text, yaml_problem
from lightyear.jobs import generate

ALL = "all"
CLEAN = "clean"
KEYS = ("name", "datasets", "methods", "malfunctions", "faulty", "seeds", "set")
NAME_PATTERN = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]*$")


class SpecError(UserError):
    """A sweep description that cannot be expanded; the message says what to change."""


@dataclass
class Run:
    """One simulator run of a sweep."""

    name: str
    method: str
    dataset: str
    malfunction: str  # "none" for a clean run
    faulty: int
    seed: int
    sites: int  # number of sites: the simulator's -t
    rounds: int
    overrides: dict = field(default_factory=dict)

    def as_dict(self) -> dict:
        return dict(self.__dict__)


@dataclass
class SweepSpec:
    """A validated sweep description with its runs in a fixed order."""

    name: str
    datasets: list[str]
    methods: list[str]
    malfunctions: list[str]
    faulty: list[int]
    seeds: list[int]
    overrides: dict
    runs: list[Run]

    def as_dict(self) -> dict:
        return {
            "name": self.name, "datasets": self.datasets, "methods": self.methods,
            "malfunctions": self.malfunctions, "faulty": self.faulty, "seeds": self.seeds,
            "set": self.overrides, "runs": [r.as_dict() for r in self.runs],
        }


def run_name(method: str, dataset: str, malfunction: str, faulty: int, seed: int) -> str:
    """``<method>_<dataset>_<malfunction><k>_s<seed>``, or ``..._clean_s<seed>`` without malfunction."""
    scenario = CLEAN if malfunction == NONE or faulty == 0 else f"{malfunction}{faulty}"
    return f"{method}_{dataset}_{scenario}_s{seed}"


def read_spec(path: str) -> dict:
    """The raw description in a ``.yaml``/``.yml`` or ``.json`` file."""
    if not os.path.isfile(path):
        raise SpecError(f"no sweep description at {path}: give a .yaml or .json file (e.g. app_configs/sweeps/digits_dynamic.yaml)")
    try:
        text = read_text(path, "the sweep description", "give a .yaml or .json sweep description")
    except UserError as exc:
        raise SpecError(str(exc)) from None
    if path.endswith((".yaml", ".yml")):
        import yaml

        try:
            raw = yaml.safe_load(text)
        except yaml.YAMLError as exc:
            raise SpecError(f"{path} is not valid YAML: {yaml_problem(exc)}") from None
    else:
        try:
            raw = json.loads(text)
        except json.JSONDecodeError as exc:
            raise SpecError(f"{path} is not valid JSON: {exc.msg} at line {exc.lineno}, column {exc.colno}") from None
    if not isinstance(raw, dict):
        raise SpecError(f"{path} must hold a mapping with the keys {', '.join(KEYS)}")
    return raw


def load_spec(path: str, configs: str) -> SweepSpec:
    """Read, validate and expand the description in ``path`` against ``configs`` (app_configs/)."""
    default_name = os.path.splitext(os.path.basename(path))[0]
    return expand(read_spec(path), configs, default_name)


def _as_list(raw: dict, key: str, default=None) -> list:
    value = raw.get(key, default)
    if value is None:
        raise SpecError(f"the sweep description needs '{key}'")
    items = value if isinstance(value, list) else [value]
    if not items:
        raise SpecError(f"'{key}' is empty: list at least one value")
    nested = [i for i in items if isinstance(i, (list, dict))]
    if nested:
        raise SpecError(f"'{key}' must list plain values, e.g. {key}: [a, b]; got {nested[0]!r:.60}")
    return list(dict.fromkeys(items))  # drop repeats, keep the order


def _choose(raw: dict, key: str, known: list[str], where: str) -> list[str]:
    items = _as_list(raw, key)
    if items == [ALL]:
        return list(known)
    unknown = [str(i) for i in items if i not in known]
    if unknown:
        raise SpecError(f"unknown {key} {', '.join(unknown)}: {where} has {', '.join(known)} (or write '{key}: all')")
    return items


def _ints(raw: dict, key: str, default=None, minimum: int = 0) -> list[int]:
    items = _as_list(raw, key, default)
    bad = [repr(i) for i in items if isinstance(i, bool) or not isinstance(i, int) or i < minimum]
    if bad:
        raise SpecError(f"'{key}' must be whole numbers >= {minimum}; got {', '.join(bad)}")
    return items


def _site_count(configs: str, dataset: str, overrides: dict) -> tuple[int, int]:
    settings = generate.load_json(os.path.join(configs, "datasets", f"{dataset}.json"))
    settings.update(overrides)
    sites = settings.get("sites")
    if not isinstance(sites, list) or not sites:
        raise SpecError(f"'set: sites' must be a non-empty list of site names (dataset {dataset})")
    return len(sites), settings.get("rounds")


def expand(raw: dict, configs: str, default_name: str = "sweep") -> SweepSpec:
    """Validate a raw description and list its runs (datasets, methods, scenarios, seeds nested in that order)."""
    unknown = sorted(set(raw) - set(KEYS))
    if unknown:
        raise SpecError(f"unknown key(s) {', '.join(unknown)} in the sweep description; allowed: {', '.join(KEYS)}")
    name = str(raw.get("name") or default_name)
    if not NAME_PATTERN.fullmatch(name):
        raise SpecError(f"sweep name {name!r} must be letters, digits, '_', '-' or '.'")
    datasets = _choose(raw, "datasets", generate.datasets(configs), "app_configs/datasets")
    methods = _choose(raw, "methods", generate.methods(configs), "app_configs")
    faulty = sorted(_ints(raw, "faulty"))
    seeds = _ints(raw, "seeds", default=[generate.DEFAULT_SEED])
    overrides = raw.get("set") or {}
    if not isinstance(overrides, dict):
        raise SpecError("'set' must be a mapping of dataset settings, e.g. set: {rounds: 3}")
    if "seed" in overrides:
        raise SpecError("set the seed with 'seeds: [...]', not 'set: {seed: ...}'")
    kinds = [k for k in KINDS if k != NONE]
    malfunctions: list[str] = []
    if any(faulty):
        malfunctions = _as_list(raw, "malfunctions")
        if NONE in malfunctions:
            raise SpecError("'none' is not a malfunction: put 0 in 'faulty' for clean runs")
        bad = [str(m) for m in malfunctions if m not in kinds]
        if bad:
            raise SpecError(f"unknown malfunctions {', '.join(bad)}; choose from {', '.join(kinds)}")
    runs = []
    for dataset in datasets:
        n_sites, rounds = _site_count(configs, dataset, overrides)
        too_many = [k for k in faulty if k >= n_sites]
        if too_many:
            raise SpecError(
                f"faulty count {too_many[0]} leaves no benign site among the {n_sites} sites of {dataset}: "
                f"use at most {n_sites - 1} (or list more sites with 'set: {{sites: [...]}}')"
            )
        scenarios = [(NONE, 0)] if 0 in faulty else []
        scenarios += [(kind, k) for kind in malfunctions for k in faulty if k > 0]
        for method in methods:
            for kind, k in scenarios:
                for seed in seeds:
                    runs.append(Run(run_name(method, dataset, kind, k, seed), method, dataset, kind, k, seed, n_sites, rounds, dict(overrides)))
    return SweepSpec(name, datasets, methods, malfunctions, faulty, seeds, dict(overrides), runs)
