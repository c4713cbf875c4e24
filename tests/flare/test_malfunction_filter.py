"""The malfunction component corrupts the model in a star result's DXO, and only that."""

import numpy as np
from nvflare.apis.dxo import DataKind, MetaKey, from_shareable
from nvflare.apis.fl_constant import ReturnCode
from nvflare.apis.fl_context import FLContextManager
from nvflare.apis.shareable import make_reply

from lightyear.flare.malfunction_filter import MalfunctionFilter
from lightyear.star.messages import read_result, result_data


def site_context(name="site-3"):
    return FLContextManager(
        engine=None, identity_name=name, job_id="job", public_stickers={}, private_stickers={}
    ).new_context()


def model():
    return {"w": np.array([1.0, -2.0, 3.0], dtype=np.float32), "n": np.array(7, dtype=np.int64)}


def test_sign_flip_on_a_dxo_result_round_trips():
    shareable = result_data(model(), 120, 3, DataKind.WEIGHTS)
    out = MalfunctionFilter(kind="sfa").process(shareable, site_context())
    dxo = from_shareable(out)
    assert dxo.data_kind == DataKind.WEIGHTS
    np.testing.assert_array_equal(dxo.data["w"], [-1.0, 2.0, -3.0])
    assert int(dxo.data["n"]) == 7  # counters are no parameters
    assert dxo.get_meta_prop(MetaKey.NUM_STEPS_CURRENT_ROUND) == 120 and dxo.get_meta_prop(MetaKey.CURRENT_ROUND) == 3
    assert dxo.get_filter_history() == ["MalfunctionFilter"]
    assert out.get_return_code() == ReturnCode.OK
    # what the server reads back
    unpacked = read_result(out)
    assert unpacked.problem == "" and unpacked.num_samples == 120
    np.testing.assert_array_equal(unpacked.data["w"], [-1.0, 2.0, -3.0])


def test_an_update_is_corrupted_as_an_update():
    out = MalfunctionFilter(kind="sfa", alpha=2.0).process(
        result_data(model(), 10, 0, DataKind.WEIGHT_DIFF), site_context()
    )
    dxo = from_shareable(out)
    assert dxo.data_kind == DataKind.WEIGHT_DIFF
    np.testing.assert_array_equal(dxo.data["w"], [-2.0, 4.0, -6.0])


def test_the_noise_is_drawn_from_the_round_in_the_dxo_meta():
    def noisy(round_num):
        out = MalfunctionFilter(kind="ana", sigma=1.0, seed=1).process(
            result_data(model(), 10, round_num), site_context()
        )
        return from_shareable(out).data["w"]

    np.testing.assert_array_equal(noisy(2), noisy(2))
    assert not np.array_equal(noisy(2), noisy(3))
    assert not np.array_equal(noisy(2), model()["w"])


def test_a_benign_filter_and_error_replies_pass_unchanged():
    clean = MalfunctionFilter(kind="none").process(result_data(model(), 10, 0), site_context())
    np.testing.assert_array_equal(from_shareable(clean).data["w"], model()["w"])
    error = make_reply(ReturnCode.EXECUTION_EXCEPTION)
    assert MalfunctionFilter(kind="sfa").process(error, site_context()) is error
