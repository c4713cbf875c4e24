"""Attack jobs: ``--attack KIND --attackers K [--knowledge partial|full]`` and ``--set attack_<param>=VALUE``.

The attackers are the last K sites (K = 0: the clean job). ``lf`` gives them the app ``app_faulty`` with
``flip_labels``; another kind adds the component :data:`PEER_ATTACKER` to ``app_faulty`` (peer-to-peer) or
:data:`ADVERSARY` to the server (star). Refused before anything is written, naming what is allowed: what
:class:`~lightyear.algorithms.attacks.settings.AttackSpec` refuses; ``--attack`` with ``--malfunction``/``--faulty``;
attack flags without ``--attack``; K outside [0, sites - 1]; an adaptive attack the method does not declare, or
settings it does not take; ``--knowledge full`` for a kind that ignores it (:func:`uses_knowledge`) or, peer-to-peer,
with an attacker without a benign in-neighbour; ``lf`` without ``num_classes`` >= 2.
"""

from __future__ import annotations

import copy

from lightyear.algorithms.attacks import catalogue
from lightyear.algorithms.attacks.colluding import check_spec
from lightyear.algorithms.attacks.reparametrise import RESCALE, RESCALE_PERMUTE
from lightyear.algorithms.attacks.settings import (
    PEER_ADAPTIVE,
    REPARAMETRISATIONS,
    AdaptiveTarget,
    AttackSpec,
    params_of,
)
from lightyear.algorithms.attacks.updates import ADAPTIVE, FULL, KNOWLEDGE, LF, PARTIAL
from lightyear.algorithms.malfunctions import NONE
from lightyear.checks import int_in, integer, raising
from lightyear.flare.component_policy import with_refusal_fix
from lightyear.flare.declarations import ORACLE
from lightyear.jobs import registry
from lightyear.jobs.settings import SettingError
from lightyear.p2p.topology import in_neighbours

PREFIX = "attack_"
"""``--set attack_<param>=VALUE`` sets the attack's parameter ``<param>``."""

PEER_ATTACKER = "lightyear.p2p.attack.attacker.PeerAttacker"
ADVERSARY = "lightyear.star.adversary.SimulatedAdversary"
ATTACK_ID, ADVERSARY_ID = "attack", "adversary"
CLIENT, FAULTY_CLIENT = "app/config/config_fed_client.json", "app_faulty/config/config_fed_client.json"
SERVER = "app/config/config_fed_server.json"


def adaptive_methods() -> list[str]:
    """The methods an adaptive attack targets: those that declare one (``Method.adaptive``)."""
    return registry.with_adaptive_attack()


def adaptive_target(method: str) -> AdaptiveTarget | None:
    """``method``'s declared adaptive attack (None: none); ``ORACLE``: the attack querying a site's own prediction."""
    declared = registry.method(method).adaptive
    return PEER_ADAPTIVE if declared == ORACLE else declared


def check_adaptive(spec: AttackSpec, method: str) -> AttackSpec:
    """Refuse, in the declaration's words, an adaptive attack that ``method``'s declaration cannot run."""
    if spec.kind != ADAPTIVE:
        return spec
    declared = adaptive_target(method)
    if declared is None:
        raise ValueError(
            f"the adaptive attack adapts to a method's acceptance rule and {method} declares none it targets: "
            f"choose --method {', '.join(adaptive_methods())}, or another --attack"
        )
    return declared.check(spec, method)


def uses_knowledge() -> tuple[str, ...]:
    """The attacks whose update depends on what the attackers know (the others use their own update)."""
    return tuple(name for name, a in catalogue.attacks().items() if a.uses_knowledge)


def split_params(overrides: dict | None) -> tuple[dict, dict]:
    """({param: value} of the ``attack_<param>`` settings, the other settings)."""
    items = (overrides or {}).items()
    params = {key[len(PREFIX) :]: value for key, value in items if key.startswith(PREFIX)}
    return params, {key: value for key, value in items if not key.startswith(PREFIX)}


def check_request(attack: str, attackers, knowledge: str | None, malfunction: str, faulty: int, params: dict) -> None:
    """Refuse attack flags that do not go together (before any file is read)."""
    if attack != NONE and attack not in catalogue.names():
        raise SettingError(f"unknown attack {attack!r}; choose one of {', '.join(catalogue.names())}")
    if attack == NONE:
        given = ["--attackers"] * bool(attackers) + ["--knowledge"] * (knowledge is not None)
        given += [f"--set {PREFIX}{p}" for p in params]
        if given:
            raise SettingError(f"{given[0]} needs --attack ({', '.join(catalogue.names())})")
        return
    if malfunction != NONE or faulty:
        raise SettingError(
            "--attack cannot go with --malfunction or --faulty: a site is either faulty or attacking; "
            "give --attack KIND --attackers K alone"
        )
    with raising(SettingError):
        integer("--attackers", attackers)
    if knowledge is not None and knowledge not in KNOWLEDGE:
        raise SettingError(f"unknown knowledge {knowledge!r}; choose one of {', '.join(KNOWLEDGE)}")


def attack_spec(
    method: str,
    topology: str,
    settings: dict,
    attack: str,
    attackers: int,
    knowledge: str | None,
    params: dict,
    graph: dict | None = None,
    graph_topology: str = "full",
) -> AttackSpec | None:
    """The job's attack, checked (module docstring); None without one or K = 0. ``graph``: the peer-to-peer graph
    (site -> out-neighbours) of topology ``graph_topology``."""
    if attack == NONE:
        return None
    sites = list(settings["sites"])
    if not 0 <= attackers <= len(sites) - 1:
        raise SettingError(
            f"--attackers must be between 0 and {len(sites) - 1} (the {len(sites)} sites of {settings['dataset']} "
            f"less one benign site), got {attackers}"
        )
    names = sites[len(sites) - attackers :] if attackers else []
    if not names and params:
        raise SettingError(
            f"--set {PREFIX}{sorted(params)[0]} does nothing in a job with --attackers 0 (a clean job): "
            "leave it out, or give --attackers K >= 1"
        )
    with raising(SettingError):
        spec = AttackSpec(attack, knowledge or PARTIAL, tuple(names), params)
    if spec.knowledge == FULL and attack not in uses_knowledge():
        raise SettingError(
            f"--knowledge full changes nothing for {attack}, which uses the attacker's own update: leave it out "
            f"(full knowledge is for {', '.join(uses_knowledge())})"
        )
    if attack == LF:
        with raising(SettingError):
            note = "label flipping trains on (y + 1) mod num_classes"
            int_in("num_classes", settings.get("num_classes"), 2, note=note)
    if attack in REPARAMETRISATIONS:
        check_reparametrisation(spec, topology, settings)
    if names:
        with raising(SettingError):  # what the attack cannot run against this method, in the components' words
            check_adaptive(spec, method)
            if topology == "star" and attack != LF:
                check_spec(spec)
    if spec.knowledge == FULL and topology == "p2p" and graph is not None and graph_topology != "none":
        check_full_knowledge(graph, names, graph_topology)
    return spec if names else None


def check_reparametrisation(spec: AttackSpec, topology: str, settings: dict) -> None:
    """Refuse a reparametrisation the job cannot run: per-receiver crafting in the star topology, a network without
    an exact symmetry, rescaling a network none of whose units admits it."""
    if topology == "star" and spec.params.get("per_receiver"):
        raise SettingError(
            f"--set {PREFIX}per_receiver=true: the star topology has one receiver, the server, so every attacker "
            "sends one model; leave the setting out (it is for peer-to-peer jobs)"
        )
    if spec.kind not in REPARAMETRISATIONS:
        return
    from lightyear.models import build_model, model_symmetries  # torch: only for a reparametrisation job

    args = settings.get("model_args") or {}
    network = build_model(settings["model"], settings["num_classes"], settings.get("in_channels", 1), **args)
    weights = {key: value.detach().numpy() for key, value in network.state_dict().items()}
    groups = model_symmetries(settings["model"], weights, args)
    if not groups:
        raise SettingError(
            f"--attack {spec.kind}: {settings['model']} declares no hidden unit with an exact symmetry (its module's "
            "symmetries() returns none), so the attack would send the honest model; choose another attack"
        )
    if spec.kind in (RESCALE, RESCALE_PERMUTE) and not any(group.scalable for group in groups):
        raise SettingError(
            f"--attack {spec.kind}: no unit of {settings['model']} admits an exact rescaling (its activations are not "
            "positively homogeneous); use --attack permute"
        )


def check_full_knowledge(graph: dict, attackers: list[str], topology: str) -> None:
    """Refuse full knowledge when an attacker receives no benign site's model in ``graph`` (with ``sample_neighbours``
    a round's sample may still hold none: the attacker then knows only the attackers' updates)."""
    senders = in_neighbours(graph)
    for site in attackers:
        if not [s for s in senders.get(site, []) if s not in attackers]:
            heard = ", ".join(senders.get(site, [])) or "nobody"
            raise SettingError(
                f"--knowledge full: attacker {site} receives no benign site's model on the {topology} topology (it "
                f"hears from {heard}), so it cannot know benign updates: use --knowledge partial, fewer --attackers, "
                "or a topology in which every attacker has a benign in-neighbour (e.g. --set topology=full)"
            )


def job_suffix(spec: AttackSpec) -> str:
    return f"_{spec.kind}{len(spec.attackers)}" + ("_full" if spec.knowledge == FULL else "")


def component(spec: AttackSpec, seed: int, cid: str, path: str, model: dict | None = None) -> dict:
    args = {"kind": spec.kind, "knowledge": spec.knowledge, "attackers": list(spec.attackers)}
    args.update({"params": dict(spec.params), "seed": seed, **(model or {})})
    return {"id": cid, "path": path, "args": args}


def _with_executor_args(client: dict, **args) -> dict:
    client = copy.deepcopy(client)
    for entry in client["executors"]:
        entry["executor"].setdefault("args", {}).update(args)
    return client


def wire(files: dict, topology: str, spec: AttackSpec, seed: int, settings: dict | None = None) -> list[str]:
    """Add the attack to the job ``files`` (module docstring); the sites running ``app_faulty``. A star
    reparametrisation's adversary also gets ``model`` and ``model_args`` from ``settings``."""
    if spec.kind == LF:
        faulty = _with_executor_args(files[CLIENT], flip_labels=True)
    elif topology == "p2p":
        faulty = _with_executor_args(files[CLIENT], attack_id=ATTACK_ID)
        faulty.setdefault("components", []).append(component(spec, seed, ATTACK_ID, PEER_ATTACKER))
    else:
        server = copy.deepcopy(files[SERVER])
        model = None
        if spec.kind in REPARAMETRISATIONS:
            model = {"model": settings["model"], "model_args": settings.get("model_args") or {}}
        server.setdefault("components", []).append(component(spec, seed, ADVERSARY_ID, ADVERSARY, model))
        for workflow in server["workflows"]:
            workflow.setdefault("args", {})["adversary_id"] = ADVERSARY_ID
        files[SERVER] = with_refusal_fix(server)
        return []
    files[FAULTY_CLIENT] = with_refusal_fix(faulty)
    return list(spec.attackers)


def meta_fields(spec: AttackSpec) -> dict:
    """meta.json's ``lightyear`` entries of an attack job (besides ``faulty_sites`` and ``malfunction``)."""
    return {"attack": spec.kind, "knowledge": spec.knowledge, "attack_params": dict(spec.params)}


def known_params(attack: str, method: str | None = None) -> set[str]:
    """The ``attack_<param>`` settings of ``attack``; with ``method``, those its job takes (its declaration's)."""
    declared = adaptive_target(method) if method in registry.methods() else None
    known = attack in catalogue.names()
    params = declared.params if attack == ADAPTIVE and declared is not None else params_of(attack) if known else ()
    return {PREFIX + p for p in params}


def takes_attack(method: str, attack: str, knowledge: str, attackers: int) -> bool:
    """Whether such a job is made: the checks of :func:`attack_spec` that do not depend on the dataset."""
    return not why_not(method, attack, knowledge, attackers)


def why_not(method: str, attack: str, knowledge: str, attackers: int) -> str:
    """Why no such job (``attackers`` >= 1) is made, in the refusing check's words; "" when one is made."""
    if attack == ADAPTIVE and method not in adaptive_methods():
        return f"the adaptive attack adapts only to {', '.join(adaptive_methods())}, not {method}"
    if knowledge == FULL and attack not in uses_knowledge():
        return f"full knowledge changes nothing for {attack}"
    try:
        check_adaptive(AttackSpec(attack, knowledge, tuple(f"attacker-{i}" for i in range(attackers))), method)
    except ValueError as exc:
        return str(exc)
    return ""


def add_arguments(parser) -> None:
    """``--attack``, ``--attackers``, ``--knowledge`` (shared by lightyear-jobs and the Job API)."""
    parser.add_argument(
        "--attack",
        help=f"attack of the last K sites: {', '.join(catalogue.names())}; its settings: --set attack_<param>=VALUE",
    )
    parser.add_argument(
        "--attackers", type=int, help="number of attacking sites (the last K sites), 0 to sites - 1; needs --attack"
    )
    parser.add_argument(
        "--knowledge",
        help="what the attackers know: partial (their own honest updates; default) or full (also the benign ones)",
    )


def job_arguments(args) -> dict:
    """build_job's attack keywords from parsed ``--attack``/``--attackers``/``--knowledge``."""
    if args.attack is not None and args.attackers is None:
        raise SettingError(f"--attack {args.attack} needs --attackers K: how many of the last sites attack")
    if args.attack is None and args.attackers is not None:
        raise SettingError(f"--attackers needs --attack ({', '.join(catalogue.names())})")
    return {"attack": args.attack or NONE, "attackers": args.attackers or 0, "knowledge": args.knowledge}


def given(args) -> bool:
    return any(v is not None for v in (args.attack, args.attackers, args.knowledge))
