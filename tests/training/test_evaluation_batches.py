"""Evaluation reads an in-memory dataset in order, in the same batches and with the same predictions as a DataLoader."""

import numpy as np
import torch
from torch import nn
from torch.utils.data import DataLoader, Dataset, TensorDataset

from lightyear.training.trainer import LocalTrainer, TrainConfig, evaluation_batches


class _Listed(Dataset):
    """A dataset that is not a TensorDataset: read through a DataLoader."""

    def __init__(self, x, y):
        self.x, self.y = x, y

    def __len__(self):
        return len(self.x)

    def __getitem__(self, i):
        return self.x[i], self.y[i]


def _data(n=7):
    x = torch.arange(n * 3, dtype=torch.float32).reshape(n, 3)
    return x, torch.arange(n) % 2


def test_a_tensor_dataset_is_sliced_in_order_with_a_short_last_batch():
    x, y = _data(7)
    batches = list(evaluation_batches(TensorDataset(x, y), 3))
    assert [len(b[0]) for b in batches] == [3, 3, 1]
    assert torch.equal(torch.cat([b[0] for b in batches]), x)
    assert torch.equal(torch.cat([b[1] for b in batches]), y)


def test_batches_equal_what_a_data_loader_collates_for_both_kinds_of_dataset():
    x, y = _data(7)
    expected = list(DataLoader(TensorDataset(x, y), batch_size=3, shuffle=False))
    for dataset in (TensorDataset(x, y), _Listed(x, y)):
        got = list(evaluation_batches(dataset, 3))
        assert len(got) == len(expected)
        for (gx, gy), (ex, ey) in zip(got, expected):
            assert torch.equal(gx, ex) and torch.equal(gy, ey)


def test_predictions_are_those_of_the_data_loader_path():
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(3, 4), nn.ReLU(), nn.Linear(4, 2))
    x, y = torch.randn(300, 3), torch.randint(0, 2, (300,))
    trainer = LocalTrainer(TrainConfig(batch_size=32, device="cpu"))
    probs, labels, loss = trainer.predict(model, TensorDataset(x, y))
    probs_listed, labels_listed, loss_listed = trainer.predict(model, _Listed(x, y))
    np.testing.assert_array_equal(probs, probs_listed)
    np.testing.assert_array_equal(labels, labels_listed)
    assert loss == loss_listed and probs.shape == (300, 2)
