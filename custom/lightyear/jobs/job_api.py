"""Run or export any method on any dataset through FLARE's Job API, the way FLARE 2.9 runs a ``job.py``.

The job is the one the generator builds (:func:`lightyear.jobs.generate.build_job`, same
arguments: ``--method``, ``--dataset``, ``--malfunction``, ``--faulty``, ``--seed``, ``--set``),
wrapped as a FLARE recipe (:class:`lightyear.jobs.flare_job.GeneratedRecipe`) and handed to an
execution environment:

- ``--env sim``: FLARE's simulator in ``<workspace>/<job name>`` (``--workspace``, default
  FLARE's ``/tmp/nvflare/simulation``), every site in its own worker; ``--gpus 0,1`` deals the
  sites over those GPUs, one GPU group per site. The workspace is made to allow this toolkit's
  components first (:mod:`lightyear.jobs.environments`).
- ``--env poc``: a fresh local POC with the job's sites (FLARE's ``PocEnv``; ``--workspace`` is the
  POC folder), the package allowed in every participant; the POC keeps running afterwards
  (``nvflare poc stop``).
- ``--env prod``: submit to a running deployment with the admin startup kit ``--startup-kit``;
  every site must have run ``lightyear-allow`` on its startup kit.

FLARE's recipe arguments work as for any ``job.py``: ``--export`` writes the job folder to
``./fl_job/<job name>`` instead of running it, ``--export --export-dir DIR`` to ``DIR/<job name>``
(FLARE consumes both flags when ``nvflare.recipe`` is imported). The exported folder is the
generator's, file for file.

Usage::

    python -m lightyear.jobs.job_api --method lightyear --dataset digits --env sim --workspace /tmp/ws
    python -m lightyear.jobs.job_api --method fedavg --dataset camelyon17 --env sim --gpus 0,1
    python -m lightyear.jobs.job_api --method lightyear --dataset digits --malfunction sfa --faulty 2 --export --export-dir /tmp/jobs
    python -m lightyear.jobs.job_api --method krum --dataset digits --env prod --startup-kit /path/admin@example.org --wait
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import warnings

# importing nvflare.recipe consumes --export/--export-dir, warning that it does: here that is the point
warnings.filterwarnings("ignore", message="NVFlare reserves '--export'", category=UserWarning)
from nvflare.recipe.prod_env import ProdEnv  # noqa: E402

from lightyear.algorithms.malfunctions import KINDS, NONE  # noqa: E402
from lightyear.jobs.environments import LightyearPocEnv, LightyearSimEnv
from lightyear.jobs.flare_job import GeneratedRecipe
from lightyear.jobs.generate import DEFAULT_SEED, repo_root
from lightyear.flare.placement import gpu_groups, parse_gpu_ids

ENVS = ("sim", "poc", "prod")


def parse_overrides(items: list[str]) -> dict:
    """``["k=json", ...]`` -> {k: value}; a value that is not JSON is taken as a string."""
    overrides = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise ValueError(f"--set takes KEY=VALUE (a JSON value), got {item!r}")
        try:
            overrides[key] = json.loads(value)
        except json.JSONDecodeError:
            overrides[key] = value
    return overrides


def gpus_asked(meta: dict) -> int:
    """The most GPUs a site of the job asks for in meta.json's ``resource_spec``."""
    return max((spec.get("num_of_gpus", 0) for spec in (meta.get("resource_spec") or {}).values()), default=0)


def make_env(args, recipe: GeneratedRecipe):
    """The FLARE execution environment the arguments ask for, for the recipe's job."""
    sites = recipe.sites
    gpus = parse_gpu_ids(args.gpus) if args.gpus else None
    if args.env == "poc" and not gpus and gpus_asked(recipe.files["meta.json"]):
        raise ValueError(
            f"{recipe.name} asks every site for a GPU (meta.json resource_spec) and a POC without --gpus has none, so "
            "FLARE would never schedule it: add --set site_resource_spec=null to train on CPU, or give --gpus and "
            "declare the GPUs in each site's local/resources.json (GPUResourceManager num_of_gpus, mem_per_gpu_in_GiB)"
        )
    if args.env == "sim":
        kwargs = {"clients": sites, "num_threads": len(sites)}
        if gpus:
            kwargs["gpu_config"] = gpu_groups(len(sites), gpus)
        if args.workspace:
            kwargs["workspace_root"] = os.path.abspath(args.workspace)
        return LightyearSimEnv(**kwargs)
    if args.env == "poc":
        return LightyearPocEnv(clients=sites, num_clients=len(sites), gpu_ids=gpus, workspace=args.workspace, username=args.username)
    if not args.startup_kit:
        raise ValueError("--env prod needs --startup-kit: the admin's startup kit folder of the running deployment")
    return ProdEnv(startup_kit_location=args.startup_kit, username=args.username, login_timeout=args.login_timeout)


def build_parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(
        prog="python -m lightyear.jobs.job_api",
        description="Run a generated job through FLARE's Job API (SimEnv, PocEnv or ProdEnv), or export it with "
        "FLARE's --export [--export-dir DIR].",
    )
    ap.add_argument("--configs", help="the app_configs folder (default: ./app_configs of the repository)")
    ap.add_argument("--method", required=True, help="a method (a folder of app_configs)")
    ap.add_argument("--dataset", required=True, help="a dataset (app_configs/datasets/<name>.json)")
    ap.add_argument("--malfunction", default=NONE, help=f"malfunction of the faulty sites: {', '.join(KINDS)}")
    ap.add_argument("--faulty", type=int, default=0, help="number of faulty sites (the last K sites)")
    ap.add_argument("--seed", type=int, default=DEFAULT_SEED, help="job seed")
    ap.add_argument("--set", action="append", default=[], metavar="KEY=JSON", help="override a dataset setting, e.g. --set rounds=3")
    ap.add_argument("--env", choices=ENVS, default="sim", help="where the job runs (default: sim)")
    ap.add_argument("--workspace", help="sim: the workspace root (the run goes to WORKSPACE/<job name>); poc: the POC folder")
    ap.add_argument("--gpus", help="sim/poc: comma-separated GPU ids; in sim every site gets its own group, dealt over them")
    ap.add_argument("--startup-kit", help="prod: the admin startup kit of the running deployment")
    ap.add_argument("--username", default="admin@nvidia.com", help="poc/prod: the admin user (default: FLARE's POC admin)")
    ap.add_argument("--login-timeout", type=float, default=10.0, help="prod: seconds to log in")
    ap.add_argument("--wait", type=float, nargs="?", const=0.0, metavar="SECONDS", help="poc/prod: wait for the job to finish (at most SECONDS) and download its result")
    return ap


def main(argv=None) -> int:
    ap = build_parser()
    args = ap.parse_args(argv)
    try:
        configs = args.configs or os.path.join(repo_root(), "app_configs")
        recipe = GeneratedRecipe.build(
            configs, args.method, args.dataset, malfunction=args.malfunction, faulty=args.faulty,
            seed=args.seed, overrides=parse_overrides(args.set),
        )
        env = make_env(args, recipe)
    except (ValueError, KeyError, FileNotFoundError) as exc:
        ap.error(str(exc))
    run = recipe.execute(env)  # exits after writing the folder when FLARE's --export was given
    print(f"job {run.get_job_id()} ({args.env})")
    if args.env == "sim":
        print(f"results: {env.get_job_result(run.get_job_id())}")
    elif args.wait is not None:
        # FLARE's Run.get_result stops the environment afterwards (a POC's processes; its folder is kept)
        print(f"result: {run.get_result(timeout=args.wait, clean_up=False)}")
    elif args.env == "poc":
        print(f"the POC keeps running: stop it with 'NVFLARE_POC_WORKSPACE={env.poc_workspace} nvflare poc stop'")
    return 0


if __name__ == "__main__":
    sys.exit(main())
