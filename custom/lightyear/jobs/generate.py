"""Write FLARE job folders: one method's declaration (:mod:`lightyear.jobs.registry`) combined with one dataset's
settings (``app_configs/datasets/<dataset>.json``; layers and checks: :mod:`lightyear.jobs.settings`), the method's
classes in its topology's shared templates (:mod:`lightyear.jobs.catalog`). ``--malfunction KIND --faulty K`` gives
the last K sites the app ``app_faulty`` with a :class:`~lightyear.flare.malfunction_filter.MalfunctionFilter` (called
by the p2p executor, a ``train`` result filter in the star topology); ``--attack`` makes them attackers
(:mod:`lightyear.jobs.attacks`). A folder is replaced only when the generator wrote it, unchanged (``--force``: any;
:mod:`lightyear.jobs.folders`); the committed ``jobs/`` (default ``--out``, ``--check``) belong to a checkout.
"""

from __future__ import annotations

import argparse
import copy
import filecmp
import os
import sys
import tempfile

from lightyear import configs as config_folders
from lightyear.algorithms.malfunctions import KINDS, NONE
from lightyear.checks import boolean, raising
from lightyear.cli import command, folder_name, output_folder
from lightyear.flare import analytics
from lightyear.flare.component_policy import with_refusal_fix
from lightyear.jobs import attacks, registry
from lightyear.jobs.catalog import committed_jobs, dataset_settings_of, datasets, method_templates, methods
from lightyear.jobs.folders import check_replaceable, write_job
from lightyear.jobs.settings import (
    MALFUNCTION_KEYS,
    SettingError,
    build_components,
    check_dict_settings,
    check_override_keys,
    check_site_names,
    check_site_resources,
    check_value_range,
    constructor_default,
    fill,
    known_settings,
    layered_settings,
    parse_set,
    parse_unset,
    resource_spec,
)
from lightyear.p2p.topology import TOPOLOGY_ARGS, build_graph, check_graph, check_topology_args

DEFAULT_SEED = 0


def malfunction_component(settings: dict, kind: str, seed: int) -> dict:
    """The faulty sites' filter; its settings a job does not give keep the filter's defaults."""
    args = {"kind": kind, **{arg: settings[key] for key, arg in MALFUNCTION_KEYS.items() if key in settings}}
    args.update(seed=seed, model=settings["model"], model_args=settings.get("model_args", {}))
    args.update(num_classes=settings["num_classes"], in_channels=settings.get("in_channels", 1))
    return {"id": "malfunction", "path": "lightyear.flare.malfunction_filter.MalfunctionFilter", "args": args}


def faulty_client_config(client: dict, topology: str, component: dict) -> dict:
    client = copy.deepcopy(client)
    client.setdefault("components", []).append(component)
    for entry in client["executors"]:
        entry["executor"].setdefault("args", {})["malfunction_id"] = component["id"]
    if topology == "star":
        filt = {k: v for k, v in component.items() if k != "id"}
        client.setdefault("task_result_filters", []).append({"tasks": ["train"], "filters": [filt]})
    return client


def check_settings(
    settings: dict, topology: str, layered: dict | None = None, overrides: dict | None = None
) -> tuple[str, dict] | None:
    """The checks no single component makes: the dataset file's keys, the sites, their resources and (peer-to-peer,
    :func:`check_topology_settings`) the graph, returned as (topology, site -> out-neighbours)."""
    for key in ("dataset", "model", "sites", "rounds"):
        if key not in settings:
            raise SettingError(f"the dataset settings lack {key!r}")
    check_dict_settings(settings)
    with raising(SettingError):
        boolean("tensorboard", settings.get("tensorboard"))
    check_site_names(settings["sites"], minimum=2 if topology == "p2p" else 1)
    check_site_resources(settings.get("site_resource_spec"))
    return check_topology_settings(settings, layered, overrides) if topology == "p2p" else None


def check_topology_settings(
    settings: dict, layered: dict | None = None, overrides: dict | None = None
) -> tuple[str, dict]:
    """Refuse a topology that cannot be built over the sites, and a ``topology_args`` key it does not take, with the
    fix: ``--unset`` for a key the layers give (``layered``), leaving it out of ``--set`` for one given there."""
    controller = "lightyear.p2p.server.controller.P2PController"
    topology = settings.get("topology", constructor_default(controller, "topology"))
    args = settings.get("topology_args") or {}
    known = isinstance(topology, str) and topology in TOPOLOGY_ARGS
    extra = sorted(set(args) - set(TOPOLOGY_ARGS[topology])) if known and isinstance(args, dict) else []
    if extra:
        base = (layered if layered is not None else settings).get("topology_args")
        given = (overrides or {}).get("topology_args")
        base, given = (d if isinstance(d, dict) else {} for d in (base, given))
        allowed = TOPOLOGY_ARGS[topology]
        takes = f"takes only {', '.join(allowed)}" if allowed else "takes no arguments"
        fixes = [f"--unset topology_args.{k}" for k in extra if k in base or k not in given]
        fixes += [f"leave {k} out of --set topology_args" for k in extra if k in given]
        raise SettingError(
            f"topology {topology!r} {takes}, and this job's topology_args give {', '.join(extra)}; "
            f"remove {'it' if len(extra) == 1 else 'them'}: {', '.join(fixes)}"
        )
    check_topology_args(topology, args)
    graph = build_graph(settings["sites"], topology, seed=settings["seed"], **args)
    if topology != "none":
        check_graph(graph, settings["sites"])
    return topology, graph


def job_name(method: str, dataset: str, malfunction: str = NONE, faulty: int = 0) -> str:
    name = f"{method}_{dataset}"
    return name if malfunction == NONE or faulty == 0 else f"{name}_{malfunction}{faulty}"


def build_job(
    configs: str,
    method: str,
    dataset: str,
    malfunction: str = NONE,
    faulty: int = 0,
    seed: int = DEFAULT_SEED,
    overrides: dict | None = None,
    attack: str = NONE,
    attackers: int = 0,
    knowledge: str | None = None,
    unset: list[str] | None = None,
) -> tuple[str, dict]:
    """(job name, {relative path: JSON object}) of one job folder (attack arguments: :mod:`lightyear.jobs.attacks`);
    a setting it cannot run with raises :class:`~lightyear.jobs.settings.SettingError` naming what refused it."""
    try:
        for key, value in (overrides or {}).items():
            check_value_range(key, value)
        params, overrides = attacks.split_params(overrides)
        attacks.check_request(attack, attackers, knowledge, malfunction, faulty, params)
        request = (attack, attackers, knowledge, params)
        return _build_job(configs, method, dataset, malfunction, faulty, seed, overrides, request, parse_unset(unset))
    except SettingError:
        raise
    except ValueError as exc:  # a component's constructor refusing one of its arguments, in its own words
        raise SettingError(str(exc)) from exc


def _build_job(
    configs: str,
    method: str,
    dataset: str,
    malfunction: str,
    faulty: int,
    seed: int,
    overrides: dict,
    attack: tuple,
    unset: list[str],
) -> tuple[str, dict]:
    if method not in methods():
        raise SettingError(f"unknown method {method!r}; choose one of {', '.join(methods())}")
    if dataset not in datasets(configs):
        raise SettingError(f"unknown dataset {dataset!r}; app_configs/datasets has {', '.join(datasets(configs))}")
    if malfunction not in KINDS:
        raise SettingError(f"unknown malfunction {malfunction!r}; choose one of {', '.join(KINDS)}")
    declared = registry.method(method)
    topology = declared.topology
    server_template, client_template = method_templates(declared)
    known = known_settings([server_template, client_template], malfunction != NONE) | attacks.known_params(attack[0])
    check_override_keys(overrides or {}, known, method, dataset)
    dataset_settings = dataset_settings_of(configs, dataset)
    if not isinstance(dataset_settings, dict):
        raise SettingError(
            f"{os.path.join(configs, 'datasets', dataset + '.json')} must hold a JSON object of settings"
        )
    settings = layered_settings(declared.layers, dataset, dataset_settings, overrides, unset)
    settings["seed"] = seed
    layered = layered_settings(declared.layers, dataset, dataset_settings, {}, unset)
    graph = check_settings(settings, topology, layered, overrides) or (None, None)
    spec = attacks.attack_spec(method, topology, settings, *attack, graph=graph[1], graph_topology=graph[0])
    sites = list(settings["sites"])
    if not 0 <= faulty <= len(sites):
        raise SettingError(f"--faulty must be between 0 and {len(sites)} (the sites of {dataset}), got {faulty}")
    if faulty and malfunction == NONE:
        raise SettingError("--faulty needs --malfunction (ana, ana_relative, sfa, random or dynamic)")
    server_template, client_template = method_templates(declared, settings, given=overrides or {})
    try:
        server, client = fill(server_template, settings), fill(client_template, settings)
    except KeyError as exc:
        raise SettingError(
            f"{exc.args[0]}: give it in app_configs/datasets/{dataset}.json, the method's declaration or with --set"
        ) from None
    if settings.get("tensorboard"):
        client.setdefault("components", []).extend(analytics.client_components())
        server.setdefault("components", []).extend(analytics.server_components(settings["rounds"]))
    name = job_name(method, dataset, malfunction, faulty) + (attacks.job_suffix(spec) if spec else "")
    faulty_sites = sites[len(sites) - faulty :] if faulty else []
    server, client = with_refusal_fix(server), with_refusal_fix(client)
    files = {attacks.SERVER: server, attacks.CLIENT: client}
    if faulty_sites:
        component = malfunction_component(settings, malfunction, seed)
        files[attacks.FAULTY_CLIENT] = with_refusal_fix(faulty_client_config(client, topology, component))
    build_components(list(files.values()), len(sites))
    app_faulty = faulty_sites
    if spec:  # wired after the build: AttackSpec checked the attack's settings; its components are not built here
        faulty_sites, app_faulty = list(spec.attackers), attacks.wire(files, topology, spec, seed, settings)
    deploy = {"app": ["server"] + [s for s in sites if s not in app_faulty]}
    if app_faulty:
        deploy["app_faulty"] = app_faulty
    job = {
        "method": method,
        "dataset": dataset,
        "topology": topology,
        "malfunction": malfunction,
        "faulty_sites": faulty_sites,
        "seed": seed,
        **(attacks.meta_fields(spec) if spec else {}),
    }
    meta = {"name": name, "resource_spec": resource_spec(sites, settings.get("site_resource_spec"))}
    files["meta.json"] = {**meta, "min_clients": len(sites), "deploy_map": deploy, "lightyear": job}
    return name, files


def write_committed(configs: str, out: str, force: bool = False) -> list[str]:
    """Write every committed job under ``out``, every folder checked before any is written."""
    jobs = [build_job(configs, method, dataset) for method, dataset in committed_jobs(configs)]
    for name, _files in jobs:
        check_replaceable(os.path.join(out, name), force)
    for name, files in jobs:
        write_job(files, os.path.join(out, name), force)
    return [name for name, _files in jobs]


def diff_committed(configs: str, jobs_dir: str) -> list[str]:
    """Paths where ``jobs_dir`` differs from what the generator writes (empty when identical)."""
    with tempfile.TemporaryDirectory() as tmp:
        write_committed(configs, tmp)
        problems = []
        expected = {os.path.relpath(os.path.join(d, f), tmp) for d, _, fs in os.walk(tmp) for f in fs}
        present = {
            os.path.relpath(os.path.join(d, f), jobs_dir)
            for d, _, fs in os.walk(jobs_dir)
            for f in fs
            if os.path.relpath(d, jobs_dir).split(os.sep)[0] in {n for n in os.listdir(tmp)}
        }
        for rel in sorted(expected | present):
            a, b = os.path.join(tmp, rel), os.path.join(jobs_dir, rel)
            if not os.path.exists(b):
                problems.append(f"missing {rel}")
            elif not os.path.exists(a):
                problems.append(f"unexpected {rel}")
            elif not filecmp.cmp(a, b, shallow=False):
                problems.append(f"differs {rel}")
        for name in os.listdir(tmp):
            if not os.path.isdir(os.path.join(jobs_dir, name)):
                problems.append(f"missing job {name}")
        return sorted(set(problems))


SEED_MAX = 2**32 - 1


def seed_arg(text: str) -> int:
    """``--seed``'s argparse ``type``: an integer in [0, 2**32 - 1] (what every random generator takes)."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
    if not 0 <= value <= SEED_MAX:
        raise argparse.ArgumentTypeError(f"{value} is outside 0..{SEED_MAX}")
    return value


def add_job_arguments(parser: argparse.ArgumentParser) -> None:
    """The arguments that choose one job, shared with :mod:`lightyear.jobs.job_api`."""
    parser.add_argument(
        "--configs", help="a folder of method and dataset configurations (default: the package's app_configs)"
    )
    parser.add_argument("--malfunction", default=NONE, help=f"malfunction of the faulty sites: {', '.join(KINDS)}")
    parser.add_argument("--faulty", type=int, default=0, help="number of faulty sites (the last K sites)")
    attacks.add_arguments(parser)
    parser.add_argument("--seed", type=seed_arg, default=DEFAULT_SEED, help="job seed (0 to 2**32 - 1)")
    parser.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="override a setting with a JSON value, e.g. --set rounds=3 --set 'train_args={\"lr\": 0.001}'; "
        "a dict setting (train_args, dataset_args, model_args, topology_args) changes only the keys given",
    )
    parser.add_argument(
        "--unset",
        action="append",
        default=[],
        metavar="KEY[.SUB]",
        help="drop a setting the dataset or method gives, or one key of a dict setting, before --set applies "
        "(the component's default then applies), e.g. --set topology=full --unset topology_args.degree; "
        "replace a whole dict: --unset topology_args --set 'topology_args={\"k\": 4}'",
    )


def job_keywords(args) -> dict:
    """:func:`build_job`'s keywords from the parsed :func:`add_job_arguments`."""
    keywords = {"malfunction": args.malfunction, "faulty": args.faulty, "seed": args.seed, "unset": args.unset}
    return {**keywords, "overrides": parse_set(args.set), **attacks.job_arguments(args)}


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="lightyear-jobs", description="Generate FLARE job folders from the method and dataset configurations."
    )
    add_job_arguments(parser)
    parser.add_argument("--out", help="where job folders go (default: jobs/ of the repository checkout, else ./jobs)")
    parser.add_argument(
        "--method",
        help="one method (the toolkit's or an installed plugin's: docs/extending.md); default: every committed job",
    )
    parser.add_argument("--dataset", help="one dataset (app_configs/datasets/<name>.json, or an installed plugin's)")
    parser.add_argument(
        "--force", action="store_true", help="replace an existing folder even if lightyear-jobs did not write it"
    )
    parser.add_argument(
        "--check", action="store_true", help="only compare the committed jobs with the generator's output"
    )
    return parser


def committed_jobs_folder(out: str | None, what: str) -> str:
    if out:
        return os.path.abspath(out)
    root = config_folders.require_checkout(
        what, "run it in the repository, or give --out (and --method and --dataset for one job)"
    )
    return os.path.join(root, "jobs")


@command("lightyear-jobs")
def main(argv=None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.out is not None:
        folder_name(args.out)
    configs = config_folders.checked_configs(args.configs)
    if args.check:
        out = committed_jobs_folder(args.out, "lightyear-jobs --check")
        problems = diff_committed(configs, out)
        for p in problems:
            print(p)
        print(
            "committed jobs match the generator" if not problems else f"{len(problems)} differences: run lightyear-jobs"
        )
        return 1 if problems else 0
    if args.method or args.dataset:
        if not (args.method and args.dataset):
            parser.error("--method and --dataset go together")
        name, files = build_job(configs, args.method, args.dataset, **job_keywords(args))
        root = config_folders.checkout_root()
        out = os.path.abspath(args.out) if args.out else os.path.join(root or os.getcwd(), "jobs")
        folder = os.path.join(out, name)
        check_replaceable(folder, args.force)
        write_job(files, os.path.join(output_folder(out), name), args.force)
        print(folder)
        return 0
    job_flags = args.set or args.unset or args.faulty or attacks.given(args)
    if job_flags or args.malfunction != NONE or args.seed != DEFAULT_SEED:
        parser.error(
            "--set, --unset, --malfunction, --faulty, --attack, --attackers, --knowledge and --seed need --method and "
            "--dataset (without them every committed job is rewritten)"
        )
    out = committed_jobs_folder(args.out, "lightyear-jobs without --method")
    for name in write_committed(configs, output_folder(out), args.force):
        print(os.path.join(out, name))
    return 0


if __name__ == "__main__":
    sys.exit(main())
