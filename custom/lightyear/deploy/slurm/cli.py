"""``lightyear-slurm``: SLURM batch scripts for a FLARE job, and the committed templates in ``slurm/``.

Usage::

    lightyear-slurm                                   # rewrite slurm/*.sbatch from app_configs/slurm/templates.yaml
    lightyear-slurm --check                           # exit 1 if a committed template is not current
    lightyear-slurm simulator jobs/lightyear_digits --partition gpu --account proj --dry-run
    lightyear-slurm deploy jobs/lightyear_digits --gpus 4 --time 02:00:00 --wait
    lightyear-slurm cpu jobs/lightyear_digits --cpus 2

MODE is a template: ``simulator`` (one node, one GPU a site), ``cpu`` (the same without GPUs), ``deploy`` (a
provisioned deployment, server + one GPU a site), ``deploy_cpu``. Without ``--dry-run`` the script is saved in ``--out``
and submitted with ``sbatch``; the job id and results folder (``<out>/<job name>-<SLURM job id>``) are printed.
"""

from __future__ import annotations

import argparse
import os
import sys

from lightyear import configs as config_folders
from lightyear.cli import command, one_line
from lightyear.deploy.slurm import submit as slurm_submit
from lightyear.deploy.slurm import templates as slurm_templates
from lightyear.deploy.slurm.job import job_name, site_names
from lightyear.deploy.slurm.params import SlurmInputError, for_job, load_description, template
from lightyear.deploy.slurm.script import Target

DESCRIPTION = os.path.join("slurm", "templates.yaml")
"""The template description, in the package's configurations (``app_configs/slurm/templates.yaml``)."""


def parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(
        prog="lightyear-slurm",
        description=__doc__.split("\n\n")[0],
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog=__doc__.split("\n\n", 1)[1],
    )
    ap.add_argument("mode", nargs="?", help="a template of the description (simulator, cpu, deploy, deploy_cpu)")
    ap.add_argument("job", nargs="?", help="the FLARE job folder (e.g. jobs/lightyear_digits)")
    ap.add_argument("--description", help="the template description (default: app_configs/slurm/templates.yaml)")
    ap.add_argument("--check", action="store_true", help="only compare slurm/*.sbatch with the description's output")
    ap.add_argument("--partition")
    ap.add_argument("--account")
    ap.add_argument("--time", help="time limit, HH:MM:SS or D-HH:MM:SS")
    ap.add_argument("--gpu-type", help="GPU type in --gres=gpu:TYPE:N (default a100; '' for none)")
    ap.add_argument("--gpus", type=int, help="GPUs a node; 0 = CPU only (default: one a site)")
    ap.add_argument("--cpus", type=int, help="CPUs a site process")
    ap.add_argument("--nodes", type=int, help="deploy: nodes (default: as many as the sites' GPUs need)")
    ap.add_argument("--mem-per-cpu", help="memory a CPU, e.g. 4G")
    ap.add_argument("--out", default="slurm_results", help="results root (default ./slurm_results)")
    ap.add_argument("--dry-run", action="store_true", help="print the batch script, submit nothing")
    ap.add_argument("--wait", action="store_true", help="wait for the job to end (sbatch --wait) and return its status")
    return ap


def _templates_main(args, description: str) -> int:
    what = "lightyear-slurm " + ("--check" if args.check else "without MODE (it rewrites the committed slurm/*.sbatch)")
    root = config_folders.require_checkout(what, "run it in the repository, or give MODE and JOB for one job's script")
    folder = os.path.join(root, slurm_templates.FOLDER)
    if args.check:
        stale = slurm_templates.differences(description, folder)
        if stale:
            print(f"{folder}: not current: {', '.join(stale)}; run lightyear-slurm to rewrite", file=sys.stderr)
            return 1
        print(f"{folder}: every template is current")
        return 0
    for path in slurm_templates.write(description, folder):
        print(f"wrote {path}")
    return 0


@command("lightyear-slurm")
def main(argv=None) -> int:
    ap = parser()
    args = ap.parse_args(argv)
    try:
        description = os.path.abspath(args.description or os.path.join(config_folders.bundled(), DESCRIPTION))
        if args.mode is None:
            return _templates_main(args, description)
        if args.check:
            ap.error("--check takes no MODE or JOB")
        base = template(load_description(description), args.mode)
        if args.job is None:
            raise SlurmInputError(f"give the job folder: lightyear-slurm {args.mode} jobs/<job>")
        keys = ("partition", "account", "time", "gpu_type", "gpus", "cpus", "nodes", "mem_per_cpu")
        given = {k: (v or None) if k == "gpu_type" else v for k in keys if (v := getattr(args, k)) is not None}
        params = for_job(base, len(site_names(args.job)), given)
        name = job_name(args.job)
        text = slurm_templates.render(params, Target.for_job(args.job, args.out, name))
        if args.dry_run:
            print(text, end="")
            return 0
        slurm_submit.sbatch_command()  # no sbatch: say so before writing anything
        out = os.path.abspath(args.out)
        script = slurm_submit.save_script(text, out, f"{name}-{args.mode}")

        def announce(job_id: str) -> None:
            print(f"submitted SLURM job {job_id} ({script})")
            log = os.path.join(out, f"ly-{name}-{job_id}.out")
            print(f"results: {os.path.join(out, name)}-{job_id}   log: {log}", flush=True)

        job_id, status = slurm_submit.submit(script, wait=args.wait, on_id=announce)
        if args.wait:
            print(f"SLURM job {job_id} ended with exit status {status}")
        return status
    except slurm_submit.SubmitError as e:
        print(f"lightyear-slurm: error: {one_line(str(e))}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
