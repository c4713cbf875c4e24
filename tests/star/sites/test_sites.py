"""The star site executors without a FLARE run: FedProx's proximal term and the personal model
of Ditto/FedCAP (trained with its own term, evaluated and reported, kept on the site)."""

import csv

import numpy as np
import pytest
from nvflare.apis.dxo import DataKind, MetaKey, from_shareable
from nvflare.apis.fl_constant import ReservedKey, ReturnCode
from nvflare.apis.fl_context import FLContext
from nvflare.apis.signal import Signal

from lightyear.flare import constants as C
from lightyear.models import build_model
from lightyear.star.executor import StarExecutor
from lightyear.star.messages import task_data
from lightyear.star.sites.fedprox import FedProxExecutor
from lightyear.star.sites.personal import PERSONAL_FILE, PersonalExecutor, load_personal
from lightyear.training.weights import get_weights

TRAIN = {"local_epochs": 1, "batch_size": 64}
CONFIG = {"seed": 0, "rounds": 2}


class FakeEngine:
    def __init__(self, root):
        self.root = root

    def get_workspace(self):
        return self

    def get_run_dir(self, job_id):
        return self.root

    def get_component(self, name):
        return None


def context(root, site="site-1"):
    ctx = FLContext()
    ctx.set_prop(ReservedKey.ENGINE, FakeEngine(str(root)), private=True, sticky=False)
    ctx.set_prop(ReservedKey.IDENTITY_NAME, site, private=False, sticky=False)
    ctx.set_prop(ReservedKey.RUN_NUM, "job", private=False, sticky=False)
    return ctx


def initial():
    return get_weights(build_model("cnn", 10, 1, seed=0))


def run(executor, root, round_num, weights, task=C.STAR_TRAIN_TASK):
    reply = executor.execute(task, task_data(weights, round_num, CONFIG), context(root), Signal())
    assert reply.get_return_code() == ReturnCode.OK, reply.get(C.KEY_ERROR)
    return reply


def distance(a, b):
    return float(np.sqrt(sum(np.sum((a[k].astype(np.float64) - b[k]) ** 2) for k in a if a[k].dtype.kind == "f")))


def test_fedprox_proximal_term_pulls_training_towards_the_global_model(tmp_path):
    w0 = initial()
    plain = from_shareable(
        run(StarExecutor(train_args=TRAIN, num_threads=1, compute_slots=0), tmp_path / "a", 0, w0)
    ).data
    prox = from_shareable(
        run(FedProxExecutor(mu=50.0, train_args=TRAIN, num_threads=1, compute_slots=0), tmp_path / "b", 0, w0)
    ).data
    off = from_shareable(
        run(FedProxExecutor(mu=0.0, train_args=TRAIN, num_threads=1, compute_slots=0), tmp_path / "c", 0, w0)
    ).data
    assert distance(off, plain) == 0.0  # mu = 0 is FedAvg's site
    assert distance(prox, w0) < 0.9 * distance(plain, w0)


def test_a_site_can_send_its_update_instead_of_its_model(tmp_path):
    w0 = initial()
    model = from_shareable(
        run(StarExecutor(train_args=TRAIN, num_threads=1, compute_slots=0), tmp_path / "a", 0, w0)
    ).data
    reply = run(StarExecutor(train_args=TRAIN, num_threads=1, compute_slots=0, send_update=True), tmp_path / "b", 0, w0)
    dxo = from_shareable(reply)
    assert dxo.data_kind == DataKind.WEIGHT_DIFF and dxo.get_meta_prop(MetaKey.NUM_STEPS_CURRENT_ROUND) > 0
    key = "conv1.weight" if "conv1.weight" in w0 else next(k for k in w0 if w0[k].dtype.kind == "f")
    np.testing.assert_allclose(w0[key] + dxo.data[key], model[key], atol=1e-6)


def rows(root):
    with open(root / "rounds.csv", newline="") as f:
        return list(csv.DictReader(f))


def test_ditto_personal_model_is_trained_kept_on_the_site_and_is_what_is_reported(tmp_path):
    w0 = initial()
    ex = PersonalExecutor(lam=0.5, train_args=TRAIN, num_threads=1, compute_slots=0)
    shared = from_shareable(run(ex, tmp_path, 0, w0)).data
    saved, saved_round = load_personal(str(tmp_path))
    assert saved_round == 0 and (tmp_path / PERSONAL_FILE).exists()
    personal = get_weights(ex.personal)
    assert distance(saved, personal) == 0.0
    # both started at w0 and saw the same batches: only the proximal term tells them apart
    assert distance(personal, shared) > 0.0
    assert distance(personal, w0) < distance(shared, w0)

    # round 1 receives another global model; the personal model carries on from round 0
    other = {k: (v * 0.5 if v.dtype.kind == "f" else v) for k, v in w0.items()}
    run(ex, tmp_path, 1, other)
    row = rows(tmp_path)[1]
    assert row["model"] == "personal"
    expected = ex.runtime.trainer.evaluate(build_and_load(saved), ex.runtime.data.val)
    assert float(row["val_loss"]) == pytest.approx(expected["loss"], abs=1e-5)  # the personal model of round 0
    assert float(row["received_val_loss"]) != pytest.approx(float(row["val_loss"]), abs=1e-4)

    # the final evaluation reports the personal model, also from a restarted site process
    final = run(ex, tmp_path, 2, other, task=C.STAR_EVAL_TASK)[C.KEY_RESULT]
    restarted = PersonalExecutor(lam=0.5, train_args=TRAIN, num_threads=1, compute_slots=0)
    again = run(restarted, tmp_path, 2, other, task=C.STAR_EVAL_TASK)[C.KEY_RESULT]
    assert distance(get_weights(restarted.personal), get_weights(ex.personal)) == 0.0  # round 1's, from its file
    assert final["test"] == pytest.approx(again["test"])
    assert final["test"] == pytest.approx(ex.runtime.trainer.evaluate(ex.personal, ex.runtime.data.test))


def build_and_load(weights):
    from lightyear.training.weights import set_weights

    net = build_model("cnn", 10, 1, seed=0)
    set_weights(net, weights)
    return net


def test_without_lambda_the_personal_model_is_the_shared_one(tmp_path):
    w0 = initial()
    ex = PersonalExecutor(lam=0.0, train_args=TRAIN, num_threads=1, compute_slots=0)
    shared = from_shareable(run(ex, tmp_path, 0, w0)).data
    assert distance(get_weights(ex.personal), shared) == 0.0


@pytest.mark.parametrize(
    "cls, kwargs, name",
    [
        (FedProxExecutor, {"mu": -1}, "mu"),
        (PersonalExecutor, {"lam": float("nan")}, "lam"),
        (PersonalExecutor, {"evaluate_received": 1}, "evaluate_received"),
        (StarExecutor, {"send_update": "yes"}, "send_update"),
    ],
)
def test_bad_site_settings_stop_the_job_at_construction(cls, kwargs, name):
    with pytest.raises(ValueError, match=name):
        cls(**kwargs)


def spy_on_training(ex, root):
    """Build the site's runtime as its first task would, then record the keyword arguments of
    every ``SiteRuntime.train`` call (training itself goes on without them)."""
    ex._ensure_runtime(CONFIG, context(root))
    calls, real = [], ex.runtime.train

    def train(round_num, **kwargs):
        calls.append(sorted(kwargs))
        kwargs.pop("flip_labels", None)
        return real(round_num, **kwargs)

    ex.runtime.train = train
    return calls


@pytest.mark.parametrize("cls", [StarExecutor, FedProxExecutor, PersonalExecutor])
def test_a_label_flipping_attacker_trains_every_model_on_flipped_labels(tmp_path, cls):
    attacker = cls(flip_labels=True, train_args=TRAIN, num_threads=1, compute_slots=0)
    calls = spy_on_training(attacker, tmp_path / "attacker")
    run(attacker, tmp_path / "attacker", 0, initial())
    assert calls and all("flip_labels" in kwargs for kwargs in calls)  # Ditto/FedCAP: the personal model too
    final = run(attacker, tmp_path / "attacker", 1, initial(), task=C.STAR_EVAL_TASK)[C.KEY_RESULT]
    assert final["malfunction"] == "lf"  # kept out of the benign mean
    benign = cls(train_args=TRAIN, num_threads=1, compute_slots=0)
    calls = spy_on_training(benign, tmp_path / "benign")
    run(benign, tmp_path / "benign", 0, initial())
    assert calls and not any("flip_labels" in kwargs for kwargs in calls)


def test_flip_labels_must_be_a_boolean():
    with pytest.raises(ValueError, match="flip_labels must be true or false, got 'yes'"):
        StarExecutor(flip_labels="yes")
