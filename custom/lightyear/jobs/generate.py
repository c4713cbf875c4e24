"""Write FLARE job folders from ``app_configs/``: one method's app configuration combined with
one dataset's settings (``app_configs/datasets/<dataset>.json``).

``app_configs/<method>/config_fed_server.json`` and ``config_fed_client.json`` are templates:
a string value ``"${name}"`` is replaced by the dataset setting ``name`` with its JSON type.
``method.json`` says whether the method is peer-to-peer (``p2p``) or ``star`` and may give the
method's own settings with their defaults (``"defaults": {"mu": 0.01}``); a dataset's settings
and ``--set`` override them. A star job's aggregator is built once when the job is generated,
so a bad method setting is refused then, with the message of the component's constructor.

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

PLACEHOLDER_PREFIX = "${"
DEFAULT_SEED = 0
COMMON_DEFAULTS = {"topology": "full", "topology_args": {}, "tensorboard": True, "secure_messages": "auto"}
"""Settings every job has unless the method (``method.json``'s ``defaults``), the dataset or
``--set`` say otherwise; later ones win in that order."""
P2P_DEFAULTS = {"transfer_dtype": "float32", "max_isolated_rounds": 3, "resume_from": None}
"""Settings every peer-to-peer job has on top of ``COMMON_DEFAULTS`` (what its sites send, when
they give up on unreachable neighbours, which checkpoints they resume from)."""


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


def fill(template, values: dict):
    """Replace every ``"${name}"`` string in ``template`` by ``values[name]``."""
    if isinstance(template, dict):
        return {k: fill(v, values) for k, v in template.items()}
    if isinstance(template, list):
        return [fill(v, values) for v in template]
    if isinstance(template, str) and template.startswith(PLACEHOLDER_PREFIX) and template.endswith("}"):
        name = template[2:-1]
        if name not in values:
            raise KeyError(f"template placeholder ${{{name}}} has no value in the dataset settings")
        return copy.deepcopy(values[name])
    return template


def malfunction_component(settings: dict, kind: str, seed: int) -> dict:
    return {
        "id": "malfunction",
        "path": "lightyear.flare.malfunction_filter.MalfunctionFilter",
        "args": {
            "kind": kind,
            "scale": settings.get("ana_scale", 120.5),
            "sigma": settings.get("ana_sigma", 1.0),
            "alpha": settings.get("sfa_alpha", 1.0),
            "seed": seed,
            "model": settings["model"],
            "model_args": settings.get("model_args", {}),
            "num_classes": settings["num_classes"],
            "in_channels": settings.get("in_channels", 1),
        },
    }


def faulty_client_config(client: dict, topology: str, component: dict) -> dict:
    client = copy.deepcopy(client)
    client.setdefault("components", []).append(component)
    for entry in client["executors"]:
        entry["executor"].setdefault("args", {})["malfunction_id"] = component["id"]
    if topology == "star":
        filt = {k: v for k, v in component.items() if k != "id"}
        client.setdefault("task_result_filters", []).append({"tasks": ["train"], "filters": [filt]})
    return client


def check_settings(settings: dict) -> None:
    """Refuse settings that would stop the job at its start, naming the setting."""
    from lightyear.algorithms.p2p.decayed_update import check_gamma
    from lightyear.algorithms.p2p.agreement import check_skill_floor, check_tau
    from lightyear.checks import positive_int, positive_seconds
    from lightyear.p2p.controller import check_progress_timeout
    from lightyear.training.settings import check_site_settings

    check_tau(settings.get("tau", 0.75))
    check_gamma(settings.get("gamma", 0.95))
    check_skill_floor(settings.get("skill_floor", 0.0))
    for key in ("dataset", "model"):
        if key not in settings:
            raise ValueError(f"the dataset settings lack {key!r}")
    check_site_settings(settings["dataset"], settings["model"], settings.get("dataset_args"), settings.get("model_args"), settings.get("train_args"))
    if "transfer_dtype" in settings:
        from lightyear.p2p.site.payload import check_transfer_dtype

        check_transfer_dtype(settings["transfer_dtype"])
    if "max_isolated_rounds" in settings:
        from lightyear.p2p.site.isolation import check_max_isolated_rounds

        check_max_isolated_rounds(settings["max_isolated_rounds"])
    if "resume_from" in settings:
        from lightyear.p2p.site.resume import check_resume_from

        check_resume_from(settings["resume_from"])
    positive_int("rounds", settings.get("rounds"))
    from lightyear.p2p.secure_messages import check_setting

    check_setting(settings.get("secure_messages", "auto"))
    deadline = positive_seconds("peer_deadline", settings.get("peer_deadline", 120.0))
    if settings.get("progress_timeout") is not None:
        check_progress_timeout(positive_seconds("progress_timeout", settings["progress_timeout"]), deadline)
    if settings.get("min_clients") is not None:
        positive_int("min_clients", settings["min_clients"])
    if "mu" in settings:
        from lightyear.training.regularizers import check_mu

        check_mu(settings["mu"])
    if "lam" in settings:
        from lightyear.star.sites.personal import check_lam

        check_lam(settings["lam"])
    check_site_resources(settings.get("site_resource_spec"))


def check_site_resources(spec) -> None:
    """Refuse a ``site_resource_spec`` FLARE's scheduler could not use, naming the problem.

    The spec is what every site asks of its resource manager (``nvflare/app_common/resource_managers/
    gpu_resource_manager.py``): ``num_of_gpus`` and ``mem_per_gpu_in_GiB``; ``null`` asks for nothing.
    """
    if spec is None:
        return
    if not isinstance(spec, dict):
        raise ValueError(f"site_resource_spec must be a JSON object such as {{\"num_of_gpus\": 1, \"mem_per_gpu_in_GiB\": 2}} or null, got {spec!r}")
    gpus = spec.get("num_of_gpus")
    if isinstance(gpus, bool) or not isinstance(gpus, int) or gpus < 0:
        raise ValueError(f"site_resource_spec.num_of_gpus must be an integer >= 0, got {gpus!r}")
    mem = spec.get("mem_per_gpu_in_GiB", 0)
    if isinstance(mem, bool) or not isinstance(mem, (int, float)) or mem < 0:
        raise ValueError(f"site_resource_spec.mem_per_gpu_in_GiB must be a number >= 0 (GiB), got {mem!r}")
    from nvflare.utils.job_launcher_utils import validate_portable_resource_spec

    validate_portable_resource_spec({"site": spec})


def resource_spec(sites: list[str], spec: dict | None) -> dict:
    """meta.json's ``resource_spec``: ``spec`` for every site, nothing for the server (FLARE's job
    scheduler, ``nvflare/app_common/job_schedulers/job_scheduler.py``, checks only the sites)."""
    return {site: dict(spec) for site in sites} if spec else {}


def check_server_components(server: dict, num_sites: int) -> None:
    """Build the toolkit's server components of a job (a star job's aggregator): their
    constructors refuse a bad method setting, naming it, and a rule that cannot run with the
    job's number of sites says so, before any site starts."""
    import importlib

    for component in server.get("components", []):
        module, _, name = component.get("path", "").rpartition(".")
        if module.startswith("lightyear."):
            built = getattr(importlib.import_module(module), name)(**component.get("args", {}))
            problem = built.check_sites(num_sites) if hasattr(built, "check_sites") else ""
            if problem:
                raise ValueError(problem)


def check_topology_settings(settings: dict) -> None:
    """Refuse a topology that cannot be built over the job's sites, before any site starts."""
    from lightyear.p2p.topology import build_graph, check_graph, check_topology_args

    args = settings.get("topology_args") or {}
    if not isinstance(args, dict):
        raise ValueError(f"topology_args must be a JSON object, got {args!r}")
    check_topology_args(settings["topology"], args)
    graph = build_graph(settings["sites"], settings["topology"], seed=settings["seed"], **args)
    if settings["topology"] != "none":
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
    settings = dict(COMMON_DEFAULTS)
    if meta_method["topology"] == "p2p":
        settings.update(P2P_DEFAULTS)
    settings.update(meta_method.get("defaults", {}))
    settings.update(load_json(os.path.join(configs, "datasets", f"{dataset}.json")))
    settings.update(overrides or {})
    settings["seed"] = seed
    check_settings(settings)
    if meta_method["topology"] == "p2p":
        check_topology_settings(settings)
    sites = list(settings["sites"])
    if not 0 <= faulty <= len(sites):
        raise ValueError(f"--faulty must be between 0 and {len(sites)} (the sites of {dataset}), got {faulty}")
    if faulty and malfunction == NONE:
        raise ValueError("--faulty needs --malfunction (ana, ana_relative, sfa, random or dynamic)")
    topology = meta_method["topology"]
    server = fill(load_json(os.path.join(configs, method, "config_fed_server.json")), settings)
    check_server_components(server, len(settings["sites"]))
    client = fill(load_json(os.path.join(configs, method, "config_fed_client.json")), settings)
    if settings.get("tensorboard"):
        from lightyear.flare import analytics

        client.setdefault("components", []).extend(analytics.client_components())
        server.setdefault("components", []).extend(analytics.server_components())
    name = job_name(method, dataset, malfunction, faulty)
    faulty_sites = sites[len(sites) - faulty :] if faulty else []
    benign = [s for s in sites if s not in faulty_sites]
    deploy = {"app": ["server"] + benign}
    from lightyear.flare.component_policy import with_refusal_fix

    server, client = with_refusal_fix(server), with_refusal_fix(client)
    files = {
        "app/config/config_fed_server.json": server,
        "app/config/config_fed_client.json": client,
    }
    if faulty_sites:
        deploy["app_faulty"] = faulty_sites
        component = malfunction_component(settings, malfunction, seed)
        files["app_faulty/config/config_fed_client.json"] = with_refusal_fix(faulty_client_config(client, topology, component))
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
