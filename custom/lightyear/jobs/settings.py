"""A job's settings: where each comes from, which ones a job takes, and how they are checked. The layers, later
ones winning: 1. the generator's (:data:`GENERATOR_DEFAULTS`); 2. the method's ``defaults``
(:class:`~lightyear.flare.declarations.Method`); 3. the dataset's (``app_configs/datasets/<dataset>.json``); 4. the
method's values for the dataset's task (``tasks[<task>]``), then for that dataset (``datasets.<dataset>``); 5. the
user's ``--unset KEY[.SUB]`` (:func:`parse_unset`: drop a setting, or one key of a dict setting, that the layers
give), then ``--set KEY=VALUE`` (:func:`parse_set`; a dict setting keeps the keys not given). A setting no layer gives
is left out, so the constructor's default (its one place) applies. Every toolkit component of a job is constructed
as FLARE will (:func:`build_components`), so a bad setting is refused in the component's own words.
"""

from __future__ import annotations

import copy
import difflib
import importlib
import inspect
import json
import re

from lightyear.checks import int_in, mapping, raising, string_list
from lightyear.cli import UserError
from lightyear.jobs import registry


class SettingError(UserError):
    """A job setting that cannot work; the message names the setting and what is allowed."""


PLACEHOLDER_PREFIX = "${"

GENERATOR_DEFAULTS = {"tensorboard": True}
"""Settings only the generator reads, with their defaults."""

GENERATOR_KEYS = ("sites", "dataset", "model", "num_classes", "in_channels", "tensorboard", "site_resource_spec")
"""Settings every job takes beyond its templates' placeholders (read by the generator itself)."""

MALFUNCTION_KEYS = {"ana_scale": "scale", "ana_sigma": "sigma", "sfa_alpha": "alpha"}
"""Settings of the malfunction filter (a job with ``--malfunction``): setting -> filter argument."""

DICT_SETTINGS = ("train_args", "dataset_args", "model_args", "topology_args")
"""Settings whose ``--set`` value is merged key by key into the dataset's."""

DICT_EXAMPLES = {
    "train_args": '{"lr": 0.001, "local_epochs": 2}',
    "dataset_args": "{}",
    "model_args": "{}",
    "topology_args": '{"degree": 3}',
}
"""An example value of each dict setting, for the messages."""

JSON_SETTINGS = {
    **DICT_EXAMPLES,
    "sites": '["site-1", "site-2"]',
    "site_resource_spec": '{"num_of_gpus": 1, "mem_per_gpu_in_GiB": 2}',
}
"""Settings whose ``--set`` value must be JSON (never a bare string), with an example."""

RESERVED = {"seed": "the seed is set with --seed N"}
"""Keys ``--set`` and ``--unset`` do not take, with what to use instead."""


def parse_set(items: list[str]) -> dict:
    """``["KEY=VALUE", ...]`` of ``--set`` -> {KEY: value}: the value as JSON, else as a string, except where JSON is
    meant (:data:`JSON_SETTINGS`, or a value starting with ``{``, ``[`` or ``"``: its error is reported)."""
    overrides = {}
    for item in items:
        key, sep, text = item.partition("=")
        if not sep or not key.strip():
            raise SettingError(f"--set takes KEY=VALUE (a JSON value), got {item!r}: e.g. --set rounds=3")
        key = key.strip()
        if key in overrides:
            raise SettingError(
                f"--set {key} is given twice: give each setting once (for {', '.join(DICT_SETTINGS)} "
                "put every key in one JSON object)"
            )
        try:
            overrides[key] = json.loads(text)
        except json.JSONDecodeError as exc:
            if key in JSON_SETTINGS or text.lstrip()[:1] in ("{", "[", '"'):
                example = JSON_SETTINGS.get(key, "<a JSON value>")
                raise SettingError(
                    f"{key} is not valid JSON: {exc.msg} at column {exc.colno} of {text!r:.80}; "
                    f"quote the whole argument for the shell, e.g. --set '{key}={example}'"
                ) from None
            overrides[key] = text
        except ValueError:  # an integer of thousands of digits
            raise SettingError(f"--set {key}: a number of {len(text.strip())} characters is out of range") from None
    return overrides


def parse_unset(items: list[str] | None) -> list[str]:
    """``["KEY", "KEY.SUB", ...]`` of ``--unset``, checked: a setting, or one key of a dict setting
    (:data:`DICT_SETTINGS`), each given once (whether a layer gives it: :func:`unset_settings`)."""
    names: list[str] = []
    for item in items or []:
        name = item.strip() if isinstance(item, str) else item
        if not isinstance(name, str) or not re.fullmatch(r"[^.\s=]+(\.[^.\s=]+)?", name):
            raise SettingError(
                f"--unset takes KEY or KEY.SUB (a setting, or one key of {', '.join(DICT_SETTINGS)}), "
                f"got {item!r:.80}: e.g. --unset topology_args.degree"
            )
        key, _, sub = name.partition(".")
        if key in RESERVED:
            raise SettingError(f"--unset {key} is not a setting: {RESERVED[key]}")
        if sub and key not in DICT_SETTINGS:
            raise SettingError(
                f"--unset {name}: only the dict settings ({', '.join(DICT_SETTINGS)}) have keys to drop; "
                f"drop the whole setting with --unset {key}"
            )
        if name in names:
            raise SettingError(f"--unset {name} is given twice: give it once")
        names.append(name)
    return names


def unset_settings(settings: dict, unset: list[str]) -> dict:
    """A copy of ``settings`` without the ``--unset`` names; a name no layer gives is refused, naming what there is."""
    settings = dict(settings)
    for name in unset:
        key, _, sub = name.partition(".")
        if key not in settings:
            raise SettingError(
                f"--unset {key}: no layer of this job gives {key!r} (the generator's, the method's or the dataset's "
                "settings), so there is nothing to drop; leave it out"
            )
        if not sub:
            del settings[key]
            continue
        value = settings[key]
        if not isinstance(value, dict) or sub not in value:
            has = ", ".join(map(str, value)) if isinstance(value, dict) and value else "no keys"
            raise SettingError(
                f"--unset {name}: this job's {key} has no key {sub!r} (it has {has}), so there is nothing to drop"
            )
        settings[key] = {k: v for k, v in value.items() if k != sub}
    return settings


def check_dict_settings(settings: dict) -> None:
    """Refuse a dict setting (``train_args``...) that is not a JSON object (null: none given)."""
    for key, example in DICT_EXAMPLES.items():
        if settings.get(key) is not None:
            with raising(SettingError):
                mapping(key, settings[key], note=f"such as {example}: e.g. --set '{key}={example}'")


def is_placeholder(value) -> bool:
    return isinstance(value, str) and value.startswith(PLACEHOLDER_PREFIX) and value.endswith("}")


def placeholders(template) -> set[str]:
    if isinstance(template, (dict, list)):
        return set().union(*map(placeholders, template.values() if isinstance(template, dict) else template))
    return {template[2:-1]} if is_placeholder(template) else set()


def fill(template, values: dict):
    """A copy of ``template`` with every ``"${name}"`` replaced by ``values[name]``; a dict entry whose placeholder has
    no value is left out (the constructor's default applies), a placeholder elsewhere raises KeyError."""
    if isinstance(template, dict):
        return {k: fill(v, values) for k, v in template.items() if not (is_placeholder(v) and v[2:-1] not in values)}
    if isinstance(template, list):
        return [fill(v, values) for v in template]
    if is_placeholder(template):
        name = template[2:-1]
        if name not in values:
            raise KeyError(f"template placeholder ${{{name}}} has no value in the job's settings")
        return copy.deepcopy(values[name])
    return template


LARGEST_INTEGER = 2**63 - 1
"""No setting takes a larger whole number (FLARE and NumPy keep them in 64 bits)."""


def check_value_range(key: str, value) -> None:
    """Refuse a whole number beyond 64 bits anywhere in a setting's value (``1e999`` is a float, inf)."""
    if isinstance(value, (dict, list)):
        for inner in value.values() if isinstance(value, dict) else value:
            check_value_range(key, inner)
    elif isinstance(value, int) and not isinstance(value, bool) and abs(value) > LARGEST_INTEGER:
        raise SettingError(
            f"{key}: the whole number {value:.3g} is out of range (at most {LARGEST_INTEGER} in magnitude)"
        )


def layered_settings(
    method_meta: dict, dataset: str, dataset_settings: dict, overrides: dict | None, unset: list[str] | None = None
) -> dict:
    """The job's settings from the five layers (module docstring)."""
    for key, value in (overrides or {}).items():
        check_value_range(key, value)
        if key in DICT_SETTINGS and value is None:
            raise SettingError(
                f"{key}=null would drop the dataset's {key}: to drop it, --unset {key} (one key: "
                f"--unset {key}.KEY); to change some of its keys, --set '{key}={DICT_EXAMPLES[key]}'"
            )
    settings = dict(GENERATOR_DEFAULTS)
    settings.update(method_meta.get("defaults", {}))
    settings.update(dataset_settings)
    settings.update(method_meta.get("tasks", {}).get(dataset_settings.get("task"), {}))
    settings.update(method_meta.get("datasets", {}).get(dataset, {}))
    settings = unset_settings(settings, parse_unset(unset))
    for key, value in (overrides or {}).items():
        if key in DICT_SETTINGS and isinstance(value, dict) and isinstance(settings.get(key), dict):
            settings[key] = {**settings[key], **value}
        else:
            settings[key] = value
    return settings


def constructor_arguments(cls) -> dict[str, object]:
    """Every keyword a class's constructor takes, up the bases while the constructors pass on ``**kwargs``."""
    found: dict[str, object] = {}
    for klass in cls.__mro__:
        init = vars(klass).get("__init__")
        if init is None or klass is object:
            continue
        params = inspect.signature(init).parameters
        for name, param in params.items():
            if name != "self" and param.kind in (param.POSITIONAL_OR_KEYWORD, param.KEYWORD_ONLY):
                found.setdefault(name, param.default)
        if not any(p.kind == p.VAR_KEYWORD for p in params.values()):
            break
    return found


NOT_SETTABLE = {"malfunction_id", "attack_id", "adversary_id", "flip_labels"}
"""Constructor arguments the generator wires itself (the malfunction filter, :mod:`lightyear.jobs.attacks`)."""


def direct_arguments(templates: list) -> dict[str, tuple[dict, str]]:
    """Constructor arguments no template sets, as setting -> (the one component taking it, the argument), in order;
    how a method's own settings reach its classes. A setting is the argument's name or the class's ``SETTING_NAMES``
    one (BALANCE's ``gamma``: ``balance_gamma``); one that two components take, or a placeholder, is not offered."""
    named = set().union(*(placeholders(t) for t in templates))
    owners: dict[str, list] = {}
    for template in templates:
        for component in toolkit_components(template):
            given = set(component.get("args", {}))
            cls = component_class(component["path"])
            names = getattr(cls, "SETTING_NAMES", {})
            for name in constructor_arguments(cls):
                if name not in given and name not in NOT_SETTABLE:
                    owners.setdefault(names.get(name, name), []).append((component, name))
    return {
        setting: found[0]
        for setting, found in owners.items()
        if len(found) == 1 and setting not in named and setting not in RESERVED
    }


def known_settings(templates: list, malfunction: bool) -> set[str]:
    """Every setting a job of these templates takes: placeholders, other constructor arguments, the generator's."""
    known = set().union(*(placeholders(t) for t in templates)) | set(GENERATOR_KEYS) | set(direct_arguments(templates))
    return known | set(MALFUNCTION_KEYS) if malfunction else known


def with_direct_arguments(templates: list, settings: dict) -> list:
    """Copies of the templates with each :func:`direct_arguments` argument whose setting ``settings`` gives written
    in as its setting's placeholder, for :func:`fill`."""
    templates = copy.deepcopy(templates)
    for setting, (component, argument) in direct_arguments(templates).items():
        if setting in settings:
            component.setdefault("args", {})[argument] = f"{PLACEHOLDER_PREFIX}{setting}}}"
    return templates


def check_override_keys(overrides: dict, known: set[str], method: str, dataset: str) -> None:
    """Refuse a ``--set`` key the job does not use, naming the nearest known one and the rest."""
    for key in overrides:
        if key in RESERVED:
            raise SettingError(f"--set {key}=... is not a setting: {RESERVED[key]}")
        if key not in known:
            near = difflib.get_close_matches(key, sorted(known), n=1)
            hint = f"did you mean {near[0]!r}? " if near else ""
            raise SettingError(
                f"--set {key}: the {method} job on {dataset} has no setting {key!r}; {hint}"
                f"its settings are {', '.join(sorted(set(known) - set(RESERVED)))}"
            )


def component_class(path: str):
    module, _, name = path.rpartition(".")
    return getattr(importlib.import_module(module), name)


def constructor_default(path: str, argument: str):
    return inspect.signature(component_class(path).__init__).parameters[argument].default


def toolkit_components(config, packages: tuple[str, ...] | None = None) -> list[dict]:
    """Every ``{"path": ..., "args": {...}}`` entry of a configuration, at any depth, whose class is in ``packages``
    (default: this toolkit's and the installed plugins')."""
    packages = packages or ("lightyear.", *registry.plugin_packages())
    found = []
    if isinstance(config, dict) and isinstance(config.get("path"), str) and config["path"].startswith(packages):
        found.append(config)
    for value in config.values() if isinstance(config, dict) else config if isinstance(config, list) else []:
        found.extend(toolkit_components(value, packages))
    return found


def build_components(configs: list, num_sites: int) -> None:
    """Construct every toolkit component of a job as FLARE will, so a bad setting is refused now in the component's
    words; a rule's ``check_sites`` refuses the job's number of sites."""
    seen = set()
    for config in configs:
        for component in toolkit_components(config):
            key = repr((component["path"], sorted(component.get("args", {}).items(), key=lambda kv: kv[0])))
            if key in seen:
                continue
            seen.add(key)
            built = component_class(component["path"])(**component.get("args", {}))
            problem = built.check_sites(num_sites) if hasattr(built, "check_sites") else ""
            if problem:
                raise SettingError(problem)


SITE_NAME = re.compile(r"^[A-Za-z0-9_-]{1,63}$")
"""A site name: FLARE's client name rule, at most 63 characters (it becomes a folder name: no paths)."""


def check_site_names(sites, minimum: int) -> list[str]:
    """Refuse a ``sites`` setting that is not a list of at least ``minimum`` distinct valid names."""
    with raising(SettingError):
        string_list("sites", sites, note='site names such as ["site-1", "site-2"]')
    if len(sites) < minimum:
        need = "two sites (a peer-to-peer job needs peers)" if minimum > 1 else "at least one site"
        raise SettingError(f"sites lists {len(sites)} site(s): a job needs {need}")
    for site in sites:
        if not SITE_NAME.fullmatch(site) or site == "server":
            raise SettingError(
                f"site name {site!r:.80} is not allowed: use 1-63 letters, digits, '-' or '_' (FLARE's client names; "
                "no paths), and not 'server'"
            )
    duplicated = sorted({s for s in sites if sites.count(s) > 1})
    if duplicated:
        raise SettingError(f"sites lists {duplicated} more than once: every site needs its own name")
    return sites


def check_site_resources(spec) -> None:
    """Refuse a ``site_resource_spec`` (``num_of_gpus``, ``mem_per_gpu_in_GiB``; null: nothing) FLARE's scheduler
    could not use, naming the problem."""
    if spec is None:
        return
    with raising(SettingError):
        mapping("site_resource_spec", spec, note='such as {"num_of_gpus": 1, "mem_per_gpu_in_GiB": 2}, or null')
        int_in("site_resource_spec.num_of_gpus", spec.get("num_of_gpus"), 0)
    mem = spec.get("mem_per_gpu_in_GiB", 0)
    if isinstance(mem, bool) or not isinstance(mem, (int, float)) or mem < 0:
        raise SettingError(f"site_resource_spec.mem_per_gpu_in_GiB must be a number >= 0 (GiB), got {mem!r}")
    from nvflare.utils.job_launcher_utils import validate_portable_resource_spec

    validate_portable_resource_spec({"site": spec})


def resource_spec(sites: list[str], spec: dict | None) -> dict:
    """meta.json's ``resource_spec``: ``spec`` for every site, nothing for the server (FLARE checks only sites)."""
    return {site: dict(spec) for site in sites} if spec else {}
