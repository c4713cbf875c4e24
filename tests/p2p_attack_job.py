"""A generated peer-to-peer job turned into an attack job as the interface contract specifies, for
tests that need one before the job generator writes it: the attackers (the last K sites) get the
client app ``app_faulty`` with a ``PeerAttacker`` component named by the executor's ``attack_id``
(or ``flip_labels`` for label flipping), and meta.json records the attack."""

import copy

from lightyear.algorithms.attacks.settings import AttackSpec
from lightyear.jobs import generate

ATTACKER_PATH = "lightyear.p2p.site.attacker.PeerAttacker"


def with_peer_attack(files: dict, kind: str, attackers: list, knowledge: str = "partial", params: dict | None = None, seed: int = 0) -> dict:
    """A copy of a generated job's ``files`` whose ``attackers`` attack with ``kind``."""
    spec = AttackSpec(kind, knowledge, tuple(attackers), dict(params or {}))  # refuses what the generator would
    files = copy.deepcopy(files)
    client = copy.deepcopy(files["app/config/config_fed_client.json"])
    for entry in client["executors"]:
        args = entry["executor"].setdefault("args", {})
        if kind == "lf":
            args["flip_labels"] = True
        else:
            args["attack_id"] = "attack"
    if kind != "lf":
        component_args = {"kind": kind, "knowledge": knowledge, "attackers": list(attackers), "params": dict(spec.params), "seed": seed}
        client.setdefault("components", []).append({"id": "attack", "path": ATTACKER_PATH, "args": component_args})
    files["app_faulty/config/config_fed_client.json"] = client
    meta = files["meta.json"]
    meta["deploy_map"]["app"] = [s for s in meta["deploy_map"]["app"] if s not in attackers]
    meta["deploy_map"]["app_faulty"] = list(attackers)
    meta["lightyear"].update({"attack": kind, "knowledge": knowledge, "attack_params": dict(spec.params), "faulty_sites": list(attackers), "malfunction": "none"})
    meta["name"] = f"{meta['name']}_{kind}{len(attackers)}" + ("_full" if knowledge == "full" else "")
    return files


def write_attack_job(configs: str, folder: str, method: str, dataset: str, kind: str, attackers: list, overrides: dict, **attack) -> str:
    """Generate ``method`` on ``dataset`` with ``overrides``, make ``attackers`` attack, write it to ``folder``."""
    _, files = generate.build_job(configs, method, dataset, seed=0, overrides=overrides)
    generate.write_job(with_peer_attack(files, kind, attackers, **attack), folder)
    return folder
