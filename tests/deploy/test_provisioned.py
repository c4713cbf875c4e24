"""A provisioned deployment as the README's *Production deployment* runs it, on loopback: ``nvflare
provision`` of a server and three sites (mutual TLS, the provisioned default), ``lightyear-allow`` in
every startup kit, each participant started with its own ``startup/start.sh``, a peer-to-peer job
with ``secure_messages=true`` submitted with the admin's startup kit, waited for and downloaded.
The models the sites exchange on the ``direct`` route are encrypted end to end by FLARE, one copy
per receiver: the sending site's cell logs it. (The default ``server`` route seals each model once
instead: ``tests/deploy/test_poc.py`` runs it in FLARE's secure mode.)"""

import glob
import json
import os
import re
import time

import pytest

from lightyear.deploy.allow_list import main as allow_main
from lightyear.deploy.collect import collect
from lightyear.deploy.flare_cli import FINISHED_OK, FlareCli, FlareCommandError, flare_env, nvflare_command
from lightyear.deploy.poc import free_ports
from lightyear.deploy.processes import ProcessSet
from lightyear.deploy.project import DEFAULT_ADMIN, write_project

from deploy_helpers import SITES, assert_finished, make_job, processes_with, round_rows
from repo import ROOT

SERVER = "localhost"
CELL_LOGGER = "nvflare.fuel.f3.cellnet.core_cell"


def log_cell_encryption(kit):
    """Let this participant log (DEBUG) what its cell encrypts: FLARE's default logging config plus one logger."""
    local = os.path.join(kit, "local")
    with open(os.path.join(local, "log_config.json.default")) as f:
        config = json.load(f)
    config.setdefault("loggers", {})[CELL_LOGGER] = {"level": "DEBUG"}
    with open(os.path.join(local, "log_config.json"), "w") as f:
        json.dump(config, f, indent=1)


@pytest.fixture
def deployment(tmp_path):
    """Provisioned kits, every participant started from its startup kit; stopped in the finalizer."""
    fed_port, admin_port = free_ports(2)
    project = tmp_path / "project.yml"
    write_project(str(project), SITES, server=SERVER, fed_learn_port=fed_port, admin_port=admin_port)
    home = tmp_path / "home"
    home.mkdir()
    env = flare_env(HOME=str(home))
    prov = tmp_path / "provision"
    FlareCli(env).run(["provision", "-p", str(project), "-w", str(prov), "--force"], timeout=180)
    prod = prov / "lightyear" / "prod_00"
    kits = {name: str(prod / name) for name in [SERVER, *SITES, DEFAULT_ADMIN]}
    with open(os.path.join(kits["site-1"], "startup", "fed_client.json")) as f:
        assert json.load(f)["client"]["connection_security"] == "mtls"
    assert allow_main([kits[p] for p in [SERVER, *SITES]]) == 0
    log_cell_encryption(kits["site-1"])
    processes = ProcessSet()
    try:
        for name in [SERVER, *SITES]:
            processes.start([os.path.join(kits[name], "startup", "start.sh")], env, str(tmp_path / f"{name}.console"))
        yield {"env": env, "kits": kits, "tmp": tmp_path}
    finally:
        survivors = processes.stop(grace=10.0)
        left = processes_with(str(prod))
        assert survivors == [] and left == [], left


def submit_when_ready(cli, job, timeout=180.0):
    """Submit once the server answers (it takes some seconds to start)."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            return cli.submit(job)
        except FlareCommandError:
            if time.monotonic() > deadline:
                raise
            time.sleep(3)


@pytest.mark.extended
@pytest.mark.deployment
def test_provisioned_p2p_run_with_secure_peer_messages(deployment):
    nvflare_command()
    tmp, kits = deployment["tmp"], deployment["kits"]
    job = make_job(tmp / "jobs", "lightyear", secure_messages=True, model_route="direct")
    cli = FlareCli(deployment["env"], startup_kit=kits[DEFAULT_ADMIN])
    job_id = submit_when_ready(cli, job)
    status = cli.wait(job_id, timeout=600)
    download = cli.download(job_id, str(tmp / "download"))
    out = tmp / "out"
    collect(download, {s: os.path.join(kits[s], job_id) for s in SITES}, str(out))
    assert FINISHED_OK in status, status
    assert_finished(out)
    server_log = open(out / "server" / "simulate_job" / "log.txt").read()
    assert "secure peer messages on, models routed direct" in server_log
    for site in SITES:  # every model reached both peers
        assert all(int(r["sent_bytes"]) == 2 * int(r["model_bytes"]) for r in round_rows(out, site))
    # site-1's cell encrypted every byte of its models before they left for the relay
    # (core_cell.encrypt_payload logs each payload; the arrays go in download-service chunks)
    site_logs = "".join(
        open(p, errors="replace").read()
        for p in glob.glob(os.path.join(kits["site-1"], "**", "log.txt"), recursive=True)
    )
    encrypted = sum(int(n) for n in re.findall(r"Payload \((\d+) bytes\) is encrypted", site_logs))
    assert encrypted >= sum(int(r["sent_bytes"]) for r in round_rows(out, "site-1")) > 0


def test_the_committed_provisioning_example_is_what_the_project_writer_makes(tmp_path):
    from lightyear.deploy.project import site_names

    written = tmp_path / "project.yml"
    write_project(str(written), site_names(8), server="fl-server.example.org")
    committed = os.path.join(ROOT, "app_configs", "deploy", "project.yml")
    assert open(committed).read() == written.read_text(), (
        "regenerate it: python -m lightyear.deploy.project --sites 8 --server fl-server.example.org "
        "--out app_configs/deploy/project.yml"
    )
