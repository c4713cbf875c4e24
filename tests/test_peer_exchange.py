"""What a peer sends can get only that peer refused: checks on arrival, bounded buffers, neighbours
that stopped sending are no longer waited for, and are taken back when they return."""

import time

import numpy as np
from nvflare.apis.fl_constant import ReturnCode

from lightyear.flare.peer_exchange import PeerExchange
from flare_fakes import model_message

REF = {"w": np.zeros((2, 2), dtype=np.float32), "n": np.array(3, dtype=np.int64)}
PEERS = ["site-2", "site-3", "site-4"]


def exchange(deadline=0.3, max_missed=2, rounds=10):
    logs = []
    ex = PeerExchange(PEERS, PEERS, rounds, deadline, 5.0, max_missed, 1e6, lambda level, msg: logs.append((level, msg)))
    ex.reference = REF
    ex.logs = logs
    return ex


def model(value=1.0):
    return {"w": np.full((2, 2), value, dtype=np.float32), "n": np.array(7, dtype=np.int64)}


def test_hostile_models_are_rejected_on_arrival_with_a_reason():
    ex = exchange()
    assert ex.on_model(model_message("site-2", 0, {0: np.zeros(1), "w": np.zeros((2, 2))})).get_return_code() == ReturnCode.OK
    assert ex.on_model(model_message("site-3", 0, {"w": np.full((2, 2), 1e300), "n": np.array(1)})).get_return_code() == ReturnCode.OK
    assert ex.on_model(model_message("site-4", 0, "not a model")).get_return_code() == ReturnCode.OK
    inbox = ex.collect(0, abort=lambda: False)
    assert inbox.valid == {}
    assert "parameter names must be strings" in inbox.rejected["site-2"]
    assert "not finite in float32" in inbox.rejected["site-3"]
    assert "expected a mapping" in inbox.rejected["site-4"]


def test_strangers_wrong_rounds_and_duplicates_are_not_kept():
    ex = exchange()
    assert ex.on_model(model_message("site-9", 0, model())).get_return_code() == ReturnCode.BAD_REQUEST_DATA
    ex.on_model(model_message("site-2", 0, model(1.0)))
    ex.on_model(model_message("site-2", 0, model(5.0)))  # a second model for the same round: the first stays
    ex.on_model(model_message("site-3", 10**12, model()))
    ex.on_model(model_message("site-3", True, model()))
    ex.on_model(model_message("site-4", 7, model()))
    assert ex.buffer.models_held() == 1
    inbox = ex.collect(0, abort=lambda: False)
    np.testing.assert_array_equal(inbox.valid["site-2"]["w"], np.ones((2, 2)))


def test_valid_models_are_cast_to_the_own_dtype():
    ex = exchange()
    ex.on_model(model_message("site-2", 0, {"w": np.full((2, 2), 2.0, dtype=np.float64), "n": np.array(1)}))
    inbox = ex.collect(0, abort=lambda: False)
    assert inbox.valid["site-2"]["w"].dtype == np.float32


def test_a_neighbour_that_missed_k_rounds_is_no_longer_waited_for_but_taken_back():
    ex = exchange(deadline=0.4, max_missed=2)
    timings = []
    for round_num in range(4):
        ex.on_model(model_message("site-2", round_num, model()))
        ex.on_model(model_message("site-3", round_num, model()))
        if round_num == 3:
            ex.on_model(model_message("site-4", round_num, model()))  # site-4 comes back
        start = time.monotonic()
        inbox = ex.collect(round_num, abort=lambda: False)
        timings.append(time.monotonic() - start)
        ex.release(round_num)
        if round_num < 2:
            assert inbox.late == ["site-4"]
        if round_num == 2:
            assert inbox.late == [] and inbox.not_waited_for == ["site-4"]
    assert timings[0] >= 0.35 and timings[1] >= 0.35  # waited out the deadline twice
    assert timings[2] < 0.2  # then no longer
    assert sorted(inbox.valid) == PEERS  # round 3: site-4's model is taken again
    assert ex.missed["site-4"] == 0
