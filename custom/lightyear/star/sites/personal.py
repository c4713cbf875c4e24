"""A personal model per site beside the shared one: the site side of Ditto (Li, Hu, Beirami, Smith, "Ditto: Fair and
Robust Federated Learning Through Personalization", ICML 2021, Eq. 2 and Algorithm 1) and of FedCAP (Li, Wang, Yu,
Sun, Zhang, Wang, "FedCAP: Robust Federated Learning via Customized Aggregation and Personalization", Sec. V-B,
Eq. 7). The site trains the received model w (Ditto: w^t; FedCAP: w^_k^t) on its loss alone and sends it back, and
its personal model v_k on F_k(v) + lambda/2 ||v - w||^2, w frozen, so the two updates do not interact: training
v_k, then w, over the same batches equals the papers' alternating mini-batch updates. The site reports v_k (the
received model's metrics as ``received_val_``/``received_test_``), saved after every round to ``personal_model.npz``
(a restarted site continues from it). Default lambda = 0.5: the LIGHTYEAR authors' for Ditto, the middle of FedCAP's
grid {0.1, 0.5, 1} (Sec. VI-A).
"""

from __future__ import annotations

import os

import numpy as np

from lightyear.checks import boolean
from lightyear.records import save_npz_atomic
from lightyear.star.executor import StarExecutor
from lightyear.star.messages import StarTask
from lightyear.training.regularizers import check_mu, parameter_snapshot, proximal_term
from lightyear.training.weights import get_weights, set_weights

LAM = 0.5
PERSONAL_FILE = "personal_model.npz"
_WEIGHT = "weights/"
_ROUND = "round"


def check_lam(lam) -> float:
    """lambda (the personal model's proximal weight) must be a finite number >= 0."""
    try:
        return check_mu(lam)
    except ValueError:
        raise ValueError(
            "lam (weight of the personal model's proximal term, Ditto's / FedCAP's lambda) must be a finite number "
            f">= 0, got {lam!r}"
        ) from None


def save_personal(folder: str, weights: dict, round_num: int) -> str:
    """Write the personal model after ``round_num`` to ``<folder>/personal_model.npz``, atomically."""
    blob = {_WEIGHT + k: np.asarray(v) for k, v in weights.items()}
    blob[_ROUND] = np.array(int(round_num), dtype=np.int64)
    return save_npz_atomic(os.path.join(folder, PERSONAL_FILE), blob)


def load_personal(folder: str) -> tuple[dict, int] | None:
    """(weights, round) of the saved personal model, or None if there is none; a damaged file is an error naming it."""
    path = os.path.join(folder, PERSONAL_FILE)
    if not os.path.exists(path):
        return None
    try:
        with np.load(path, allow_pickle=False) as data:
            weights = {k[len(_WEIGHT) :]: data[k] for k in data.files if k.startswith(_WEIGHT)}
            return weights, int(data[_ROUND])
    except Exception as exc:  # noqa: BLE001 - any damage is reported the same way
        raise RuntimeError(
            f"the personal model {path} cannot be read ({exc}); delete it to start from the initial model"
        ) from exc


class PersonalExecutor(StarExecutor):
    def __init__(self, lam: float = LAM, evaluate_received: bool = True, **kwargs):
        """Args: lam: lambda, the weight of the personal model's proximal term (>= 0); evaluate_received: also record
        the received model's metrics; the others: :class:`~lightyear.star.executor.StarExecutor`."""
        self.lam = check_lam(lam)
        self.evaluate_received = boolean("evaluate_received", evaluate_received)
        super().__init__(**kwargs)
        self.personal = None

    def runtime_ready(self, fl_ctx) -> None:
        rt = self.runtime
        self.personal = rt.fresh_model(rt.seed).to(rt.trainer.device)
        saved = load_personal(self.run_dir)
        if saved is not None:
            set_weights(self.personal, saved[0])
            self.log_info(fl_ctx, f"continuing with the personal model saved after round {saved[1]}")

    def evaluate_round(self, task: StarTask) -> tuple[dict, dict, dict]:
        rt = self.runtime
        val, test = rt.trainer.evaluate(self.personal, rt.data.val), rt.trainer.evaluate(self.personal, rt.data.test)
        fields = {"model": "personal"}
        if self.evaluate_received:
            fields.update({f"received_val_{k}": v for k, v in rt.evaluate("val").items()})
            fields.update({f"received_test_{k}": v for k, v in rt.evaluate("test").items()})
        return fields, val, test

    def train_round(self, task: StarTask) -> dict:
        rt = self.runtime
        reference = parameter_snapshot(rt.model)  # the received model, frozen
        options = self.data_options()  # an attacker's personal model learns from its flipped labels too
        personal = rt.train(
            task.round_num,
            regularizer=lambda model: proximal_term(model, reference, self.lam),
            model=self.personal,
            **options,
        )
        stats = rt.train(task.round_num, **options)
        save_personal(self.run_dir, get_weights(self.personal), task.round_num)
        return {**stats, "personal_train_loss": personal["train_loss"]}
