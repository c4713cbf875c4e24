"""One job seed makes a site's data, initial model and training reproducible."""

import numpy as np
import torch

from lightyear.training.site_runtime import SiteRuntime

ARGS = dict(dataset="digits", model="cnn", train_args={"local_epochs": 1, "batch_size": 32}, num_threads=1)


def test_same_seed_same_training_whatever_else_used_the_rng():
    a = SiteRuntime("site-2", seed=3, **ARGS)
    torch.rand(1000)  # other code drawing from the global generator must not change the result
    b = SiteRuntime("site-2", seed=3, **ARGS)
    la, lb = a.train(0)["train_loss"], (torch.rand(7), b.train(0))[1]["train_loss"]
    assert la == lb
    wa, wb = a.get_weights(), b.get_weights()
    assert all(np.array_equal(wa[k], wb[k]) for k in wa)


def test_every_site_starts_from_the_same_model_and_seeds_differ():
    a = SiteRuntime("site-1", seed=3, **ARGS).get_weights()
    b = SiteRuntime("site-5", seed=3, **ARGS).get_weights()
    c = SiteRuntime("site-1", seed=4, **ARGS).get_weights()
    assert all(np.array_equal(a[k], b[k]) for k in a)
    assert not all(np.array_equal(a[k], c[k]) for k in a)


def test_deterministic_setting_controls_torch_kernels():
    import os

    from lightyear.training.trainer import use_deterministic_kernels

    before = torch.are_deterministic_algorithms_enabled()
    try:
        SiteRuntime("site-1", seed=0, **dict(ARGS, train_args={"local_epochs": 1, "deterministic": False}))
        assert torch.backends.cudnn.benchmark and not torch.backends.cudnn.deterministic
        SiteRuntime("site-1", seed=0, **ARGS)  # deterministic is the default
        assert torch.backends.cudnn.deterministic and not torch.backends.cudnn.benchmark
        assert os.environ.get("CUBLAS_WORKSPACE_CONFIG")
        # the process-wide switch is set for a GPU device, and left alone on the CPU (it costs ~1.5 s of imports)
        use_deterministic_kernels(False, "cuda")
        assert not torch.are_deterministic_algorithms_enabled()
        use_deterministic_kernels(True, "cpu")
        assert not torch.are_deterministic_algorithms_enabled()
        use_deterministic_kernels(True, "cuda:0")
        assert torch.are_deterministic_algorithms_enabled()
    finally:
        torch.use_deterministic_algorithms(before, warn_only=True)


def per_tensor_round(runtime: SiteRuntime, round_num: int) -> dict:
    """What ``runtime.train(round_num)`` does, with torch.optim's per-tensor optimizer loop (its CPU default)."""
    make, c = runtime.trainer.make_optimizer, runtime.trainer.config

    def per_tensor(model):
        if c.optimizer == "sgd":
            return torch.optim.SGD(
                model.parameters(), lr=c.lr, momentum=c.momentum, weight_decay=c.weight_decay, foreach=False
            )
        return torch.optim.Adam(model.parameters(), lr=c.lr, weight_decay=c.weight_decay, foreach=False)

    runtime.trainer.make_optimizer = per_tensor
    try:
        runtime.train(round_num)
    finally:
        runtime.trainer.make_optimizer = make
    return runtime.get_weights()


def test_the_optimizer_runs_as_multi_tensor_kernels_and_trains_the_same_weights_to_the_bit():
    # a CPU claim: there the per-tensor loop is PyTorch's default, and the multi-tensor form must not change a bit;
    # CUDA's default is the multi-tensor form already, and its per-tensor kernels round differently (seen on an H200)
    for optimizer in ("adam", "sgd"):
        train_args = {"local_epochs": 1, "batch_size": 32, "optimizer": optimizer, "device": "cpu"}
        args = {**ARGS, "train_args": train_args}
        a, b = SiteRuntime("site-3", seed=1, **args), SiteRuntime("site-3", seed=1, **args)
        assert a.trainer.make_optimizer(a.model).foreach is True
        for round_num in range(2):
            a.train(round_num)
            expected = per_tensor_round(b, round_num)
            got = a.get_weights()
            assert all(np.array_equal(got[k], expected[k]) for k in got), optimizer
