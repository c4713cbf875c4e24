"""FEMNIST prepare step and loader, on tiny LEAF JSON files written in tmp_path."""

from __future__ import annotations

import importlib.util
import json
import os

import numpy as np
import pandas as pd
import pytest
import torch
from PIL import Image

from lightyear.data import femnist, load_site_data
from lightyear.data.split_file import SPLIT_FILE

from repo import ROOT as REPO

NUM_WRITERS = 20
SAMPLES_PER_WRITER = 5


def writer_id(k: int) -> str:
    return f"f{k:04d}_{k % 100:02d}"


def writer_samples(k: int) -> tuple[list[list[float]], list[int]]:
    """Background 1.0, one ink pixel (0.0) at a writer- and sample-specific place; labels vary."""
    xs, ys = [], []
    for n in range(SAMPLES_PER_WRITER):
        x = np.ones(784)
        x[(k * SAMPLES_PER_WRITER + n) % 784] = 0.0
        x[783] = 0.25
        xs.append(x.round(4).tolist())
        ys.append((k * 7 + n) % 62)
    return xs, ys


def leaf_file(users: list[int], samples=writer_samples) -> dict:
    data = {"users": [], "num_samples": [], "user_data": {}}
    for k in users:
        xs, ys = samples(k)
        data["users"].append(writer_id(k))
        data["num_samples"].append(len(ys))
        data["user_data"][writer_id(k)] = {"x": xs, "y": ys}
    return data


@pytest.fixture
def leaf_all_data(tmp_path):
    """LEAF's data/femnist/data with all_data/all_data_0.json and all_data_1.json."""
    folder = tmp_path / "leaf" / "all_data"
    folder.mkdir(parents=True)
    half = NUM_WRITERS // 2
    for index, users in enumerate((range(half), range(half, NUM_WRITERS))):
        (folder / f"all_data_{index}.json").write_text(json.dumps(leaf_file(list(users))))
    return str(tmp_path / "leaf")


def prepare(raw, out, **options):
    return femnist.prepare_femnist(raw, str(out), writers_per_site=2, **options)


def test_prepare_sites_are_distinct_writers_with_seeded_splits(leaf_all_data, tmp_path):
    path = prepare(leaf_all_data, tmp_path / "out" / "femnist", seed=3)
    frame = pd.read_csv(path)
    assert list(frame.columns) == ["site", "split", "image", "label"]
    assert sorted(frame["site"].unique()) == sorted(f"site-{k}" for k in range(1, 9))
    writers_of = {}
    for site, rows in frame.groupby("site"):
        # 2 writers x 5 samples = 10 samples: 6 train, 2 val, 2 test
        assert rows["split"].value_counts().to_dict() == {"train": 6, "val": 2, "test": 2}
        writers_of[site] = {p.split("/")[1] for p in rows["image"]}
        assert len(writers_of[site]) == 2
    all_writers = [w for ws in writers_of.values() for w in ws]
    assert len(set(all_writers)) == 16  # no writer on two sites
    assert frame["label"].between(0, 61).all()
    for image in frame["image"]:
        assert not os.path.isabs(image)
        assert os.path.isfile(tmp_path / "out" / "femnist" / image)


def test_prepare_keeps_labels_and_inverts_pixels(leaf_all_data, tmp_path):
    out = tmp_path / "femnist"
    frame = pd.read_csv(prepare(leaf_all_data, out, seed=0))
    row = frame.iloc[0]
    writer, name = row["image"].split("/")[1:]
    k, n = int(writer[1:5]), int(name.split(".")[0])
    xs, ys = writer_samples(k)
    assert row["label"] == ys[n]
    pixels = np.asarray(Image.open(out / row["image"]))
    assert pixels.shape == (28, 28) and pixels.dtype == np.uint8
    ink = (k * SAMPLES_PER_WRITER + n) % 784
    expected = np.round((1.0 - np.asarray(xs[n])) * 255).astype(np.uint8).reshape(28, 28)
    np.testing.assert_array_equal(pixels, expected)
    assert pixels.flat[ink] == 255 and pixels.flat[0 if ink else 1] == 0  # bright ink on black

    kept = tmp_path / "kept"
    prepare(leaf_all_data, kept, seed=0, invert=False)
    raw_pixels = np.asarray(Image.open(kept / row["image"]))
    np.testing.assert_array_equal(raw_pixels, 255 - expected)


def test_prepare_is_deterministic_in_the_seed(leaf_all_data, tmp_path):
    a = pd.read_csv(prepare(leaf_all_data, tmp_path / "a", seed=5))
    b = pd.read_csv(prepare(leaf_all_data, tmp_path / "b", seed=5))
    c = pd.read_csv(prepare(leaf_all_data, tmp_path / "c", seed=6))
    pd.testing.assert_frame_equal(a, b)
    assert open(tmp_path / "a" / a["image"][0], "rb").read() == open(tmp_path / "b" / b["image"][0], "rb").read()
    assert not a.equals(c)


def test_prepare_reads_train_and_test_json(tmp_path):
    """LEAF's train/ and test/ files: a writer's samples from both are joined."""
    raw = tmp_path / "leaf"
    for part in ("train", "test"):
        (raw / part).mkdir(parents=True)

    def part_samples(part):
        def samples(k):
            xs, ys = writer_samples(k)
            return (xs[:3], ys[:3]) if part == "train" else (xs[3:], ys[3:])

        return samples

    for part in ("train", "test"):
        users = list(range(16))
        (raw / part / f"all_data_niid_05_keep_0_{part}_9.json").write_text(
            json.dumps(leaf_file(users, part_samples(part)))
        )
    frame = pd.read_csv(femnist.prepare_femnist(str(raw), str(tmp_path / "out"), writers_per_site=2))
    assert len(frame) == 16 * SAMPLES_PER_WRITER
    assert frame.groupby("site").size().tolist() == [10] * 8


def test_writer_ids_are_read_from_the_head_of_the_file_or_the_whole_file(tmp_path):
    data = leaf_file([3, 1, 2])
    first = tmp_path / "users_first.json"
    first.write_text(json.dumps(data))
    last = tmp_path / "users_last.json"
    last.write_text(
        json.dumps({"user_data": data["user_data"], "num_samples": data["num_samples"], "users": data["users"]})
    )
    expected = [writer_id(3), writer_id(1), writer_id(2)]
    assert femnist.read_leaf_users(str(first)) == expected
    assert femnist.read_leaf_users(str(first), prefix_chars=20) == expected  # cut list: whole file read
    assert femnist.read_leaf_users(str(last)) == expected


def test_loader_gives_one_channel_28x28_and_labels(leaf_all_data, tmp_path):
    prepare(leaf_all_data, tmp_path / "root" / "femnist", seed=1)
    data = femnist.load_site("site-2", data_root=str(tmp_path / "root"))
    assert (data.num_classes, data.in_channels) == (62, 1)
    assert data.sizes() == {"train": 6, "val": 2, "test": 2}
    image, label = data.train[0]
    assert image.shape == (1, 28, 28) and image.dtype == torch.float32
    assert 0.0 <= float(image.min()) and float(image.max()) <= 1.0
    assert isinstance(label, int) and 0 <= label < 62
    frame = pd.read_csv(tmp_path / "root" / "femnist" / SPLIT_FILE)
    expected = frame[(frame["site"] == "site-2") & (frame["split"] == "train")]["label"].tolist()
    assert [data.train[i][1] for i in range(len(data.train))] == expected
    via_registry = load_site_data("femnist", "site-2", data_root=str(tmp_path / "root"), image_size=32)
    assert via_registry.val[0][0].shape == (1, 32, 32)
    batch, labels = next(iter(torch.utils.data.DataLoader(data.train, batch_size=4)))
    assert batch.shape == (4, 1, 28, 28) and labels.dtype == torch.int64


def test_clear_errors(leaf_all_data, tmp_path, monkeypatch):
    with pytest.raises(FileNotFoundError, match="does not exist.*LEAF"):
        prepare(str(tmp_path / "nowhere"), tmp_path / "out")
    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(FileNotFoundError, match="all_data"):
        prepare(str(empty), tmp_path / "out", source="all_data")
    with pytest.raises(ValueError, match="need 40 writers; the data has 20"):
        femnist.prepare_femnist(leaf_all_data, str(tmp_path / "out"), writers_per_site=5)
    bad = tmp_path / "bad"
    bad.mkdir()
    users = [writer_id(k) for k in range(16)]
    (bad / "all_data_0.json").write_text(json.dumps({"users": users, "num_samples": [1] * 16}))
    with pytest.raises(ValueError, match="lacks keys \\['user_data'\\]"):
        prepare(str(bad), tmp_path / "out")
    monkeypatch.delenv("LIGHTYEAR_DATA_ROOT", raising=False)
    with pytest.raises(ValueError, match="LIGHTYEAR_DATA_ROOT"):
        femnist.load_site("site-1")
    with pytest.raises(FileNotFoundError, match="prepare the femnist dataset"):
        femnist.load_site("site-1", data_root=str(tmp_path / "unprepared"))
    prepare(leaf_all_data, tmp_path / "root" / "femnist")
    with pytest.raises(ValueError, match="no site 'site-9'"):
        femnist.load_site("site-9", data_root=str(tmp_path / "root"))


def run_script(dataset: str, argv: list[str]) -> int:
    """Run ``datasets/<dataset>/prepare.py``'s ``main`` in this process."""
    spec = importlib.util.spec_from_file_location(
        f"prepare_{dataset}", os.path.join(REPO, "datasets", dataset, "prepare.py")
    )
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.main(argv)


def test_prepare_script(leaf_all_data, tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("LIGHTYEAR_DATA_ROOT", str(tmp_path / "root"))
    assert run_script("femnist", ["--raw", leaf_all_data, "--writers-per-site", "2", "--seed", "4"]) == 0
    split = tmp_path / "root" / "femnist" / SPLIT_FILE
    printed = capsys.readouterr().out
    assert str(split) in printed and "site-8" in printed
    assert len(pd.read_csv(split)) == 80
    monkeypatch.delenv("LIGHTYEAR_DATA_ROOT")
    with pytest.raises(SystemExit):
        run_script("femnist", ["--raw", leaf_all_data])
    assert "pass --out <data_root>/femnist or set LIGHTYEAR_DATA_ROOT" in capsys.readouterr().err
