"""Batch script for FLARE's simulator on one node: every site its own process, all at once (one GPU group a site,
:mod:`lightyear.flare.placement`: site k gets GPU k mod G of those SLURM allocated, or ``-t N`` in CPU mode)."""

from __future__ import annotations

from lightyear.deploy.slurm.params import SlurmParams
from lightyear.deploy.slurm.script import Target, header, preamble, sbatch_options


def directives(p: SlurmParams) -> dict:
    return sbatch_options(p, 1, {"ntasks": 1}, p.cpus * p.sites)


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
    lines = header(target, p.name, directives(p)) + preamble(target) + ["N=${#SITES[@]}"]
    body = _GPU_GROUPS if p.gpus else '\nRUN_ARGS=(-t "$N")\n'
    return "\n".join(lines) + "\n" + body + _RUN
