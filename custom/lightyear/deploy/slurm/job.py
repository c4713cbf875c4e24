"""The FLARE job a SLURM script runs: its folder checked (:func:`lightyear.deploy.job_folder.read_job`), its name and
its sites. The batch scripts run ``python -m lightyear.deploy.slurm.job sites JOB`` (one name a line) to size a run."""

from __future__ import annotations

import sys

from lightyear.deploy.job_folder import JobFolderError, read_job

__all__ = ["JobFolderError", "job_name", "site_names"]


def site_names(job: str) -> list[str]:
    """The sites the job deploys to (site-2 before site-10), each once."""
    return list(read_job(job).sites)


def job_name(job: str) -> str:
    """The job's name (meta.json ``name``, else the folder name)."""
    return read_job(job).name


def main(argv=None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 2 or args[0] not in ("sites", "name"):
        print("usage: python -m lightyear.deploy.slurm.job {sites|name} JOB", file=sys.stderr)
        return 2
    try:
        print("\n".join(site_names(args[1])) if args[0] == "sites" else job_name(args[1]))
    except JobFolderError as e:
        print(f"slurm_job: {e}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
