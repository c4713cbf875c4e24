"""The peer-to-peer baselines' site executors on hand-made cases (fake engine, fake runtime, no FLARE run)."""

import json

import numpy as np
import pytest
from nvflare.apis.signal import Signal

from lightyear.p2p.methods.balance import BalanceExecutor
from lightyear.p2p.methods.defta import DeftaExecutor
from lightyear.p2p.methods.lightyear import LightyearExecutor
from lightyear.p2p.methods.p2p_fedavg import P2PFedAvgExecutor
from lightyear.p2p.methods.scclip import ScclipExecutor
from lightyear.p2p.site.checkpoint import SiteCheckpoint, load_site_checkpoint, save_site_checkpoint
from lightyear.p2p.site.sampling import RoundSampling

from flare_fakes import context
from p2p_fakes import FAST, FULL3, FakeEngine, FakeRuntime, deliver, wire  # noqa: F401


# ---------------------------------------------------------------------------- settings
@pytest.mark.parametrize(
    "cls, kwargs, name",
    [
        (BalanceExecutor, {"gamma": 0}, "gamma"),
        (BalanceExecutor, {"kappa": -1}, "kappa"),
        (BalanceExecutor, {"alpha": 1.5}, "alpha"),
        (ScclipExecutor, {"radius": -1.0}, "radius"),
        (ScclipExecutor, {"remove": 1.5}, "remove"),
        (DeftaExecutor, {"sample_size": 0}, "sample_size"),
        (DeftaExecutor, {"positive_slope": 2}, "positive_slope"),
        (DeftaExecutor, {"damage_ratio": 0.5}, "damage_ratio"),
        (DeftaExecutor, {"asynchronous": "yes"}, "asynchronous"),
        (DeftaExecutor, {"async_wait": 0.1}, "async_wait"),
        (DeftaExecutor, {"max_size_ratio": 0.5}, "max_size_ratio"),
        (P2PFedAvgExecutor, {"sample_neighbours": 0}, "sample_neighbours"),
        (LightyearExecutor, {"sample_neighbours": 1.5}, "sample_neighbours"),
        (P2PFedAvgExecutor, {"peer_deadline": 0}, "peer_deadline"),
    ],
)
def test_bad_settings_stop_the_job_at_construction(cls, kwargs, name):
    with pytest.raises(ValueError, match=name):
        cls(train_args=FAST, **kwargs)


# ---------------------------------------------------------------------------- p2p_fedavg, balance, scclip
@pytest.mark.parametrize("cls", [P2PFedAvgExecutor, BalanceExecutor, ScclipExecutor, DeftaExecutor])
@pytest.mark.parametrize("bound", [None, 1e7])
def test_a_model_within_the_sites_own_max_abs_weight_never_fails_the_round(cls, bound):
    # values of 2e6 pass this site's arrival check (no bound, or 1e7); the rule must not bound them
    # again with the default 1e6 and fail the site's round on a model the site accepted
    ex = wire(cls(train_args=FAST, max_abs_weight=bound), FULL3)
    deliver(ex, "site-2", 0, 1.0)
    deliver(ex, "site-3", 0, 2e6)
    row = ex._round(0, context(FakeEngine()), Signal())
    assert np.isfinite(ex.runtime.w["w"]).all()
    assert "site-3" not in str(row.get("rejected", ""))


def test_p2p_fedavg_averages_the_own_model_with_every_received_one():
    ex = wire(P2PFedAvgExecutor(train_args=FAST), FULL3)
    deliver(ex, "site-2", 0, 3.0)
    deliver(ex, "site-3", 0, 6.0)
    row = ex._round(0, context(FakeEngine()), Signal())
    assert row["selected"] == ["site-2", "site-3"]
    np.testing.assert_allclose(ex.runtime.w["w"], (0.9 + 3.0 + 6.0) / 3, rtol=1e-6)  # own 1.0 trained to 0.9


def test_balance_records_accepted_peers_and_distances_with_lambda_t_over_T():
    ex = wire(BalanceExecutor(train_args=FAST), FULL3, rounds=4)
    deliver(ex, "site-2", 0, 1.0)  # 0.2 from the own 0.9 in each of 4 entries: distance 0.2
    deliver(ex, "site-3", 0, -0.9)  # sign flipped: distance 3.6
    row = ex._round(0, context(FakeEngine()), Signal())
    # radius at t = 0: 0.3 * exp(0) * ||own|| = 0.3 * 1.8 = 0.54
    assert row["radius"] == pytest.approx(0.54, rel=1e-5) and row["lambda"] == 0.0
    assert row["selected"] == ["site-2"] and row["site-2_accepted"] == 1 and row["site-3_accepted"] == 0
    assert row["site-2_distance"] == pytest.approx(0.2, rel=1e-5) and row["site-3_distance"] == pytest.approx(
        3.6, rel=1e-5
    )
    np.testing.assert_allclose(ex.runtime.w["w"], 0.5 * 0.9 + 0.5 * 1.0, rtol=1e-6)
    ex.exchange.release(0)
    deliver(ex, "site-2", 1, 0.95)
    row = ex._round(1, context(FakeEngine()), Signal())
    assert row["lambda"] == 0.25  # T is the run's rounds


def test_scclip_clips_the_far_peer_to_the_second_largest_distance():
    graph = {"site-1": ["site-2"], "site-2": ["site-3"], "site-3": ["site-1", "site-4"], "site-4": ["site-1"]}
    graph["site-2"] = ["site-1", "site-3"]
    ex = wire(ScclipExecutor(train_args=FAST), graph)
    assert ex.in_neighbours == ["site-2", "site-3", "site-4"]
    deliver(ex, "site-2", 0, 1.4)  # differences to the own 0.9: 0.5, 1.0 and 10 per entry
    deliver(ex, "site-3", 0, 1.9)
    deliver(ex, "site-4", 0, 10.9)
    row = ex._round(0, context(FakeEngine()), Signal())
    assert row["radius"] == pytest.approx(2.0, rel=1e-5)  # second-largest ||difference||: 1.0 * sqrt(4)
    assert row["clipped"] == ["site-4"] and row["site-4_scale"] == pytest.approx(0.1, rel=1e-5)
    np.testing.assert_allclose(ex.runtime.w["w"], 0.9 + (0.5 + 1.0 + 1.0) / 3, rtol=1e-5)


@pytest.mark.parametrize("cls", [P2PFedAvgExecutor, BalanceExecutor, ScclipExecutor, DeftaExecutor])
def test_a_site_with_no_neighbours_keeps_its_own_model(cls):
    ex = wire(cls(train_args=FAST), {"site-1": []})  # the 'none' topology
    engine = FakeEngine()
    row = ex._round(0, context(engine), Signal())
    assert row["selected"] == [] and row["senders"] == [] and engine.sent == []
    np.testing.assert_allclose(ex.runtime.w["w"], 0.9, rtol=1e-6)  # trained once, nothing mixed in


# ---------------------------------------------------------------------------- receiving
def test_every_model_message_lets_the_site_give_its_freed_heap_back():
    """Once a model message is handled, whether the model was kept, refused or its handling failed, the site checks
    whether its memory grew enough to trim it."""
    from lightyear.flare.process_memory import HeapTrimmer

    resident, trims = [100], []
    ex = wire(P2PFedAvgExecutor(train_args=FAST), FULL3)
    ex.heap = HeapTrimmer(10, trim=lambda: trims.append(True) or True, resident=lambda: resident[0])
    deliver(ex, "site-2", 0, 1.0)  # kept; the first check takes the floor
    resident[0] = 110
    deliver(ex, "site-9", 0, 1.0)  # not an in-neighbour, refused
    assert len(trims) == 1 and ex.exchange.buffer.models_held() == 1

    def fails(request, topic):
        raise RuntimeError("decoder broke")

    ex.exchange.on_model = fails
    resident[0] = 120
    deliver(ex, "site-3", 0, 1.0)
    assert len(trims) == 2


def test_a_round_that_leaves_the_sites_memory_where_it_was_gives_nothing_back(tmp_path):
    """What a round freed, the next one reuses: a site whose memory did not grow trims nothing at a round's end."""
    from nvflare.apis.fl_constant import ReturnCode
    from nvflare.apis.shareable import Shareable

    from lightyear.flare import constants as C
    from lightyear.flare.process_memory import HeapTrimmer

    from flare_fakes import SiteEngine

    trims = []
    ex = P2PFedAvgExecutor(train_args=FAST, num_threads=1, compute_slots=0)
    ex.site, ex.peer_deadline = "site-1", 0.1  # no peer sends: each round waits this long
    ex.heap = HeapTrimmer(10, trim=lambda: trims.append(True) or True, resident=lambda: 100)
    task = Shareable()
    task[C.KEY_CONFIG] = {"rounds": 2, "seed": 0, "neighbours": FULL3}
    run_dir = tmp_path / "site-1" / "job"
    run_dir.mkdir(parents=True)
    reply = ex.execute(C.P2P_RUN_TASK, task, context(SiteEngine(str(run_dir))), Signal())
    assert reply.get_return_code() == ReturnCode.OK and ex.last_round == 1
    assert trims == []


# ---------------------------------------------------------------------------- sampling in a round
def test_a_sampled_round_sends_to_and_waits_for_only_the_sampled_edges():
    sites = [f"site-{i}" for i in range(1, 7)]
    graph = {s: [t for t in sites if t != s] for s in sites}
    ex = wire(P2PFedAvgExecutor(train_args=FAST, sample_neighbours=2), graph, deadline=3.0)
    engine = FakeEngine()
    peers = RoundSampling(graph, 0, 2)  # what every other site computes on its own
    for round_num in range(3):
        senders = peers.senders("site-1", round_num)
        assert len(senders) == 2
        for s in senders:
            deliver(ex, s, round_num, 0.5)
        row = ex._round(round_num, context(engine), Signal())
        ex.exchange.release(round_num)
        assert row["wait_s"] < 1.0  # the 3 unsampled in-neighbours are not waited for
        assert row["senders"] == senders and row["selected"] == senders and row["late"] == []
        expected = sorted(t for t in graph["site-1"] if "site-1" in peers.senders(t, round_num))
        assert engine.sent[-1][0] == expected if expected else engine.sent[-1][1] != round_num
        assert row["receivers"] == expected


# ---------------------------------------------------------------------------- DeFTA
def test_defta_weights_use_claimed_sizes_and_out_degrees():
    graph = {"site-1": ["site-2"], "site-2": ["site-1", "site-3"], "site-3": ["site-1", "site-2"]}
    ex = wire(DeftaExecutor(train_args=FAST, sample_size=2), graph, runtime=FakeRuntime(train=100))
    engine = FakeEngine()
    deliver(ex, "site-2", 0, 3.0, num_samples=300)
    deliver(ex, "site-3", 0, 6.0, num_samples=5000)  # capped at 10 x 100
    row = ex._round(0, context(engine), Signal())
    assert engine.sent[0][2] == 100  # the own size travels with the model
    # |D|/d: own 100 / (1 + 1) = 50, site-2 300 / (2 + 1) = 100, site-3 1000 / 3 = 333.3
    total = 50 + 100 + 1000 / 3
    assert row["own_weight"] == pytest.approx(50 / total)
    assert row["site-2_p"] == pytest.approx(100 / total) and row["site-3_p"] == pytest.approx((1000 / 3) / total)
    np.testing.assert_allclose(ex.runtime.w["w"], (50 * 0.9 + 100 * 3.0 + 1000 / 3 * 6.0) / total, rtol=1e-5)


def run_defta_rounds(ex, rounds, good=0.0, bad=8.0, start=0):
    """site-2 sends models near 0 (they lower site-1's loss), site-3 far ones (they raise it)."""
    rows = []
    for r in range(start, start + rounds):
        deliver(ex, "site-2", r, good, num_samples=100)
        deliver(ex, "site-3", r, bad, num_samples=100)
        rows.append(ex._round(r, context(FakeEngine()), Signal()))
        ex.exchange.release(r)
    return rows


def test_defta_trust_falls_for_a_peer_whose_models_raise_the_loss():
    ex = wire(DeftaExecutor(train_args=FAST, sample_size=1), FULL3)
    rows = run_defta_rounds(ex, 10)
    assert rows[0]["sampled"] == ["site-2", "site-3"]  # S^0 = N_i
    assert all(len(r["sampled"]) == 1 for r in rows[1:])
    # round 1's loss rose after aggregating both: both charged alike; from then on the sample tells them apart
    assert rows[1]["site-2_trust"] == rows[1]["site-3_trust"] < 0
    assert all(r["site-3_theta"] < 0.1 for r in rows[2:])
    assert sum(r["sampled"] == ["site-3"] for r in rows[2:]) <= 1  # drawn with probability ~0.05
    scores = ex.trust.scores
    assert scores["site-3"] < 0 < scores["site-2"]
    assert rows[-1]["site-2_theta"] > 0.9 and rows[-1]["train_loss"] < 0.1 * rows[1]["train_loss"]


def test_defta_trust_state_survives_a_restart(tmp_path):
    ex = wire(DeftaExecutor(train_args=FAST, sample_size=1), FULL3)
    run_defta_rounds(ex, 4)
    state, arrays = ex.method_state()
    save_site_checkpoint(
        str(tmp_path), SiteCheckpoint(3, ex.runtime.get_weights(), {}, json.loads(json.dumps(state)), arrays)
    )
    ckpt = load_site_checkpoint(str(tmp_path))

    again = wire(DeftaExecutor(train_args=FAST, sample_size=1), FULL3, start=4)
    again.runtime.set_weights(ckpt.weights)
    again.restore_method_state(ckpt.state, ckpt.arrays)
    assert again.trust.to_dict() == ex.trust.to_dict()
    assert (
        again.last_used == pytest.approx(ex.last_used) and again.last_used
    )  # round 3's aggregation is judged in round 4
    np.testing.assert_array_equal(again.backup["w"], ex.backup["w"])
    # both continue identically
    later = run_defta_rounds(ex, 3, start=4)
    resumed = run_defta_rounds(again, 3, start=4)
    assert [r["sampled"] for r in resumed] == [r["sampled"] for r in later]
    assert again.trust.to_dict() == ex.trust.to_dict()

    fresh = wire(DeftaExecutor(train_args=FAST, sample_size=1), FULL3, start=4)  # without the state: trust starts over
    fresh.runtime.set_weights(ckpt.weights)
    run_defta_rounds(fresh, 1, start=4)
    assert fresh.trust.scores["site-3"] > ex.trust.scores["site-3"]


@pytest.mark.parametrize("backup", [{"w": np.array(1.0, np.float32)}, {"w": np.full(4, np.nan, np.float32)}])
def test_defta_refuses_a_checkpointed_backup_that_is_no_model_of_the_site(backup):
    """The backup replaces the model after a damaged round: a 0-d or NaN one would poison it."""
    ex = wire(DeftaExecutor(train_args=FAST, sample_size=1), FULL3)
    arrays = {"backup/" + k: v for k, v in dict(ex.runtime.get_weights(), **backup).items()}
    with pytest.raises(ValueError, match="backup model does not fit this site's model"):
        ex.restore_method_state({}, arrays)
    assert ex.backup is None


def test_defta_restores_the_backup_after_a_damaged_model_and_cuts_its_peers_off():
    ex = wire(DeftaExecutor(train_args=FAST, sample_size=2), FULL3)
    run_defta_rounds(ex, 2, good=0.0, bad=0.5)
    deliver(ex, "site-2", 2, 0.0)
    deliver(ex, "site-3", 2, 1e5)  # within the exchange's bounds, but the aggregate diverges
    row = ex._round(2, context(FakeEngine()), Signal())
    assert row["damaged"] == 0  # the damage shows in the next training
    backup = {k: v.copy() for k, v in ex.backup.items()}
    trained = ex.runtime.trained
    deliver(ex, "site-2", 3, 0.0)
    deliver(ex, "site-3", 3, 0.0)
    ex.exchange.release(2)
    row = ex._round(3, context(FakeEngine()), Signal())
    assert row["damaged"] == 1 and row["loss_trust"] == "inf"
    assert ex.runtime.trained == trained + 2  # restored from the backup and trained once more
    assert row["blocked"] == ["site-2", "site-3"] and row["site-3_trust"] == "-inf"
    assert row["selected"] == [] and row["sampled"] == []
    np.testing.assert_allclose(ex.runtime.w["w"], backup["w"] * 0.9, rtol=1e-6)  # the backup after one more step


def test_async_defta_takes_the_newest_model_it_holds_from_each_peer():
    ex = DeftaExecutor(train_args=FAST, sample_size=2, asynchronous=True)
    ex.async_wait = 0.3  # below the 1 s a job may set: keeps the test fast
    wire(ex, FULL3)
    deliver(ex, "site-2", 0, 2.0, num_samples=100)
    deliver(ex, "site-3", 0, 4.0, num_samples=100)
    row = ex._round(0, context(FakeEngine()), Signal())
    assert row["site-2_staleness"] == 0 and row["selected"] == ["site-2", "site-3"]
    deliver(ex, "site-3", 1, 5.0, num_samples=100)
    deliver(ex, "site-3", 4, 6.0, num_samples=100)  # a fast peer, already at round 4
    deliver(ex, "site-3", 2, 9.0, num_samples=100)  # older than its newest: refused
    before = ex.runtime.get_weights()["w"] * 0.9
    row = ex._round(2, context(FakeEngine()), Signal())  # site-2 went quiet after round 0
    assert row["wait_s"] < 1.0 and row["late"] == ["site-2"]
    assert row["site-2_staleness"] == 2 and row["site-3_staleness"] == -2
    p2, p3, own = row["site-2_p"], row["site-3_p"], row["own_weight"]
    np.testing.assert_allclose(ex.runtime.w["w"], own * before + p2 * 2.0 + p3 * 6.0, rtol=1e-5)
    assert ex.exchange.latest.models_held() == 2


def test_defta_records_the_models_it_received_so_its_exclusions_can_be_scored():
    """``received`` (with ``rejected``) is what the detection metrics count as evaluated; a received
    peer left out of the trust-weighted sample is labelled malicious (lightyear.experiments.detection)."""
    from lightyear.p2p.methods.defta import defta_labels

    ex = wire(DeftaExecutor(train_args=FAST, sample_size=1), FULL3)
    rows = run_defta_rounds(ex, 6)
    assert all(r["received"] == ["site-2", "site-3"] for r in rows)
    assert defta_labels(rows[0], ["site-2", "site-3"]).flagged == set()  # round 0 aggregates every peer
    for row in rows[1:]:
        labels = defta_labels(row, ["site-2", "site-3"])
        assert labels.evaluated == {"site-2", "site-3"} and labels.flagged == {"site-2", "site-3"} - set(row["sampled"])
    assert (
        sum(defta_labels(r, []).flagged == {"site-3"} for r in rows[2:]) >= 3
    )  # the far peer is left out once trust has fallen
