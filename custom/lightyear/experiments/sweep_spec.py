"""A sweep description (YAML or JSON, e.g. ``app_configs/sweeps/digits_dynamic.yaml``; keys :data:`KEYS`, explained in
docs/jobs-and-settings.md, "Experiments") and its expansion into runs, one per combination of dataset, method,
scenario and seed, named ``<method>_<dataset>_<malfunction><k>_s<seed>``, ``..._<attack><k>[_full]_s<seed>`` or
``..._clean_s<seed>`` (a count of 0: one clean run). Attack runs are made only where the generator takes them
(:func:`lightyear.jobs.attacks.takes_attack`); an attack left with no run is refused.
"""

from __future__ import annotations

import itertools
import os
import re
from dataclasses import dataclass, field

from lightyear.algorithms.attacks.catalogue import names as attack_names
from lightyear.algorithms.attacks.updates import FULL, KNOWLEDGE, PARTIAL
from lightyear.algorithms.malfunctions import KINDS, NONE
from lightyear.checks import raising
from lightyear.cli import UserError, read_text
from lightyear.documents import plain_document
from lightyear.jobs import generate
from lightyear.jobs.attacks import PREFIX, takes_attack, uses_knowledge, why_not
from lightyear.jobs.attacks import known_params as attack_settings
from lightyear.jobs.settings import parse_unset

ALL = "all"
CLEAN = "clean"
AXES = ("datasets", "methods", "malfunctions", "faulty", "attacks", "attackers", "knowledge", "seeds")
KEYS = ("name", *AXES, "set", "unset")
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
    attack: str = NONE  # an attack run: its kind, number of attackers and knowledge
    attackers: int = 0
    knowledge: str | None = None
    unset: list = field(default_factory=list)  # lightyear-jobs --unset: dropped before the overrides apply

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
    attacks: list[str] = field(default_factory=list)
    attackers: list[int] = field(default_factory=list)
    knowledge: list[str] = field(default_factory=list)
    unset: list[str] = field(default_factory=list)

    def as_dict(self) -> dict:
        """The description as :data:`KEYS` (``set``: the overrides), then the runs."""
        fields = {key: getattr(self, "overrides" if key == "set" else key) for key in KEYS}
        return {**fields, "runs": [r.as_dict() for r in self.runs]}


def run_name(
    method: str,
    dataset: str,
    malfunction: str,
    faulty: int,
    seed: int,
    attack: str = NONE,
    attackers: int = 0,
    knowledge: str | None = None,
) -> str:
    """A run's name (see the module doc)."""
    if attack != NONE and attackers:
        scenario = f"{attack}{attackers}" + ("_full" if knowledge == FULL else "")
    else:
        scenario = CLEAN if malfunction == NONE or faulty == 0 else f"{malfunction}{faulty}"
    return f"{method}_{dataset}_{scenario}_s{seed}"


def read_spec(path: str) -> dict:
    """The raw description in a ``.yaml``/``.yml`` or ``.json`` file."""
    if not os.path.isfile(path):
        raise SpecError(
            f"no sweep description at {path}: give a .yaml or .json file (e.g. app_configs/sweeps/digits_dynamic.yaml)"
        )
    with raising(SpecError):
        text = read_text(path, "the sweep description", "give a .yaml or .json sweep description")
        raw = plain_document(text, path, yaml_format=path.endswith((".yaml", ".yml")))
    if not isinstance(raw, dict):
        raise SpecError(f"{path} must hold a mapping with the keys {', '.join(KEYS)}")
    return raw


def _as_list(raw: dict, key: str, default=None) -> list:
    value = raw.get(key, default)
    if value is None:
        raise SpecError(f"the sweep description needs '{key}'")
    items = value if isinstance(value, list) else [value]
    if not items:
        raise SpecError(f"'{key}' is empty: list at least one value")
    if nested := [i for i in items if isinstance(i, (list, dict))]:
        raise SpecError(f"'{key}' must list plain values, e.g. {key}: [a, b]; got {nested[0]!r:.60}")
    return list(dict.fromkeys(items))  # drop repeats, keep the order


def _choose(raw: dict, key: str, known: list[str], where: str) -> list[str]:
    items = _as_list(raw, key)
    if items == [ALL]:
        return list(known)
    if unknown := [str(i) for i in items if i not in known]:
        raise SpecError(f"unknown {key} {', '.join(unknown)}: {where} has {', '.join(known)} (or write '{key}: all')")
    return items


def _ints(raw: dict, key: str, default=None, minimum: int = 0, maximum: int | None = None) -> list[int]:
    items = _as_list(raw, key, default)
    top = float("inf") if maximum is None else maximum
    if bad := [f"{i!r:.40}" for i in items if isinstance(i, bool) or not isinstance(i, int) or not minimum <= i <= top]:
        bound = f"in {minimum}..{maximum}" if maximum is not None else f">= {minimum}"
        raise SpecError(f"'{key}' must be whole numbers {bound}; got {', '.join(bad)}")
    return items


def _site_count(configs: str, dataset: str, overrides: dict, unset: list[str]) -> tuple[int, int]:
    settings = {k: v for k, v in generate.dataset_settings_of(configs, dataset).items() if k not in unset}
    settings.update(overrides)
    sites = settings.get("sites")
    if not isinstance(sites, list) or not sites:
        raise SpecError(f"'set: sites' must be a non-empty list of site names (dataset {dataset})")
    return len(sites), settings.get("rounds")


def _attack_axis(raw: dict) -> tuple[list[str], list[int], list[str]]:
    """(attacks, attacker counts, knowledge levels) of the description; empty without ``attackers``."""
    if "attackers" not in raw:
        if "attacks" in raw or "knowledge" in raw:
            raise SpecError(
                "'attacks' and 'knowledge' need 'attackers': the numbers of attacking sites, e.g. attackers: [0, 3]"
            )
        return [], [], []
    attackers = sorted(_ints(raw, "attackers"))
    knowledge = _as_list(raw, "knowledge", default=[PARTIAL])
    if bad := [str(k) for k in knowledge if k not in KNOWLEDGE]:
        raise SpecError(f"unknown knowledge {', '.join(bad)}; choose from {', '.join(KNOWLEDGE)}")
    named = _as_list(raw, "attacks") if "attacks" in raw or any(attackers) else []
    named = list(attack_names()) if named == [ALL] else named
    if bad := [str(a) for a in named if a not in attack_names()]:
        raise SpecError(
            f"unknown attacks {', '.join(bad)}; choose from {', '.join(attack_names())} (or write 'attacks: all')"
        )
    return (named if any(attackers) else []), attackers, knowledge


def _attack_overrides(overrides: dict, attack: str, method: str) -> dict:
    """The run's settings: the ``attack_<param>`` settings only where the run's job takes them."""
    takes = attack_settings(attack, method)
    return {k: v for k, v in overrides.items() if not k.startswith(PREFIX) or k in takes}


def _scenarios(method: str, malfunctions, faulty, attacks, attackers, knowledge) -> list[tuple]:
    """(malfunction, faulty, attack, attackers, knowledge) of every run of ``method``; clean first."""
    out = [(NONE, 0, NONE, 0, None)] if 0 in faulty or 0 in attackers else []
    out += [(kind, k, NONE, 0, None) for kind in malfunctions for k in faulty if k > 0]
    for attack in attacks:
        levels = knowledge if attack in uses_knowledge() else [PARTIAL]
        out += [
            (NONE, 0, attack, k, level)
            for k in attackers
            if k > 0
            for level in levels
            if takes_attack(method, attack, level, k)
        ]
    return out


def expand(raw: dict, configs: str, default_name: str = "sweep") -> SweepSpec:
    """Validate a raw description and list its runs (datasets, methods, scenarios, seeds nested in that order)."""
    if unknown := sorted(set(raw) - set(KEYS)):
        raise SpecError(f"unknown key(s) {', '.join(unknown)} in the sweep description; allowed: {', '.join(KEYS)}")
    name = str(raw.get("name") or default_name)
    if not NAME_PATTERN.fullmatch(name):
        raise SpecError(f"sweep name {name!r} must be letters, digits, '_', '-' or '.'")
    datasets = _choose(raw, "datasets", generate.datasets(configs), "app_configs/datasets")
    methods = _choose(raw, "methods", generate.methods(), "app_configs")
    attacks, attackers, knowledge = _attack_axis(raw)
    faulty = sorted(_ints(raw, "faulty")) if raw.get("faulty") is not None or not attackers else []
    seeds = _ints(raw, "seeds", default=[generate.DEFAULT_SEED], maximum=generate.SEED_MAX)
    overrides = raw.get("set") or {}
    if not isinstance(overrides, dict):
        raise SpecError("'set' must be a mapping of dataset settings, e.g. set: {rounds: 3}")
    if "seed" in overrides:
        raise SpecError("set the seed with 'seeds: [...]', not 'set: {seed: ...}'")
    unset = raw.get("unset") or []
    if not isinstance(unset, list):
        raise SpecError("'unset' must be a list of settings or KEY.SUB keys, e.g. unset: [topology_args.degree]")
    try:
        unset = parse_unset(unset)
    except UserError as exc:
        raise SpecError(f"'unset': {exc}") from None
    unused = sorted(k for k in overrides if k.startswith(PREFIX) and not any(k in attack_settings(a) for a in attacks))
    if unused:
        raise SpecError(
            f"'set: {unused[0]}' is a setting of no attack of the sweep ({', '.join(attacks) or 'none'}): "
            "leave it out, or list an attack that takes it"
        )
    kinds = [k for k in KINDS if k != NONE]
    malfunctions: list[str] = []
    if any(faulty) or "malfunctions" in raw:  # checked even where no count uses them: a typo is a typo
        malfunctions = _as_list(raw, "malfunctions")
        if NONE in malfunctions:
            raise SpecError("'none' is not a malfunction: put 0 in 'faulty' for clean runs")
        if bad := [str(m) for m in malfunctions if m not in kinds]:
            raise SpecError(f"unknown malfunctions {', '.join(bad)}; choose from {', '.join(kinds)}")
        malfunctions = malfunctions if any(faulty) else []
    runs = []
    for dataset in datasets:
        n_sites, rounds = _site_count(configs, dataset, overrides, unset)
        for key, counts in (("faulty", faulty), ("attackers", attackers)):
            if too_many := [k for k in counts if k >= n_sites]:
                raise SpecError(
                    f"{key} count {too_many[0]} leaves no benign site among the {n_sites} sites of {dataset}: "
                    f"use at most {n_sites - 1} (or list more sites with 'set: {{sites: [...]}}')"
                )
        for method in methods:
            scenarios = _scenarios(method, malfunctions, faulty, attacks, attackers, knowledge)
            for (kind, k, attack, m, level), seed in itertools.product(scenarios, seeds):
                run = run_name(method, dataset, kind, k, seed, attack, m, level)
                settings = _attack_overrides(overrides, attack, method)
                runs.append(
                    Run(run, method, dataset, kind, k, seed, n_sites, rounds, settings, attack, m, level, list(unset))
                )
    if idle := [a for a in attacks if not any(r.attack == a for r in runs)]:
        levels = knowledge if idle[0] in uses_knowledge() else [PARTIAL]
        counts = [k for k in attackers if k > 0]
        why = dict.fromkeys(why_not(m, idle[0], level, k) for m in methods for level in levels for k in counts)
        raise SpecError(f"attack {idle[0]} has no run: {'; '.join(w for w in why if w)}")
    return SweepSpec(
        name, datasets, methods, malfunctions, faulty, seeds, {**overrides}, runs, attacks, attackers, knowledge, unset
    )
