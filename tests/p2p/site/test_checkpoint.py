"""A checkpoint read back (a site resuming, also via resume_from) is checked like a peer's model:
whatever the file holds, a bad one stops the site with one line naming the file and the fix."""

import json
import zipfile

import numpy as np
import pytest
from nvflare.apis.fl_constant import ReturnCode

from lightyear.flare import constants as C
from lightyear.p2p.site.checkpoint import (
    CHECKPOINT_FILE,
    CheckpointError,
    SiteCheckpoint,
    load_site_checkpoint,
    save_site_checkpoint,
)
from lightyear.p2p.site.resume import find_checkpoint, restore_state

from p2p_fakes import starting_checkpoint

REFERENCE = {"w": np.zeros((2, 3), np.float32), "b": np.zeros(3, np.float32), "n": np.array(0, np.int64)}
META = {"rounds": 6, "seed": 0}


def good_weights():
    return {"w": np.full((2, 3), 0.5, np.float32), "b": np.ones(3, np.float32), "n": np.array(7, np.int64)}


def write(folder, weights=None, round_num=2, meta=META, arrays=None):
    folder.mkdir(parents=True, exist_ok=True)
    save_site_checkpoint(
        str(folder), SiteCheckpoint(round_num, good_weights() if weights is None else weights, meta, {}, arrays or {})
    )
    return str(folder / CHECKPOINT_FILE)


def load(folder, **kwargs):
    return load_site_checkpoint(str(folder), REFERENCE, 1e6, rounds=META["rounds"], **kwargs)


def test_a_good_checkpoint_loads_with_its_weights_round_and_state(tmp_path):
    write(tmp_path, arrays={"backup/w": np.ones((2, 3), np.float32)})
    ckpt = load(tmp_path)
    assert ckpt.round == 2 and ckpt.meta == META and set(ckpt.weights) == set(REFERENCE)
    np.testing.assert_array_equal(ckpt.weights["w"], good_weights()["w"])
    np.testing.assert_array_equal(ckpt.arrays["backup/w"], np.ones((2, 3)))
    assert load_site_checkpoint(str(tmp_path / "none")) is None


@pytest.mark.parametrize(
    "change, expected",
    [
        ({"w": np.array(0.5, np.float32)}, "w: shape () != expected (2, 3)"),  # 0-d: would broadcast into the tensor
        ({"b": np.array([1.0, np.nan, 1.0], np.float32)}, "b: 1 values not finite"),
        ({"b": np.array([1.0, 1e300, 1.0])}, "b: 1 values not finite in float32"),
        ({"b": np.array([1.0, 1e9, 1.0], np.float32)}, "exceed max_abs_weight=1e+06"),
        ({"extra": np.zeros(2, np.float32)}, "unexpected weights [extra]"),
        ({"b": np.array(["x", "y", "z"])}, "b: dtype <U1 is no number"),
    ],
)
def test_weights_that_do_not_fit_the_model_stop_the_site(tmp_path, change, expected):
    path = write(tmp_path, dict(good_weights(), **change))
    with pytest.raises(CheckpointError) as err:
        load(tmp_path)
    message = str(err.value)
    assert expected in message and f"the site checkpoint {path} does not fit this site's model" in message
    assert "remove it" in message and "\n" not in message


def test_missing_weights_are_named(tmp_path):
    weights = good_weights()
    del weights["b"]
    write(tmp_path, weights)
    with pytest.raises(CheckpointError, match=r"missing weights \[b\]"):
        load(tmp_path)


@pytest.mark.parametrize("round_num", [-5, 6, 10**9])
def test_a_round_outside_the_jobs_rounds_stops_the_site(tmp_path, round_num):
    path = write(tmp_path, round_num=round_num)
    with pytest.raises(CheckpointError, match=f"holds round {round_num}, outside") as err:
        load(tmp_path)
    assert path in str(err.value)
    with pytest.raises(CheckpointError, match="outside this job's rounds 0..5"):
        find_checkpoint(str(tmp_path), META, "site-1", None)


def write_meta(folder, text: bytes):
    """A checkpoint whose __meta__ entry holds ``text`` (what a hand-edited or foreign file may hold)."""
    folder.mkdir(parents=True, exist_ok=True)
    arrays = {"weights/" + k: v for k, v in good_weights().items()}
    np.savez(folder / CHECKPOINT_FILE, __meta__=np.frombuffer(text, np.uint8), **arrays)


@pytest.mark.parametrize(
    "make, expected",
    [
        (lambda f: (f / CHECKPOINT_FILE).write_bytes(b"\x80\x04garbage" * 50), "not an .npz archive"),
        (lambda f: np.savez(f / CHECKPOINT_FILE, w=np.zeros(3)), "no __meta__ entry"),
        (lambda f: np.savez(f / CHECKPOINT_FILE, __meta__=np.array([object()], dtype=object)), "__meta__"),
        (lambda f: write_meta(f, b"{not json"), "not the JSON this tool writes"),
        (
            lambda f: write_meta(f, json.dumps({"round": 1e9, "meta": META}).encode()),
            "round 1000000000.0 is not an integer",
        ),
        (lambda f: write_meta(f, json.dumps({"round": True, "meta": META}).encode()), "round True is not an integer"),
        (lambda f: write_meta(f, b"[1, 2]"), "not the JSON object this tool writes"),
    ],
)
def test_a_damaged_checkpoint_is_named_damaged_without_numpys_pickle_advice(tmp_path, make, expected):
    tmp_path.mkdir(exist_ok=True)
    make(tmp_path)
    with pytest.raises(CheckpointError) as err:
        load(tmp_path)
    message = str(err.value)
    assert "is damaged or not a checkpoint this tool wrote" in message and expected in message
    assert "pickle" not in message.lower() and "remove it" in message


def test_a_truncated_checkpoint_is_damaged(tmp_path):
    path = write(tmp_path)
    data = open(path, "rb").read()
    open(path, "wb").write(data[: len(data) // 2])
    with pytest.raises(CheckpointError, match="is damaged or not a checkpoint this tool wrote"):
        load(tmp_path)


def test_an_entry_of_a_huge_declared_shape_is_refused_before_its_data_is_read(tmp_path):
    """The .npy header claims 10^12 values: refused from the header, nothing allocated."""
    write(tmp_path)
    path = tmp_path / CHECKPOINT_FILE
    header = b"{'descr': '<f4', 'fortran_order': False, 'shape': (1000000000000,), }"
    header += b" " * (63 - (10 + len(header)) % 64) + b"\n"
    with zipfile.ZipFile(path, "a") as zf:
        zf.writestr("state/huge.npy", b"\x93NUMPY\x01\x00" + len(header).to_bytes(2, "little") + header + b"\0" * 16)
    with pytest.raises(CheckpointError, match="the method's array state takes 4000000000000 bytes"):
        load(tmp_path)


def test_resume_from_names_the_fix_for_a_bad_checkpoint(tmp_path):
    run_dir = tmp_path / "ws" / "job-b"
    run_dir.mkdir(parents=True)
    path = write(tmp_path / "ckpt" / "site-1", dict(good_weights(), w=np.array(0.5, np.float32)))
    with pytest.raises(CheckpointError) as err:
        starting_checkpoint(str(run_dir), META, "site-1", str(tmp_path / "ckpt" / "{site}"), REFERENCE, 1e6)
    assert path in str(err.value) and "point resume_from at another checkpoint" in str(err.value)


def test_a_site_resuming_from_a_bad_checkpoint_fails_with_one_line(tmp_path):
    from nvflare.apis.shareable import Shareable
    from nvflare.apis.signal import Signal

    from lightyear.p2p.methods.p2p_fedavg import P2PFedAvgExecutor
    from lightyear.training.site_runtime import SiteRuntime

    from flare_fakes import SiteEngine, context

    ex = P2PFedAvgExecutor(
        train_args={"local_epochs": 1, "batch_size": 64}, num_threads=1, compute_slots=0, resume_from="job-a"
    )
    fresh = SiteRuntime("site-1", seed=0, **ex.runtime_args).get_weights()
    poisoned = {
        k: np.full_like(v, np.nan) if v.dtype.kind == "f" else v for k, v in fresh.items()
    }  # NaN trains to a NaN loss
    path = write(tmp_path / "site-1" / "job-a", poisoned, meta={"rounds": 4, "seed": 0})
    job_b = tmp_path / "site-1" / "job-b"
    job_b.mkdir()
    ex.site = "site-1"
    task = Shareable()
    task[C.KEY_CONFIG] = {"rounds": 4, "seed": 0, "neighbours": {"site-1": ["site-2"], "site-2": ["site-1"]}}
    reply = ex.execute(C.P2P_RUN_TASK, task, context(SiteEngine(str(job_b))), Signal())
    assert reply.get_return_code() == ReturnCode.EXECUTION_EXCEPTION
    error = reply[C.KEY_ERROR]
    assert f"the site checkpoint {path} does not fit this site's model" in error and "not finite" in error
    assert "point resume_from at another checkpoint" in error and "\n" not in error
    status = json.loads((job_b / "site_status.json").read_text())
    assert status["status"] == "failed" and status["reason"] == error


def test_a_method_state_the_site_cannot_take_names_the_checkpoint_and_the_fix(tmp_path):
    from lightyear.p2p.methods.defta import DeftaExecutor

    from p2p_fakes import FAST, FULL3, wire

    ex = wire(DeftaExecutor(train_args=FAST, sample_size=1), FULL3)
    ckpt = SiteCheckpoint(1, ex.runtime.get_weights(), META, {"trust": {"peers": ["site-9"]}}, {})
    with pytest.raises(CheckpointError) as err:
        restore_state(ckpt, str(tmp_path), "remove it", ex.restore_method_state)
    message = str(err.value)
    assert (
        f"the site checkpoint {tmp_path / CHECKPOINT_FILE} holds a method state this site cannot take (KeyError"
        in message
    )
    assert message.endswith("; remove it")
