"""A command stops only its own processes: what it started and what those started (by ancestry,
session or group, also after a parent died), never a process that merely names the same folder,
nor another command that shares its process group in a shell's pipeline."""

import os
import subprocess
import sys
import time

import psutil

from lightyear.deploy.processes import ProcessSet

SLEEP = [sys.executable, "-c", "import time; time.sleep(600)"]

# a FLARE participant: a parent that starts a job process in a session of its own, as FLARE does
PARTICIPANT = f"""
import subprocess, sys, time
job = subprocess.Popen({SLEEP!r} + ["-m", sys.argv[1]], start_new_session=True)
print(job.pid, flush=True)
time.sleep(600)
"""


def alive(pid):
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


def wait_for(predicate, timeout=30.0):
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline
        time.sleep(0.1)


def test_a_process_set_stops_its_commands_and_their_job_processes_and_no_process_naming_its_folder(tmp_path):
    workspace = str(tmp_path / "ws")
    decoys = [
        subprocess.Popen(SLEEP + ["-m", arg], start_new_session=True) for arg in (workspace + "_victim", workspace)
    ]
    processes = ProcessSet()
    try:
        (tmp_path / "participant.py").write_text(PARTICIPANT)
        parent = processes.start(
            [sys.executable, str(tmp_path / "participant.py"), workspace], dict(os.environ), str(tmp_path / "log")
        )
        wait_for(lambda: (tmp_path / "log").read_text().strip())
        job = int((tmp_path / "log").read_text().split()[0])
        assert sorted(processes.alive()) == sorted([parent.pid, job])
        assert processes.stop(grace=5.0) == []
        assert not alive(parent.pid) and not alive(job)
        assert [d.poll() for d in decoys] == [None, None]
    finally:
        processes.stop(grace=1.0)
        for d in decoys:
            d.kill()
            d.wait()


# a command that leads its process group (as the first command of a shell pipeline does) and
# stops its own family: the other commands of the pipeline share the group and are not its own
LEADER = """
import subprocess, sys, time
from lightyear.flare.process_tree import Family, adopting_orphans, stop_tree
with adopting_orphans():
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
    print(child.pid, flush=True)
    sys.stdin.readline()
    print(stop_tree(Family(), grace=5.0), flush=True)
"""


def test_a_command_leading_its_group_stops_its_children_and_not_the_other_commands_of_its_pipeline(tmp_path):
    (tmp_path / "leader.py").write_text(LEADER)
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path))
    leader = subprocess.Popen(
        [sys.executable, str(tmp_path / "leader.py")],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
        env=env,
        preexec_fn=os.setpgrp,
    )
    sibling = subprocess.Popen(SLEEP, preexec_fn=lambda: os.setpgid(0, leader.pid))
    try:
        child = int(leader.stdout.readline())
        assert os.getpgid(sibling.pid) == leader.pid == os.getpgid(child)
        leader.stdin.write("\n")
        leader.stdin.flush()
        assert leader.stdout.readline().strip() == "[]"
        assert leader.wait(timeout=30) == 0
        assert not alive(child) and sibling.poll() is None
    finally:
        for proc in (leader, sibling):
            proc.kill()
            proc.wait()
