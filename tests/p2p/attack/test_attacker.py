"""Attacking peers in a P2P round (fake engine and runtimes, no FLARE run): what an attacker sends,
what it knows, label flipping, its settings, a whole run and the reparametrisations (the side
channel: test_collusion.py; the adaptive attack: test_adaptive_attack.py)."""

import csv

import numpy as np
import pytest
from nvflare.apis.event_type import EventType
from nvflare.apis.fl_constant import FLContextKey, ReturnCode
from nvflare.apis.shareable import Shareable
from nvflare.apis.signal import Signal

from lightyear.flare import constants as C
from lightyear.flare.malfunction_filter import MalfunctionFilter
from lightyear.p2p.attack.attacker import PeerAttacker
from lightyear.p2p.methods.defta import DeftaExecutor
from lightyear.p2p.methods.lightyear import LightyearExecutor
from lightyear.p2p.methods.p2p_fedavg import P2PFedAvgExecutor

from flare_fakes import SiteEngine, context
from p2p_fakes import (
    FAST,
    FakeRuntime,
    attacking,
    collude,
    deliver,
    model,
    run_round,
    sending_run,
    sent,
    site4,
    wire,
)


# ---------------------------------------------------------------------------- what an attacker sends
def test_an_attacker_sends_round_start_plus_its_crafted_update_and_keeps_its_own_model_honest():
    ex = attacking(site4(), "sf")
    for peer, value in (("site-1", 0.5), ("site-2", 0.7), ("site-3", 1.3)):
        deliver(ex, peer, 0, value)
    row, engine = run_round(ex)
    [(targets, request)] = sent(engine)
    assert sorted(targets) == ["site-1", "site-2", "site-3"]
    # round start 1.0, honest 0.9 (update -0.1): sign flipping sends 1.0 + 0.1
    np.testing.assert_allclose(request[C.KEY_WEIGHTS]["w"], 1.1, rtol=1e-6)
    # the own model is the average of the honest 0.9 with what it received, never of 1.1
    np.testing.assert_allclose(ex.runtime.w["w"], (0.9 + 0.5 + 0.7 + 1.3) / 4, rtol=1e-6)
    assert row["malfunction"] == "sf" and row["attack"] == "sf" and row["attack_known"] == 1
    assert row["model_bytes"] > 0 and sent(engine, C.TOPIC_COLLUDE) == []  # sign flipping needs nobody's update


def test_partial_knowledge_pools_the_other_attackers_honest_updates():
    ex = attacking(site4(), "lie", params={"z": 0.5})
    assert collude(ex, "site-3", 0, model(0.5)).get_return_code() == ReturnCode.OK
    for peer in ("site-1", "site-2", "site-3"):
        deliver(ex, peer, 0, 1.0)
    row, engine = run_round(ex)
    # updates against site-4's start 1.0: own -0.1, site-3's -0.5; mean -0.3, sample std 0.2 sqrt2
    np.testing.assert_allclose(sent(engine)[0][1][C.KEY_WEIGHTS]["w"], 1.0 - 0.3 - 0.5 * 0.2 * np.sqrt(2), rtol=1e-6)
    [(targets, request)] = sent(engine, C.TOPIC_COLLUDE)  # its honest model went to the other attacker
    assert targets == ["site-3"] and request[C.KEY_ROUND] == 0
    np.testing.assert_allclose(request[C.KEY_WEIGHTS]["w"], 0.9, rtol=1e-6)
    assert row["attack_colluders"] == ["site-3"] and row["attack_benign"] == [] and row["attack_known"] == 2
    # site-1 and site-2 hear both attackers (n 4, m 2); site-3, an attacker, gets the same model
    assert row["attack_z"] == 0.5 and (row["attack_n"], row["attack_m"]) == ("4", "2")
    assert row["attack_wait_s"] < 0.5  # everything it needed had arrived


def test_full_knowledge_adds_the_benign_in_neighbours_models_and_still_aggregates_them():
    ex = attacking(site4(), "lie", "full", params={"z": 0.5})
    collude(ex, "site-3", 0, model(0.5))
    deliver(ex, "site-1", 0, 0.7)
    deliver(ex, "site-2", 0, 0.8)
    deliver(ex, "site-3", 0, 0.6)  # an attacker's model on the exchange is no benign knowledge
    row, engine = run_round(ex)
    known = np.array([-0.1, -0.5, -0.3, -0.2])  # own, site-3 (collusion), site-1, site-2
    np.testing.assert_allclose(
        sent(engine)[0][1][C.KEY_WEIGHTS]["w"], 1.0 + known.mean() - 0.5 * known.std(ddof=1), rtol=1e-5
    )
    assert row["attack_benign"] == ["site-1", "site-2"] and row["attack_known"] == 4
    assert row["selected"] == ["site-1", "site-2", "site-3"]  # the peeked models were left for the aggregation
    np.testing.assert_allclose(ex.runtime.w["w"], (0.9 + 0.7 + 0.8 + 0.6) / 4, rtol=1e-6)


# ---------------------------------------------------------------------------- label flipping
@pytest.mark.parametrize("cls", [P2PFedAvgExecutor, DeftaExecutor])
def test_flip_labels_reaches_every_round_of_training(cls):
    ex = wire(cls(train_args=FAST, flip_labels=True), {"site-1": []})
    for r in range(2):
        row, _ = run_round(ex, r)
        ex.exchange.release(r)
        assert row["malfunction"] == "lf"
    assert ex.runtime.flipped and all(ex.runtime.flipped)
    honest = wire(cls(train_args=FAST), {"site-1": []}, runtime=FakeRuntime())
    run_round(honest)
    assert honest.runtime.flipped == [False] * len(honest.runtime.flipped)


# ---------------------------------------------------------------------------- settings
@pytest.mark.parametrize(
    "args, message",
    [
        (("lf", "partial", ["site-4"]), "flip_labels"),
        (("poison", "partial", ["site-4"]), "unknown attack"),
        (("sf", "most", ["site-4"]), "knowledge"),
        (("sf", "partial", "site-4"), "attackers"),
        (("sf", "partial", ["site-4", "site-4"]), "attackers"),
        (("sf", "partial", []), "attackers"),
        (("minmax", "partial", ["site-4"], {"gamma": 1.0}), "attack_gamma"),
        (("adaptive", "partial", ["site-4"], {"max_evaluations": 0}), "attack_max_evaluations"),
    ],
)
def test_bad_attack_settings_are_refused_when_the_component_is_built(args, message):
    with pytest.raises(ValueError, match=message):
        PeerAttacker(*args)


def test_bad_seed_and_executor_arguments_are_refused():
    with pytest.raises(ValueError, match="seed"):
        PeerAttacker("sf", "partial", ["site-4"], seed="x")
    with pytest.raises(ValueError, match="attack_id"):
        P2PFedAvgExecutor(train_args=FAST, attack_id=3)
    with pytest.raises(ValueError, match="flip_labels"):
        P2PFedAvgExecutor(train_args=FAST, flip_labels="yes")
    with pytest.raises(ValueError, match="not among its attackers"):
        PeerAttacker("sf", "partial", ["site-3"]).begin_run(sending_run(site4()))


class StartEngine:
    """What a site's executor uses of FLARE's engine at START_RUN: components, aux handlers, events."""

    def __init__(self, components):
        self.components, self.handlers, self.panics = components, {}, []

    def get_component(self, cid):
        return self.components.get(cid)

    def register_aux_message_handler(self, topic, message_handle_func):
        self.handlers[topic] = message_handle_func

    def fire_event(self, event_type, fl_ctx):
        if event_type == EventType.FATAL_SYSTEM_ERROR:
            self.panics.append(fl_ctx.get_prop(FLContextKey.EVENT_DATA))


@pytest.mark.parametrize(
    "cls, components, message",
    [
        (P2PFedAvgExecutor, {}, "names no component"),
        (P2PFedAvgExecutor, {"attack": MalfunctionFilter("sfa")}, "names a MalfunctionFilter"),
        (P2PFedAvgExecutor, {"attack": PeerAttacker("adaptive", "partial", ["site-4"])}, "declares none"),
        (LightyearExecutor, {"attack": PeerAttacker("adaptive", "partial", ["site-4"])}, None),
        (P2PFedAvgExecutor, {"attack": PeerAttacker("minmax", "full", ["site-4"])}, None),
    ],
)
def test_attack_id_is_checked_when_the_run_starts(cls, components, message):
    engine = StartEngine(components)
    ex = cls(train_args=FAST, attack_id="attack")
    ctx = context(engine, "site-4")
    ex.handle_event(EventType.START_RUN, ctx)
    if message is None:
        assert engine.panics == [] and ex.attack is components["attack"]
        components["attack"].handle_event(EventType.START_RUN, ctx)
        assert C.TOPIC_COLLUDE in engine.handlers  # the component answers the other attackers
    else:
        assert len(engine.panics) == 1 and message in engine.panics[0] and ex.attack is None


# ---------------------------------------------------------------------------- a whole run
class RunEngine(SiteEngine):
    """A site's engine for a whole run: its components, aux handlers, and neighbours answering OK."""

    def __init__(self, root, components):
        super().__init__(root)
        self.components, self.handlers = components, {}

    def get_component(self, cid):
        return self.components.get(cid)

    def register_aux_message_handler(self, topic, message_handle_func):
        self.handlers[topic] = message_handle_func


@pytest.mark.parametrize("kind", ["sf", "lf"])
def test_a_whole_run_records_the_attack_in_every_row_and_in_the_sites_result(tmp_path, kind):
    components = {} if kind == "lf" else {"attack": PeerAttacker(kind, "partial", ["site-1"])}
    args = {"flip_labels": True} if kind == "lf" else {"attack_id": "attack"}
    ex = P2PFedAvgExecutor(train_args=FAST, num_threads=1, compute_slots=0, **args)
    ex.peer_deadline = 0.3  # below the 1 s a job may set: keeps the test fast
    engine = RunEngine(str(tmp_path), components)
    ctx = context(engine, "site-1")
    for component in [ex, *components.values()]:
        component.handle_event(EventType.START_RUN, ctx)
    task = Shareable()
    task[C.KEY_CONFIG] = {"rounds": 2, "seed": 0, "neighbours": {"site-1": ["site-2"], "site-2": ["site-1"]}}
    reply = ex.execute(C.P2P_RUN_TASK, task, ctx, Signal())
    assert reply.get_return_code() == ReturnCode.OK, reply.get(C.KEY_ERROR)
    assert reply[C.KEY_RESULT]["malfunction"] == kind
    with open(tmp_path / "rounds.csv", newline="") as f:
        rows = list(csv.DictReader(f))
    assert [r["malfunction"] for r in rows] == [kind, kind]
    assert all(r.get("attack", "") == ("" if kind == "lf" else kind) for r in rows)
    assert C.TOPIC_COLLUDE in engine.handlers or kind == "lf"


# ---------------------------------------------------------------------------- reparametrisations
def reparametrising(kind, knowledge="partial", params=None):
    """site-4 attacking with a reparametrisation of the fake 4-value model: each value is one unit."""
    from lightyear.algorithms.attacks.reparametrise import Slot, UnitGroup

    ex = site4()
    attacker = PeerAttacker(kind, knowledge, ["site-3", "site-4"], params or {}, seed=0)
    ex.attack, ex.attack_id = attacker, "attack"
    groups = [UnitGroup("w", 4, (Slot("w", 0, 1),))]
    attacker.begin_run(sending_run(ex, symmetries=lambda: groups))
    return ex


def by_target(engine):
    return {target: request[C.KEY_WEIGHTS]["w"] for targets, request in sent(engine) for target in targets}


def test_a_rescaling_attacker_sends_every_receiver_its_own_draw_of_its_honest_model():
    ex = reparametrising("rescale", params={"factor": 10.0})
    row, engine = run_round(ex)
    models = by_target(engine)
    assert sorted(models) == ["site-1", "site-2", "site-3"] and len(sent(engine)) == 3  # one message each
    for values in models.values():  # the honest model is 0.9 everywhere: each unit x10 or x0.1
        assert all(v == pytest.approx(9.0) or v == pytest.approx(0.09) for v in values)
    assert len({tuple(v) for v in models.values()}) > 1  # different draws for different receivers
    np.testing.assert_allclose(ex.runtime.w["w"], 0.9, rtol=1e-6)  # its own model stays honest
    assert row["attack_transform"] == "rescale" and row["attack_factor"] == 10.0 and row["attack_from_own"] == []
    again, engine2 = run_round(reparametrising("rescale", params={"factor": 10.0}))
    for target, values in by_target(engine2).items():
        np.testing.assert_array_equal(values, models[target])  # drawn from the seed, the round and the receiver


def test_without_per_receiver_every_receiver_gets_the_same_draw_in_one_message():
    ex = reparametrising("rescale", params={"factor": 10.0, "per_receiver": False})
    row, engine = run_round(ex)
    [(targets, request)] = sent(engine)
    assert targets == ["site-1", "site-2", "site-3"]


def test_under_full_knowledge_each_benign_receiver_gets_a_transform_of_its_own_model():
    ex = reparametrising("rescale", "full", params={"factor": 10.0})
    deliver(ex, "site-1", 0, 0.7)
    deliver(ex, "site-2", 0, 0.8)
    row, engine = run_round(ex)
    models = by_target(engine)
    for target, base in (
        ("site-1", 0.7),
        ("site-2", 0.8),
        ("site-3", 0.9),
    ):  # site-3 attacks: no model of its own was read
        assert all(v == pytest.approx(base * 10) or v == pytest.approx(base / 10) for v in models[target]), target
    assert (
        row["attack_from_own"] == ["site-3"]
        and row["attack_benign"] == ["site-1", "site-2"]
        and row["attack_known"] == 2
    )
    assert row["selected"] == ["site-1", "site-2"]  # what it read was left for its own aggregation


# ---------------------------------------------------------------------------- an attack that draws
def test_a_peer_attack_that_draws_gets_a_generator_from_the_jobs_seed_the_round_and_the_attacker(monkeypatch):
    from lightyear.algorithms.attacks import catalogue
    from lightyear.algorithms.attacks.declaration import Attack, attack_rng

    def craft(own_update, known, n, m, rng):
        return own_update + rng.normal(size=own_update.shape), {}

    table = {**catalogue.attacks(), "noisy": Attack("noisy", "noisy", craft=craft, needs_rng=True)}
    monkeypatch.setattr(catalogue, "attacks", lambda: table)
    monkeypatch.setattr(catalogue, "names", lambda: list(table))
    ex = attacking(site4(), "noisy", attackers=("site-4",))
    for peer in ("site-1", "site-2", "site-3"):
        deliver(ex, peer, 2, 1.0)
    row, engine = run_round(ex, round_num=2)
    drawn = attack_rng(0, 2, 0).normal(size=4)  # seed 0, round 2, the first attacker
    honest = np.full(4, 0.9, dtype=np.float64)
    np.testing.assert_allclose(sent(engine)[0][1][C.KEY_WEIGHTS]["w"], 1.0 + (honest - 1.0) + drawn, rtol=1e-6)
