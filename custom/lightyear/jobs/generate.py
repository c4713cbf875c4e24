"""Write FLARE job folders from ``app_configs/``: one method's app configuration combined with
one dataset's settings (``app_configs/datasets/<dataset>.json``).

``app_configs/<method>/config_fed_server.json`` and ``config_fed_client.json`` are templates:
a string value ``"${name}"`` is replaced by the job's setting ``name`` with its JSON type, and an
argument whose setting no layer gives is left out (the constructor's default applies).
``method.json`` says whether the method is peer-to-peer (``p2p``) or ``star`` and may give the
method's settings (``"defaults"``, and ``"datasets"`` for one dataset's values). Where each
setting comes from, and how a job is checked by building every component of it as FLARE will:
:mod:`lightyear.jobs.settings`.

With ``--malfunction KIND --faulty K`` the last K sites get a second app, ``app_faulty``, whose
client configuration adds a :class:`~lightyear.flare.malfunction_filter.MalfunctionFilter`:
called by the executor on what it sends (p2p) or applied as the ``train`` task's result filter
(star).

Usage::

    lightyear-jobs                      # regenerate every committed job under jobs/
    lightyear-jobs --check              # exit 1 if a committed job differs from what would be written
    lightyear-jobs --method lightyear --dataset digits --malfunction dynamic --faulty 3 --out /tmp/jobs
"""

from __future__ import annotations

import argparse
import copy
import filecmp
import json
import os
import shutil
import sys
import tempfile

from lightyear.algorithms.malfunctions import KINDS, NONE
from lightyear.flare import analytics
from lightyear.flare.component_policy import with_refusal_fix
from lightyear.jobs.settings import (
    MALFUNCTION_KEYS,
    build_components,
    check_override_keys,
    check_site_names,
    check_site_resources,
    constructor_default,
    fill,
    known_settings,
    layered_settings,
    resource_spec,
    with_direct_arguments,
)
from lightyear.p2p.topology import build_graph, check_graph, check_topology_args

DEFAULT_SEED = 0


def repo_root() -> str:
    """The folder holding ``app_configs/``: the current directory or one of its parents."""
    here = os.path.abspath(os.getcwd())
    while True:
        if os.path.isdir(os.path.join(here, "app_configs")):
            return here
        parent = os.path.dirname(here)
        if parent == here:
            raise FileNotFoundError("no app_configs/ folder here or above: run from the repository (or pass --configs)")
        here = parent


def load_json(path: str) -> dict:
    with open(path) as f:
        return json.load(f)


def methods(configs: str) -> list[str]:
    return sorted(d for d in os.listdir(configs) if os.path.isfile(os.path.join(configs, d, "method.json")))


def datasets(configs: str) -> list[str]:
    folder = os.path.join(configs, "datasets")
    return sorted(f[:-5] for f in os.listdir(folder) if f.endswith(".json"))


def malfunction_component(settings: dict, kind: str, seed: int) -> dict:
    """The faulty sites' filter; its settings a job does not give keep the filter's defaults."""
    args = {"kind": kind}
    args.update({arg: settings[key] for key, arg in MALFUNCTION_KEYS.items() if key in settings})
    args.update(seed=seed, model=settings["model"], model_args=settings.get("model_args", {}), num_classes=settings["num_classes"])
    args["in_channels"] = settings.get("in_channels", 1)
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


def check_settings(settings: dict, topology: str) -> None:
    """The checks no single component makes: what the dataset file must give, the sites, the
    resources every site asks for and (peer-to-peer) the graph over the sites."""
    for key in ("dataset", "model", "sites", "rounds"):
        if key not in settings:
            raise ValueError(f"the dataset settings lack {key!r}")
    check_site_names(settings["sites"], minimum=2 if topology == "p2p" else 1)
    check_site_resources(settings.get("site_resource_spec"))
    if topology == "p2p":
        check_topology_settings(settings)


def check_topology_settings(settings: dict) -> None:
    """Refuse a topology that cannot be built over the job's sites, before any site starts."""
    controller = "lightyear.p2p.controller.P2PController"
    topology = settings.get("topology", constructor_default(controller, "topology"))
    args = settings.get("topology_args") or {}
    if not isinstance(args, dict):
        raise ValueError(f"topology_args must be a JSON object, got {args!r}")
    check_topology_args(topology, args)
    graph = build_graph(settings["sites"], topology, seed=settings["seed"], **args)
    if topology != "none":
        check_graph(graph, settings["sites"])


def job_name(method: str, dataset: str, malfunction: str = NONE, faulty: int = 0) -> str:
    name = f"{method}_{dataset}"
    return name if malfunction == NONE or faulty == 0 else f"{name}_{malfunction}{faulty}"


def build_job(configs: str, method: str, dataset: str, malfunction: str = NONE, faulty: int = 0, seed: int = DEFAULT_SEED, overrides: dict | None = None) -> tuple[str, dict]:
    """Return (job name, {relative path: JSON object}) for one job folder."""
    if method not in methods(configs):
        raise ValueError(f"unknown method {method!r}; app_configs has {', '.join(methods(configs))}")
    if dataset not in datasets(configs):
        raise ValueError(f"unknown dataset {dataset!r}; app_configs/datasets has {', '.join(datasets(configs))}")
    if malfunction not in KINDS:
        raise ValueError(f"unknown malfunction {malfunction!r}; choose one of {', '.join(KINDS)}")
    meta_method = load_json(os.path.join(configs, method, "method.json"))
    topology = meta_method["topology"]
    server_template = load_json(os.path.join(configs, method, "config_fed_server.json"))
    client_template = load_json(os.path.join(configs, method, "config_fed_client.json"))
    check_override_keys(overrides or {}, known_settings([server_template, client_template], malfunction != NONE), method, dataset)
    server_template, client_template = with_direct_arguments([server_template, client_template], overrides or {})
    settings = layered_settings(meta_method, dataset, load_json(os.path.join(configs, "datasets", f"{dataset}.json")), overrides)
    settings["seed"] = seed
    check_settings(settings, topology)
    sites = list(settings["sites"])
    if not 0 <= faulty <= len(sites):
        raise ValueError(f"--faulty must be between 0 and {len(sites)} (the sites of {dataset}), got {faulty}")
    if faulty and malfunction == NONE:
        raise ValueError("--faulty needs --malfunction (ana, ana_relative, sfa, random or dynamic)")
    server = fill(server_template, settings)
    client = fill(client_template, settings)
    if settings.get("tensorboard"):
        client.setdefault("components", []).extend(analytics.client_components())
        server.setdefault("components", []).extend(analytics.server_components())
    name = job_name(method, dataset, malfunction, faulty)
    faulty_sites = sites[len(sites) - faulty :] if faulty else []
    benign = [s for s in sites if s not in faulty_sites]
    deploy = {"app": ["server"] + benign}
    server, client = with_refusal_fix(server), with_refusal_fix(client)
    files = {
        "app/config/config_fed_server.json": server,
        "app/config/config_fed_client.json": client,
    }
    if faulty_sites:
        deploy["app_faulty"] = faulty_sites
        component = malfunction_component(settings, malfunction, seed)
        files["app_faulty/config/config_fed_client.json"] = with_refusal_fix(faulty_client_config(client, topology, component))
    build_components(list(files.values()), len(sites))
    files["meta.json"] = {
        "name": name,
        "resource_spec": resource_spec(sites, settings.get("site_resource_spec")),
        "min_clients": len(sites),
        "deploy_map": deploy,
        "lightyear": {
            "method": method,
            "dataset": dataset,
            "topology": topology,
            "malfunction": malfunction,
            "faulty_sites": faulty_sites,
            "seed": seed,
        },
    }
    return name, files


def write_job(files: dict, folder: str) -> None:
    if os.path.isdir(folder):
        shutil.rmtree(folder)
    for rel, obj in files.items():
        path = os.path.join(folder, rel)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "w") as f:
            json.dump(obj, f, indent=2)
            f.write("\n")


def committed_jobs(configs: str) -> list[tuple[str, str]]:
    """Every (method, dataset) pair: the job folders kept under ``jobs/``."""
    return [(m, d) for m in methods(configs) for d in datasets(configs)]


def write_committed(configs: str, out: str) -> list[str]:
    names = []
    for method, dataset in committed_jobs(configs):
        name, files = build_job(configs, method, dataset)
        write_job(files, os.path.join(out, name))
        names.append(name)
    return names


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


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description="Generate FLARE job folders from app_configs/.")
    parser.add_argument("--configs", help="the app_configs folder (default: ./app_configs of the repository)")
    parser.add_argument("--out", help="where job folders go (default: the repository's jobs/)")
    parser.add_argument("--method", help="one method (a folder of app_configs); default: every committed job")
    parser.add_argument("--dataset", help="one dataset (app_configs/datasets/<name>.json)")
    parser.add_argument("--malfunction", default=NONE, help=f"malfunction of the faulty sites: {', '.join(KINDS)}")
    parser.add_argument("--faulty", type=int, default=0, help="number of faulty sites (the last K sites)")
    parser.add_argument("--seed", type=int, default=DEFAULT_SEED, help="job seed")
    parser.add_argument("--set", action="append", default=[], metavar="KEY=JSON", help="override a dataset setting, e.g. --set rounds=3")
    parser.add_argument("--check", action="store_true", help="only compare the committed jobs with the generator's output")
    args = parser.parse_args(argv)
    root = repo_root() if not (args.configs and args.out) else None
    configs = args.configs or os.path.join(root, "app_configs")
    out = args.out or os.path.join(root, "jobs")
    if args.check:
        problems = diff_committed(configs, out)
        for p in problems:
            print(p)
        print("committed jobs match the generator" if not problems else f"{len(problems)} differences: run lightyear-jobs")
        return 1 if problems else 0
    if args.method or args.dataset:
        if not (args.method and args.dataset):
            parser.error("--method and --dataset go together")
        overrides = {}
        for item in args.set:
            key, _, value = item.partition("=")
            try:
                overrides[key] = json.loads(value)
            except json.JSONDecodeError:
                overrides[key] = value
        try:
            name, files = build_job(configs, args.method, args.dataset, args.malfunction, args.faulty, args.seed, overrides)
        except (ValueError, KeyError) as exc:
            parser.error(str(exc))
        write_job(files, os.path.join(out, name))
        print(os.path.join(out, name))
        return 0
    for name in write_committed(configs, out):
        print(os.path.join(out, name))
    return 0


if __name__ == "__main__":
    sys.exit(main())
