"""Where the sites of a job run in FLARE's simulator: how many processes, on which GPUs. The simulator deals the sites
over the ``-gpu`` groups (site i to group i mod G) and runs one site at a time per group, so a peer-to-peer job, which
needs every site at once, takes ``-t N`` on CPU or N groups (``-gpu 0,1,0,1``: 4 sites on 2 GPUs)."""

from __future__ import annotations

from lightyear.checks import positive_int


def gpu_groups(num_sites: int, gpu_ids: list[int] | list[str]) -> str:
    """The simulator's ``-gpu`` value giving each of ``num_sites`` sites a group: site i gets ``gpu_ids[i % G]``."""
    positive_int("the number of sites", num_sites)
    ids = [str(g).strip() for g in gpu_ids]
    if not ids or not all(i.isdigit() for i in ids):
        raise ValueError(f"GPU ids must be non-negative integers such as 0,1, got {gpu_ids!r}")
    return ",".join(ids[i % len(ids)] for i in range(num_sites))


def parse_gpu_ids(text: str) -> list[int]:
    """``"0,1"`` -> [0, 1]; refuses anything but comma-separated non-negative integers."""
    parts = [p.strip() for p in str(text).split(",")]
    if not parts or not all(p.isdigit() for p in parts):
        raise ValueError(f"--gpus takes comma-separated GPU ids such as 0,1, got {text!r}")
    return [int(p) for p in parts]


def host_gpu_count() -> int:
    """GPUs nvidia-smi lists on this host (0 without a GPU or without nvidia-smi)."""
    try:
        from nvflare.fuel.utils.gpu_utils import get_host_gpu_ids

        return len(get_host_gpu_ids())
    except Exception:
        return 0


def p2p_simulator_advice(num_sites: int, num_gpus: int | None = None) -> str:
    """The commands running a P2P job of ``num_sites`` sites in FLARE's simulator, on CPU and on ``num_gpus`` GPUs."""
    gpus = host_gpu_count() if num_gpus is None else num_gpus
    example = gpus if gpus and gpus > 0 else 2
    groups = gpu_groups(num_sites, list(range(example)))
    return (
        f"every site of a peer-to-peer job runs at the same time, each in its own simulator worker: on CPU "
        f"'nvflare simulator JOB -w WORKSPACE -t {num_sites}'; on {example} GPUs one GPU group per site, "
        f"'nvflare simulator JOB -w WORKSPACE -gpu {groups}' ({num_sites} sites dealt over GPUs "
        f"{','.join(str(i) for i in range(example))}); in a deployment check that every site is connected"
    )
