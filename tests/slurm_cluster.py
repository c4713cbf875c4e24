"""A single-node SLURM on loopback for the deployment tests: munged, slurmctld and slurmd started
in the foreground from a temporary folder (config, key, state, logs), stopped by :meth:`stop`.

The node is ``localhost`` with more CPUs than this machine has (``SlurmdParameters=config_overrides``
lets slurmd accept it); ``proctrack/linuxproc`` and ``task/none`` need no cgroups, so it runs in a
container. Nothing is installed here: without SLURM's and munge's programs the tests skip and say
what to install.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import time

PROGRAMS = ("munged", "slurmctld", "slurmd", "sbatch", "squeue", "scancel", "scontrol", "srun")
INSTALL = "apt-get install -y slurmctld slurmd slurm-client munge"


def find(program: str) -> str | None:
    return shutil.which(program) or next(
        (p for d in ("/usr/sbin", "/usr/bin") if os.access(p := os.path.join(d, program), os.X_OK)), None
    )


def missing_programs() -> list[str]:
    return [p for p in PROGRAMS if find(p) is None]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


CONF = """ClusterName=lytest
SlurmctldHost=localhost
SlurmctldPort={ctld_port}
SlurmdPort={slurmd_port}
SlurmUser={user}
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket={root}/munge/munge.socket
MpiDefault=none
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
SchedulerType=sched/backfill
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
SlurmdParameters=config_overrides
ReturnToService=2
KillWait=10
StateSaveLocation={root}/state
SlurmdSpoolDir={root}/spool
SlurmctldPidFile={root}/slurmctld.pid
SlurmdPidFile={root}/slurmd.pid
SlurmctldLogFile={root}/slurmctld.log
SlurmdLogFile={root}/slurmd.log
NodeName=localhost NodeAddr=127.0.0.1 CPUs={cpus} RealMemory=16000 State=UNKNOWN
PartitionName=debug Nodes=localhost Default=YES MaxTime=INFINITE State=UP
"""


class Cluster:
    """The running daemons and the environment (``SLURM_CONF``) that reaches them."""

    def __init__(self, root: str, cpus: int = 16):
        self.root = root
        self.cpus = cpus
        self.conf = os.path.join(root, "slurm.conf")
        self.procs: list[subprocess.Popen] = []
        self.env = dict(os.environ, SLURM_CONF=self.conf)

    def start(self, timeout: float = 60.0) -> None:
        """Start munged, slurmctld and slurmd; RuntimeError with their logs if the node is not idle in time."""
        for d in ("state", "spool", "munge"):
            os.makedirs(os.path.join(self.root, d), exist_ok=True)
        os.chmod(os.path.join(self.root, "munge"), 0o700)
        key = os.path.join(self.root, "munge", "munge.key")
        with open(key, "wb") as f:
            f.write(os.urandom(1024))
        os.chmod(key, 0o400)
        import pwd

        user = pwd.getpwuid(os.getuid()).pw_name
        with open(self.conf, "w") as f:
            f.write(
                CONF.format(root=self.root, user=user, cpus=self.cpus, ctld_port=free_port(), slurmd_port=free_port())
            )
        m = os.path.join(self.root, "munge")
        self._spawn(
            [
                find("munged"),
                "--foreground",
                "--force",
                f"--key-file={key}",
                f"--socket={m}/munge.socket",
                f"--pid-file={m}/munged.pid",
                f"--log-file={m}/munged.log",
                f"--seed-file={m}/seed",
            ],
            "munged",
        )
        deadline = time.monotonic() + 10
        while not os.path.exists(f"{m}/munge.socket") and time.monotonic() < deadline:
            time.sleep(0.1)
        self._spawn([find("slurmctld"), "-D", "-i", "-f", self.conf], "slurmctld")
        self._spawn([find("slurmd"), "-D", "-N", "localhost", "-f", self.conf], "slurmd")
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            state = self.run("sinfo", "-h", "-o", "%T", check=False).stdout.strip()
            if state == "idle":
                return
            if any(p.poll() is not None for p in self.procs):
                break
            time.sleep(0.5)
        raise RuntimeError("SLURM did not come up:\n" + self.logs())

    def _spawn(self, cmd: list[str], name: str) -> None:
        log = open(os.path.join(self.root, f"{name}.stdout"), "wb")
        self.procs.append(
            subprocess.Popen(
                cmd,
                stdout=log,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                env=self.env,
                start_new_session=True,
            )
        )
        log.close()

    def run(self, *cmd: str, check: bool = True, timeout: float = 30.0) -> subprocess.CompletedProcess:
        return subprocess.run(
            [find(cmd[0]) or cmd[0], *cmd[1:]],
            env=self.env,
            capture_output=True,
            text=True,
            timeout=timeout,
            check=check,
        )

    def logs(self, lines: int = 15) -> str:
        out = []
        for name in (
            "slurmctld.log",
            "slurmd.log",
            "munge/munged.log",
            "munged.stdout",
            "slurmctld.stdout",
            "slurmd.stdout",
        ):
            path = os.path.join(self.root, name)
            if os.path.isfile(path):
                with open(path, errors="replace") as f:
                    out.append(f"--- {name}\n" + "".join(f.readlines()[-lines:]))
        return "\n".join(out)

    def wait_idle(self, timeout: float = 60.0) -> bool:
        """True once no job is queued or completing."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if not self.run("squeue", "-h", check=False).stdout.strip():
                return True
            time.sleep(1.0)
        return False

    def stop(self) -> None:
        """Cancel every job, wait for them, then end slurmd, slurmctld and munged (TERM, then KILL)."""
        if self.procs and self.procs[-1].poll() is None:
            self.run("scancel", "--user", str(os.getuid()), check=False)
            self.wait_idle(30.0)
        for proc in reversed(self.procs):
            if proc.poll() is None:
                proc.terminate()
                try:
                    proc.wait(timeout=15)
                except subprocess.TimeoutExpired:
                    proc.kill()
                    proc.wait(timeout=5)
        self.procs = []
