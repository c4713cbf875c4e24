"""Label flipping in training: the targets the loss sees are (y + 1) mod C, per sample and per pixel."""

import numpy as np
import pytest
import torch
from torch import nn
from torch.utils.data import TensorDataset

from lightyear.training.site_runtime import SiteRuntime
from lightyear.training.trainer import LocalTrainer, TrainConfig, flip_targets


def test_flip_targets_on_hand_worked_labels_and_masks():
    assert flip_targets(torch.tensor([0, 1, 2, 9]), 10).tolist() == [1, 2, 3, 0]
    mask = torch.tensor([[[0, 1], [1, 0]]])
    assert flip_targets(mask, 2).tolist() == [[[1, 0], [0, 1]]]  # C = 2 inverts a binary mask
    assert flip_targets(torch.tensor([[0, 2], [1, 0]]), 3).tolist() == [[1, 0], [2, 1]]
    assert flip_targets(torch.from_numpy(np.array([3, 0, 4, 1])), 5).numpy().tolist() == [4, 1, 0, 2]


@pytest.mark.parametrize(
    "targets, classes, message",
    [
        (torch.tensor([0.0, 1.0]), 2, "integer class targets"),
        (torch.tensor([0, 3]), 3, r"\[0, 3\)"),
        (torch.tensor([-1, 0]), 2, r"\[0, 2\)"),
        (torch.tensor([0]), 1, "num_classes"),
        (torch.tensor([0]), True, "num_classes"),
    ],
)
def test_flip_targets_refuses_what_it_cannot_flip(targets, classes, message):
    with pytest.raises(ValueError, match=message):
        flip_targets(targets, classes)


class Recorder(nn.Module):
    """A loss that records the targets of every batch."""

    def __init__(self):
        super().__init__()
        self.seen = []

    def forward(self, logits, targets):
        self.seen.append(targets.clone())
        return logits.float().pow(2).mean()


def trained_targets(task, x, y, flip):
    trainer = LocalTrainer(TrainConfig(batch_size=3, device="cpu"), task=task)
    trainer.loss_fn = Recorder()
    model = nn.Conv2d(1, 2, 1) if task == "segmentation" else nn.Linear(1, 3)
    trainer.train(model, TensorDataset(x, y), seed=0, flip_classes=flip)
    return torch.cat(trainer.loss_fn.seen)


def test_training_on_flipped_labels_gives_the_loss_y_plus_1_mod_c():
    x = torch.zeros(5, 1)
    y = torch.tensor([0, 1, 2, 2, 1])
    honest = trained_targets("classification", x, y, None)
    flipped = trained_targets("classification", x, y, 3)
    # the same seed gives the same batch order: every target is moved on by one class
    assert honest.tolist() != flipped.tolist()
    assert flipped.tolist() == ((honest + 1) % 3).tolist()
    assert sorted(flipped.tolist()) == [0, 0, 1, 2, 2]  # 0 1 2 2 1 -> 1 2 0 0 2


def test_training_a_segmentation_model_on_flipped_masks_inverts_every_pixel():
    x = torch.zeros(4, 1, 2, 2)
    y = torch.tensor([[[0, 1], [1, 1]], [[0, 0], [0, 1]], [[1, 1], [1, 1]], [[0, 0], [0, 0]]])
    honest = trained_targets("segmentation", x, y, None)
    flipped = trained_targets("segmentation", x, y, 2)
    assert torch.equal(flipped, 1 - honest)


def test_site_runtime_flips_with_its_datasets_number_of_classes():
    args = dict(dataset="digits", model="cnn", train_args={"local_epochs": 1, "batch_size": 64}, num_threads=1)
    rt = SiteRuntime("site-1", seed=0, **args)
    calls = []
    original = rt.trainer.train

    def spy(*a, **kw):
        calls.append(kw.get("flip_classes"))
        return original(*a, **kw)

    rt.trainer.train = spy
    honest_start = rt.get_weights()
    rt.train(0)
    honest = rt.get_weights()
    rt.set_weights(honest_start)
    rt.train(0, flip_labels=True)
    flipped = rt.get_weights()
    assert calls == [None, 10]
    assert any(not np.allclose(honest[k], flipped[k]) for k in honest)  # same batches, other targets
    with pytest.raises(ValueError, match="flip_labels"):
        rt.train(1, flip_labels="yes")
