"""An attacker's side channel in a P2P round (fake engine and runtimes, no FLARE run): hostile
collusion messages are refused and the round goes on; a silent colluder costs a bounded wait."""

import time

import numpy as np
import pytest
from nvflare.apis.fl_constant import ReturnCode

from lightyear.flare import constants as C
from lightyear.p2p.attack.attacker import PeerAttacker

from flare_fakes import model_message
from p2p_fakes import attacking, collude, deliver, model, run_round, sent, site4

# ---------------------------------------------------------------------------- hostile collusion messages
BIG = {"w": np.zeros(1 << 19, dtype=np.float32), "n": np.array(5, dtype=np.int64)}


@pytest.mark.parametrize(
    "sender, round_num, weights, code, refused",
    [
        ("site-1", 0, model(0.5), ReturnCode.BAD_REQUEST_DATA, []),  # a benign site is no colluder
        ("site-4", 0, model(0.5), ReturnCode.BAD_REQUEST_DATA, []),  # nor is the attacker itself
        ("site-3", 0, model(np.nan), ReturnCode.OK, ["site-3"]),
        ("site-3", 0, {"w": np.full(3, 0.5, dtype=np.float32), "n": np.array(5)}, ReturnCode.OK, ["site-3"]),
        ("site-3", 0, BIG, ReturnCode.OK, ["site-3"]),  # 2 MiB for a 24-byte model
        ("site-3", 0, "not a model", ReturnCode.OK, ["site-3"]),
        ("site-3", 7, model(0.5), ReturnCode.SERVICE_UNAVAILABLE, []),  # a round far ahead: not kept, sent again
        ("site-3", "0", model(0.5), ReturnCode.OK, []),
    ],
    ids=["benign-sender", "itself", "nan", "wrong-shape", "oversize", "garbage", "wrong-round", "round-string"],
)
def test_a_hostile_collusion_message_is_refused_and_the_round_goes_on(sender, round_num, weights, code, refused):
    logs = []
    ex = attacking(site4(deadline=1.0), "lie", params={"z": 0.5}, logs=logs)
    assert collude(ex, sender, round_num, weights).get_return_code() == code
    for peer in ("site-1", "site-2", "site-3"):
        deliver(ex, peer, 0, 1.0)
    row, engine = run_round(ex)
    assert row["attack_colluders"] == [] and row["attack_refused"] == refused and row["attack_known"] == 1
    # with only its own update, LIE's sigma is 0 and the crafted update is the own one
    np.testing.assert_allclose(sent(engine)[0][1][C.KEY_WEIGHTS]["w"], 0.9, rtol=1e-6)
    assert any(level == "warning" for level, _ in logs) or code == ReturnCode.SERVICE_UNAVAILABLE


def test_a_collusion_message_before_the_run_starts_is_answered_not_ready():
    attacker = PeerAttacker("lie", "partial", ["site-3", "site-4"])
    reply = attacker._on_collude(C.TOPIC_COLLUDE, model_message("site-3", 0, model(0.5)), None)
    assert reply.get_return_code() == ReturnCode.SERVICE_UNAVAILABLE


# ---------------------------------------------------------------------------- bounded waiting
def test_a_silent_colluder_costs_at_most_the_waiting_bound():
    ex = attacking(site4(deadline=4.0), "minmax")  # bound: 0.25 x 4 s
    for peer in ("site-1", "site-2", "site-3"):
        deliver(ex, peer, 0, 1.0)
    t0 = time.monotonic()
    row, _ = run_round(ex)
    assert 0.9 <= row["attack_wait_s"] <= 1.6 and time.monotonic() - t0 < 3.0
    assert row["attack_colluders"] == [] and row["attack_known"] == 1


def test_under_full_knowledge_one_bound_covers_the_colluders_and_the_benign_in_neighbours():
    ex = attacking(site4(deadline=2.0), "ipm", "full")  # bound: 0.5 s for both waits together
    deliver(ex, "site-1", 0, 0.7)  # site-2 and the colluder site-3 stay silent
    row, engine = run_round(ex)
    assert 0.4 <= row["attack_wait_s"] <= 0.9
    assert row["attack_benign"] == ["site-1"] and row["attack_epsilon"] == 4
    np.testing.assert_allclose(
        sent(engine)[0][1][C.KEY_WEIGHTS]["w"], 1.0 - 4 * (0.7 - 1.0), rtol=1e-5
    )  # -n x benign mean
