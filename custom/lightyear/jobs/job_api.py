"""Run or export any method on any dataset through FLARE's Job API, as FLARE 2.9 runs a ``job.py`` (usage:
docs/jobs-and-settings.md): the generator's job (:func:`lightyear.jobs.generate.build_job`, same arguments) as a
:class:`lightyear.jobs.flare_job.GeneratedRecipe` in ``--env sim``, ``poc`` or ``prod``, or FLARE's ``--export
[--export-dir DIR]``. Every argument is checked before anything starts; SIGTERM stops a simulator run like Ctrl-C,
with every process it started (:mod:`lightyear.flare.process_tree`).
"""

from __future__ import annotations

import argparse
import os
import signal
import sys
import warnings


def _export_flags(argv: list[str]) -> tuple[bool, bool]:
    """(``--export`` given, ``--export-dir`` given), read before FLARE removes both from ``sys.argv``."""
    return "--export" in argv, any(a == "--export-dir" or a.startswith("--export-dir=") for a in argv)


EXPORT_FLAGS = _export_flags(sys.argv[1:]) if "nvflare.recipe.spec" not in sys.modules else None

# importing nvflare.recipe consumes --export/--export-dir, warning that it does: here that is the point
warnings.filterwarnings("ignore", message="NVFlare reserves '--export'", category=UserWarning)
from nvflare.recipe.prod_env import ProdEnv  # noqa: E402

from lightyear import configs as config_folders  # noqa: E402
from lightyear.cli import UserError, command, folder_name, one_line, seconds, terminate_as_interrupt  # noqa: E402
from lightyear.flare import process_tree  # noqa: E402
from lightyear.flare.placement import gpu_groups, parse_gpu_ids  # noqa: E402
from lightyear.jobs.environments import LightyearPocEnv, LightyearSimEnv  # noqa: E402
from lightyear.jobs.flare_job import GeneratedRecipe  # noqa: E402
from lightyear.jobs.generate import add_job_arguments, job_keywords  # noqa: E402
from lightyear.records import run_failure  # noqa: E402

ENVS = ("sim", "poc", "prod")
PROG = "python -m lightyear.jobs.job_api"


def check_export_flags() -> None:
    """Refuse ``--export-dir`` without ``--export``: FLARE would drop it and run the whole job."""
    from nvflare.recipe.spec import DEFAULT_EXPORT_DIR, _peek_recipe_args

    export, export_dir = _peek_recipe_args()
    lone_in_argv = EXPORT_FLAGS is not None and EXPORT_FLAGS[1] and not EXPORT_FLAGS[0]
    if lone_in_argv or (not export and export_dir != DEFAULT_EXPORT_DIR):
        raise UserError(
            "--export-dir only says where --export writes the job: add --export to write the folder, "
            "or leave --export-dir out to run the job"
        )


def gpus_asked(meta: dict) -> int:
    return max((spec.get("num_of_gpus", 0) for spec in (meta.get("resource_spec") or {}).values()), default=0)


def make_env(args, recipe: GeneratedRecipe):
    """The FLARE execution environment the arguments ask for; FLARE refusing an argument is a :class:`UserError`."""
    try:
        return _make_env(args, recipe)
    except UserError:
        raise
    except ValueError as exc:  # FLARE's environment validators (pydantic), the GPU list
        errors = getattr(exc, "errors", None)
        message = errors()[0].get("msg", str(exc)) if callable(errors) and errors() else str(exc)
        raise UserError(f"--env {args.env}: {one_line(message)}") from None


def _make_env(args, recipe: GeneratedRecipe):
    sites = recipe.sites
    gpus = parse_gpu_ids(args.gpus) if args.gpus else None
    if args.env == "poc" and not gpus and gpus_asked(recipe.files["meta.json"]):
        raise UserError(
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
        return LightyearPocEnv(
            clients=sites, num_clients=len(sites), gpu_ids=gpus, workspace=args.workspace, username=args.username
        )
    if not args.startup_kit:
        raise UserError("--env prod needs --startup-kit: the admin's startup kit folder of the running deployment")
    if not os.path.isdir(os.path.join(args.startup_kit, "startup")):
        raise UserError(
            f"--startup-kit {args.startup_kit} is not an admin startup kit (no startup/ folder in it): "
            "give the admin's kit of the running deployment, e.g. prod_00/admin@org"
        )
    return ProdEnv(startup_kit_location=args.startup_kit, username=args.username, login_timeout=args.login_timeout)


def build_parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(
        prog=PROG,
        description="Run a generated job through FLARE's Job API (SimEnv, PocEnv or ProdEnv), or export it with "
        "FLARE's --export [--export-dir DIR].",
    )
    ap.add_argument("--method", required=True, help="a method (a folder of app_configs)")
    ap.add_argument("--dataset", required=True, help="a dataset (app_configs/datasets/<name>.json)")
    add_job_arguments(ap)
    ap.add_argument("--env", choices=ENVS, default="sim", help="where the job runs (default: sim)")
    ap.add_argument(
        "--workspace", help="sim: the workspace root (the run goes to WORKSPACE/<job name>); poc: the POC folder"
    )
    ap.add_argument(
        "--gpus", help="sim/poc: comma-separated GPU ids; in sim every site gets its own group, dealt over them"
    )
    ap.add_argument("--startup-kit", help="prod: the admin startup kit of the running deployment")
    ap.add_argument(
        "--username", default="admin@nvidia.com", help="poc/prod: the admin user (default: FLARE's POC admin)"
    )
    ap.add_argument("--login-timeout", type=seconds(positive=True), default=10.0, help="prod: seconds to log in")
    ap.add_argument(
        "--wait",
        type=seconds(),
        nargs="?",
        const=0.0,
        metavar="SECONDS",
        help="poc/prod: wait for the job to finish (at most SECONDS; 0 or none given: no limit) "
        "and download its result",
    )
    return ap


def run_simulator(recipe: GeneratedRecipe, env) -> int:
    """Run the job in FLARE's simulator (module docstring); exit status 1 when no site finished."""
    with process_tree.adopting_orphans():  # a worker whose parent died stays this process's descendant
        return _run_simulator(recipe, env)


def _run_simulator(recipe: GeneratedRecipe, env) -> int:
    workspace = os.path.join(env.workspace_root, recipe.name)
    received: list[str] = []
    family = process_tree.Family()
    try:
        with terminate_as_interrupt((signal.SIGINT, signal.SIGTERM, signal.SIGHUP)) as received:
            run = recipe.execute(env)
    except (KeyboardInterrupt, RuntimeError) as exc:
        if not received and not isinstance(exc, KeyboardInterrupt):
            if str(exc).startswith("Simulation failed"):  # FLARE's SimEnv: the simulator itself failed
                print(f"{PROG}: {one_line(str(exc))}", file=sys.stderr)
                return 1
            raise
        # FLARE's simulator ends its workers on KeyboardInterrupt (and then reports a failed run); end what is left
        survivors = process_tree.stop_tree(family)
        print(
            f"{PROG}: interrupted ({', '.join(received) or 'Ctrl-C'}): the simulator and its sites were stopped"
            + (f"; still running: {survivors}" if survivors else ""),
            file=sys.stderr,
        )
        return 130
    print(f"job {run.get_job_id()} (sim)")
    print(f"results: {env.get_job_result(run.get_job_id())}")
    failure = run_failure(workspace)
    if failure:
        print(f"{PROG}: the run failed: {failure}", file=sys.stderr)
        return 1
    return 0


@command(PROG)
def main(argv=None) -> int:
    ap = build_parser()
    args = ap.parse_args(argv)
    check_export_flags()
    if args.workspace is not None:
        folder_name(args.workspace, "--workspace")
    if args.wait is not None and args.env == "sim":
        raise UserError("--wait is for --env poc and prod: a simulator run always runs to the end")
    configs = config_folders.checked_configs(args.configs)
    recipe = GeneratedRecipe.build(configs, args.method, args.dataset, **job_keywords(args))
    env = make_env(args, recipe)
    if args.env == "sim":
        return run_simulator(recipe, env)
    try:
        run = recipe.execute(env)  # exits after writing the folder when FLARE's --export was given
    except RuntimeError as exc:
        if not str(exc).startswith("Failed to submit"):  # FLARE's session manager could not reach the deployment
            raise
        print(f"{PROG}: {one_line(str(exc))}", file=sys.stderr)
        return 1
    print(f"job {run.get_job_id()} ({args.env})")
    if args.wait is not None:
        # FLARE's Run.get_result stops the environment afterwards (a POC's processes; its folder is kept)
        print(f"result: {run.get_result(timeout=args.wait, clean_up=False)}")
    elif args.env == "poc":
        print(f"the POC keeps running: stop it with 'NVFLARE_POC_WORKSPACE={env.poc_workspace} nvflare poc stop'")
    return 0


if __name__ == "__main__":
    sys.exit(main())
