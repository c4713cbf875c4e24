"""Batch script for FLARE's simulator on one node: every site its own process, all at once.

FLARE 2.9's simulator (``nvflare/private/fed/app/simulator/simulator_runner.py``) splits the
sites over the GPU groups of ``-gpu`` round-robin and runs one site at a time in each group when
there is more than one group; the worker sets ``CUDA_VISIBLE_DEVICES`` of a site's process to its
group (``simulator_worker.py``). A peer-to-peer job needs all N sites running at once, so the
script passes N groups, one a site: site k gets the k-th GPU SLURM allocated (its ids are read
from ``CUDA_VISIBLE_DEVICES`` inside the allocation), or with fewer GPUs than sites, GPU k mod G.
In CPU mode (no ``--gres``) it passes ``-t N``: N threads, again one process a site.

The workspace gets ``local/resources.json`` from ``lightyear-allow`` (FLARE's default component
policy plus this package) so FLARE builds the toolkit's components.
"""

from __future__ import annotations

from lightyear.deploy.slurm.params import SlurmParams
from lightyear.deploy.slurm.script import Target, header, preamble


def directives(p: SlurmParams) -> dict:
    return {
        "partition": p.partition,
        "account": p.account,
        "time": p.time,
        "nodes": 1,
        "ntasks": 1,
        "cpus-per-task": p.cpus * p.sites,
        "mem-per-cpu": p.mem_per_cpu,
        "gres": p.gres,
    }


_GPU_GROUPS = """
IFS=, read -ra GPU_IDS <<< "${CUDA_VISIBLE_DEVICES:-}"
if [ "${#GPU_IDS[@]}" -eq 0 ] || [ "${GPU_IDS[0]}" = "NoDevFiles" ]; then
  echo "no GPU in this allocation (CUDA_VISIBLE_DEVICES is empty): submit with --gres=gpu:N, \
or use the cpu template" >&2
  exit 2
fi
for g in "${GPU_IDS[@]}"; do
  case "$g" in ''|*[!0-9]*) GPU_IDS=($(seq 0 $(( ${#GPU_IDS[@]} - 1 )))); break ;; esac
done
if [ "${#GPU_IDS[@]}" -gt "$N" ]; then
  echo "warning: ${#GPU_IDS[@]} GPUs for $N sites: $(( ${#GPU_IDS[@]} - N )) will idle" >&2
fi
GROUPS_ARG=""
for ((k = 0; k < N; k++)); do
  GROUPS_ARG+="${GROUPS_ARG:+,}${GPU_IDS[k % ${#GPU_IDS[@]}]}"
done
echo "site -> GPU: ${SITES[*]} -> $GROUPS_ARG"
RUN_ARGS=(-gpu "$GROUPS_ARG")
"""

_RUN = r"""
WS="$RESULTS/workspace"
mkdir -p "$WS/local"
"$PYTHON" -m lightyear.deploy.allow_list "$WS"
trap 'echo "stopped by SLURM (scancel or time limit): partial results in $RESULTS" >&2' TERM
set +e
nvflare simulator "$JOB" -w "$WS" "${RUN_ARGS[@]}"
echo "simulator exit status $?"
set -e
"$PYTHON" -m lightyear.deploy.slurm.results "$WS" "${SITES[@]}"
"""


def script(p: SlurmParams, target: Target) -> str:
    """The batch script's text for the simulator template ``p``."""
    lines = header(target, p.name, directives(p)) + preamble(target) + ["N=${#SITES[@]}"]
    body = _GPU_GROUPS if p.gpus else '\nRUN_ARGS=(-t "$N")\n'
    return "\n".join(lines) + "\n" + body + _RUN
