"""Batch script for a provisioned FLARE deployment inside one SLURM allocation of ``sites + 1`` tasks.

It provisions a project (server on the first node, port from the job id, unless ``$LIGHTYEAR_SERVER_HOST`` or
``$LIGHTYEAR_FED_PORT``), allows this package, starts the server and each site (a GPU each) as ``srun`` steps of
``startup/sub_start.sh --once``, lets :mod:`lightyear.deploy.slurm.admin` run the job (all sites start first: the gang
scheduling FLARE's SLURM launcher, one ``sbatch`` a site, lacks) and checks the summary. A trap on TERM/INT (scancel,
the time limit via ``--signal``) and on exit shuts FLARE down, so no FLARE process outlives the job."""

from __future__ import annotations

from lightyear.deploy.slurm.params import SlurmParams
from lightyear.deploy.slurm.script import Target, header, preamble, sbatch_options

TERM_NOTICE_S = 120


def directives(p: SlurmParams) -> dict:
    tasks = {"ntasks-per-node": p.gpus + 1} if p.gpus else {"ntasks": p.sites + 1}
    return sbatch_options(p, p.nodes, tasks, p.cpus, signal=f"B:TERM@{TERM_NOTICE_S}")


_SETUP = r"""
N=${#SITES[@]}
if [ -n "${SLURM_JOB_NODELIST:-}" ] && command -v scontrol >/dev/null; then
  NODES=($(scontrol show hostnames "$SLURM_JOB_NODELIST"))
else
  NODES=("${SLURMD_NODENAME:-$(hostname)}")
fi
FIRST=${NODES[0]}
SERVER_HOST=${LIGHTYEAR_SERVER_HOST:-$FIRST}
PORT=${LIGHTYEAR_FED_PORT:-$(( 20000 + ${SLURM_JOB_ID:-0} % 20000 ))}
if [ "$TASKS" -lt $(( N + 1 )) ]; then
  echo "the job has $N sites: it needs $(( N + 1 )) tasks (server + one a site), this allocation has $TASKS." >&2
  echo "generate a script for it: lightyear-slurm MODE $JOB" >&2
  exit 2
fi
cd "$RESULTS"
"$PYTHON" -m lightyear.deploy.project --sites "$(IFS=,; echo "${SITES[*]}")" --server "$SERVER_HOST" \
  --fed-port "$PORT" --out project.yml
nvflare provision -p project.yml -w kits > provision.log 2>&1 || { cat provision.log >&2; exit 2; }
KITS="$RESULTS/kits/lightyear/prod_00"
"$PYTHON" -m lightyear.deploy.allow_list "$KITS/$SERVER_HOST" "${SITES[@]/#/$KITS/}"
mkdir -p logs
echo "server $SERVER_HOST:$PORT on $FIRST; nodes ${NODES[*]}"

STEPS=()
STOPPED=0
stop_all() {
  [ "$STOPPED" = 1 ] && return
  STOPPED=1
  if [ "${SHUT_DOWN:-0}" != 1 ]; then
    "$PYTHON" -m lightyear.deploy.slurm.admin shutdown --kit "$KITS/admin@lightyear.org" --connect-timeout 20 || true
  fi
  for ((i = 0; i < 60; i++)); do
    alive=0
    for pid in "${STEPS[@]}"; do kill -0 "$pid" 2>/dev/null && alive=1; done
    [ "$alive" = 0 ] && break
    sleep 1
  done
  for pid in "${STEPS[@]}"; do kill -TERM "$pid" 2>/dev/null || true; done
  wait 2>/dev/null || true
}
trap 'echo "stopped by SLURM (scancel or time limit): shutting FLARE down" >&2; stop_all; exit 143' TERM INT
trap stop_all EXIT
"""

_START = r"""
srun --nodes=1 --ntasks=1 --ntasks-per-node=1 --exact --cpus-per-task="$CPUS" --nodelist="$FIRST" $SERVER_GRES \
  --output="$RESULTS/logs/server.log" bash "$KITS/$SERVER_HOST/startup/sub_start.sh" --once &
STEPS+=($!)
for s in "${SITES[@]}"; do
  srun --nodes=1 --ntasks=1 --ntasks-per-node=1 --exact --cpus-per-task="$CPUS" $SITE_GRES \
    --output="$RESULTS/logs/$s.log" bash "$KITS/$s/startup/sub_start.sh" --once &
  STEPS+=($!)
done
set +e
"$PYTHON" -m lightyear.deploy.slurm.admin run --kit "$KITS/admin@lightyear.org" --job "$JOB" --sites "${SITES[@]}" \
  --out "$RESULTS" --connect-timeout "${LIGHTYEAR_CONNECT_TIMEOUT:-600}" &
wait $!
echo "admin exit status $?"
SHUT_DOWN=1
stop_all
set -e
"$PYTHON" -m lightyear.deploy.slurm.results "$RESULTS/server" "${SITES[@]}"
"""


def script(p: SlurmParams, target: Target) -> str:
    tasks = (
        "${SLURM_NTASKS:-$(( ${SLURM_NNODES:-1} * ${SLURM_NTASKS_PER_NODE:-1} ))}" if p.gpus else "${SLURM_NTASKS:-1}"
    )
    lines = [
        *header(target, p.name, directives(p)),
        *preamble(target),
        f"CPUS=${{SLURM_CPUS_PER_TASK:-{p.cpus}}}",
        f"TASKS={tasks}",
        f'SERVER_GRES="{"--gres=none" if p.gpus else ""}"',
        f'SITE_GRES="{"--gres=gpu:1" if p.gpus else ""}"',
    ]
    return "\n".join(lines) + "\n" + _SETUP + _START
