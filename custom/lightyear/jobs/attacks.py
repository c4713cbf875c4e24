"""Attack jobs: ``--attack KIND --attackers K [--knowledge partial|full]`` and ``--set attack_<param>=VALUE``.

The attackers are the last K sites of the dataset (as with ``--faulty``). What an attack job holds
(the interface the attack components read):

* ``lf`` (label flipping), both topologies: the attackers' app ``app_faulty`` passes
  ``"flip_labels": true`` to its executor, which trains on labels (y + 1) mod C. No other component.
* peer-to-peer, every other kind: ``app_faulty`` adds the component ``attack``
  (:data:`PEER_ATTACKER`) and its executor gets ``"attack_id": "attack"``.
* star, every other kind: the server adds the component ``adversary`` (:data:`ADVERSARY`), a
  research device simulating colluding attackers that the job names explicitly, and the controller
  gets ``"adversary_id": "adversary"``; the attackers run the benign app (the server rewrites what
  they send).

The components' arguments are ``kind``, ``knowledge``, ``attackers`` (names), ``params`` (the
``attack_<param>`` settings given, without the prefix; defaults stay with the rules) and ``seed``
(the job's). The job is named ``<method>_<dataset>_<kind><K>`` (``_full`` appended for full
knowledge) and meta.json's ``lightyear`` block gets ``attack``, ``knowledge``, ``attack_params``,
the attackers as ``faulty_sites`` and ``malfunction: none``. K = 0 is the clean job.

Checked before anything is written, each with the allowed values: the attack's settings by
:class:`~lightyear.algorithms.attacks.settings.AttackSpec` (the one checker the components share;
the components themselves are not built here), and what only a job knows:

* ``--attack`` with ``--malfunction``/``--faulty`` (a site is either faulty or attacking);
  ``--attackers``, ``--knowledge`` or ``attack_<param>`` without ``--attack``; K outside
  [0, sites - 1] (at least one benign site).
* ``adaptive`` only against the methods that declare one (``Method.adaptive``, :func:`adaptive_methods`),
  with the settings and knowledge that declaration takes.
* ``--knowledge full`` only for the kinds that use what the attackers know
  (:func:`uses_knowledge`): lf, sf and mr use the attacker's own update, so a full-knowledge job
  would repeat the partial one under another name.
* ``--knowledge full`` in a peer-to-peer job: a site knows the benign updates it receives, so every
  attacker needs a benign in-neighbour in the job's topology (``topology: none`` sends nothing and
  is not checked). With ``sample_neighbours`` a round's sample may still hold none; the attacker
  then knows only the attackers' updates that round.
* ``lf`` needs ``num_classes`` >= 2. Every dataset takes it: both losses (cross_entropy,
  weighted_focal) train on class indices, per pixel for the segmentation masks, where the flip of a
  binary mask (shapes, ultrasound, xray) is its inversion.
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
    """What ``method`` declares of the adaptive attack on it (None: it declares none); a peer-to-peer
    method whose site predicts its own decision declares ``ORACLE``: the attack that queries that
    prediction."""
    declared = registry.method(method).adaptive
    return PEER_ADAPTIVE if declared == ORACLE else declared


def check_adaptive(spec: AttackSpec, method: str) -> AttackSpec:
    """Refuse what the adaptive attack declared by ``method`` cannot run (its settings, knowledge
    and attacker count), in the declaration's words; other attacks pass."""
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
    """The attacks whose update depends on what the attackers know (the others use their own update;
    the reparametrisations transform the receiver's own model under full knowledge)."""
    return tuple(name for name, a in catalogue.attacks().items() if a.uses_knowledge)


def split_params(overrides: dict | None) -> tuple[dict, dict]:
    """({param: value} of the ``attack_<param>`` settings, the other settings)."""
    params, rest = {}, {}
    for key, value in (overrides or {}).items():
        if key.startswith(PREFIX):
            params[key[len(PREFIX) :]] = value
        else:
            rest[key] = value
    return params, rest


def check_request(attack: str, attackers, knowledge: str | None, malfunction: str, faulty: int, params: dict) -> None:
    """Refuse attack flags that do not go together (before any file is read)."""
    if attack != NONE and attack not in catalogue.names():
        raise SettingError(f"unknown attack {attack!r}; choose one of {', '.join(catalogue.names())}")
    if attack == NONE:
        given = (
            ["--attackers"] * bool(attackers)
            + ["--knowledge"] * (knowledge is not None)
            + [f"--set {PREFIX}{p}" for p in params]
        )
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
    """The job's attack, checked (module docstring); None for a job without attack (or with K = 0).

    ``graph`` is the peer-to-peer communication graph (site -> out-neighbours) of topology
    ``graph_topology``; None for a star job.
    """
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
    try:
        spec = AttackSpec(attack, knowledge or PARTIAL, tuple(names), params)
    except ValueError as exc:
        raise SettingError(str(exc)) from None
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
        try:  # what the attack cannot run against this method, in the words the components would use
            check_adaptive(spec, method)
            if topology == "star" and attack != LF:
                check_spec(spec)
        except ValueError as exc:
            raise SettingError(str(exc)) from None
    if spec.knowledge == FULL and topology == "p2p" and graph is not None and graph_topology != "none":
        check_full_knowledge(graph, names, graph_topology)
    return spec if names else None


def check_reparametrisation(spec: AttackSpec, topology: str, settings: dict) -> None:
    """Refuse a reparametrisation the job cannot run: per-receiver crafting in the star topology
    (its one receiver is the server), a network that declares no exact symmetry, and rescaling a network
    none of whose units admits it."""
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
    """Refuse full knowledge when an attacker receives no benign site's model in ``graph``."""
    senders = in_neighbours(graph)
    for site in attackers:
        if not [s for s in senders.get(site, []) if s not in attackers]:
            heard = ", ".join(senders.get(site, [])) or "nobody"
            raise SettingError(
                f"--knowledge full: attacker {site} receives no benign site's model on the {topology} topology "
                f"(it hears from {heard}), so it cannot know benign updates: use --knowledge partial, fewer "
                "--attackers, or a topology in "
                "which every attacker has a benign in-neighbour (e.g. --set topology=full)"
            )


def job_suffix(spec: AttackSpec) -> str:
    """``_<kind><K>``, with ``_full`` appended for full knowledge."""
    return f"_{spec.kind}{len(spec.attackers)}" + ("_full" if spec.knowledge == FULL else "")


def component(spec: AttackSpec, seed: int, cid: str, path: str, model: dict | None = None) -> dict:
    args = {
        "kind": spec.kind,
        "knowledge": spec.knowledge,
        "attackers": list(spec.attackers),
        "params": dict(spec.params),
        "seed": seed,
    }
    return {"id": cid, "path": path, "args": {**args, **(model or {})}}


def _with_executor_args(client: dict, **args) -> dict:
    client = copy.deepcopy(client)
    for entry in client["executors"]:
        entry["executor"].setdefault("args", {}).update(args)
    return client


def wire(files: dict, topology: str, spec: AttackSpec, seed: int, settings: dict | None = None) -> list[str]:
    """Add the attack to the job ``files`` (module docstring); return the sites running ``app_faulty``
    (none for a star attack other than lf, which lives on the server). The server's adversary of a
    reparametrisation also gets the job's ``model`` and ``model_args`` from ``settings``."""
    if spec.kind == LF:
        faulty = _with_executor_args(files[CLIENT], flip_labels=True)
    elif topology == "p2p":
        faulty = _with_executor_args(files[CLIENT], attack_id=ATTACK_ID)
        faulty.setdefault("components", []).append(component(spec, seed, ATTACK_ID, PEER_ATTACKER))
    else:
        server = copy.deepcopy(files[SERVER])
        model = (
            {"model": settings["model"], "model_args": settings.get("model_args") or {}}
            if spec.kind in REPARAMETRISATIONS
            else None
        )
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
    """The ``attack_<param>`` settings of ``attack`` (none without one); with ``method``, those
    its job takes (the adaptive attack takes what the method's declaration of it says)."""
    declared = adaptive_target(method) if method in registry.methods() else None
    known = attack in catalogue.names()
    params = declared.params if attack == ADAPTIVE and declared is not None else params_of(attack) if known else ()
    return {PREFIX + p for p in params}


def takes_attack(method: str, attack: str, knowledge: str, attackers: int) -> bool:
    """Whether a job of ``method`` with ``attack`` under ``knowledge`` by ``attackers`` (>= 1)
    sites is made: the checks of :func:`attack_spec` that do not depend on the dataset."""
    return not why_not(method, attack, knowledge, attackers)


def why_not(method: str, attack: str, knowledge: str, attackers: int) -> str:
    """Why no job of ``method`` with ``attack`` under ``knowledge`` by ``attackers`` (>= 1) sites is
    made, in the words of the check that refuses it; "" when one is made."""
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
    """Whether any attack flag was given."""
    return any(v is not None for v in (args.attack, args.attackers, args.knowledge))
