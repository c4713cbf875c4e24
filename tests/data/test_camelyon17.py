"""Camelyon17-WILDS prepare step and loader, on a tiny bundle written in tmp_path."""

from __future__ import annotations

import importlib.util
import os

import numpy as np
import pandas as pd
import pytest
import torch
from PIL import Image

from lightyear.data import camelyon17, load_site_data
from lightyear.data.split_file import SPLIT_FILE

from repo import ROOT as REPO

PATCHES_PER_CENTER = 10


def write_bundle(root, patches_per_center=PATCHES_PER_CENTER, columns=None):
    """``<root>/camelyon17_v1.0`` with metadata.csv (WILDS header) and 96x96 RGBA patches.

    Centre c holds patients 20c and 20c+1 (WILDS: center = patient // 20); each patch's red
    channel encodes its centre so the tests can check where it went.
    """
    bundle = os.path.join(root, "camelyon17_v1.0")
    rows = []
    for center in range(5):
        for i in range(patches_per_center):
            patient = f"{20 * center + i % 2:03d}"
            node = i % 3
            x, y = 1000 + 96 * i, 2000 + 32 * center
            tumor = int(i % 4 == 0)
            rows.append((patient, node, x, y, tumor, 10 * center + node, center, 0))
            folder = os.path.join(bundle, "patches", f"patient_{patient}_node_{node}")
            os.makedirs(folder, exist_ok=True)
            pixels = np.zeros((96, 96, 4), dtype=np.uint8)
            pixels[..., 0] = 40 * center
            pixels[..., 1] = 200 * tumor
            pixels[..., 3] = 255
            Image.fromarray(pixels, mode="RGBA").save(
                os.path.join(folder, f"patch_patient_{patient}_node_{node}_x_{x}_y_{y}.png")
            )
    frame = pd.DataFrame(rows, columns=["patient", "node", "x_coord", "y_coord", "tumor", "slide", "center", "split"])
    if columns is not None:
        frame = frame.loc[:, columns]
    frame.to_csv(os.path.join(bundle, "metadata.csv"))  # unnamed index column first, as WILDS
    return str(root)


@pytest.fixture
def raw(tmp_path):
    return write_bundle(tmp_path / "wilds")


def test_prepare_one_site_per_hospital(raw, tmp_path):
    path = camelyon17.prepare_camelyon17(raw, str(tmp_path / "out"), seed=0)
    frame = pd.read_csv(path)
    assert list(frame.columns) == ["site", "split", "image", "label"]
    assert sorted(frame["site"].unique()) == [f"site-{k}" for k in range(1, 6)]
    for site, rows in frame.groupby("site"):
        assert rows["split"].value_counts().to_dict() == {"train": 6, "val": 2, "test": 2}
        center = int(site.split("-")[1]) - 1
        for image, label in zip(rows["image"], rows["label"]):
            assert os.path.isabs(image) and os.path.isfile(image)  # raw patches, not copied
            assert f"patient_{20 * center:03d}_" in image or f"patient_{20 * center + 1:03d}_" in image
            assert int(np.asarray(Image.open(image))[0, 0, 1] == 200) == label
    assert sorted(frame["label"].unique()) == [0, 1]
    assert not os.path.exists(tmp_path / "out" / "patches")


def test_prepare_is_deterministic_and_caps_sites(raw, tmp_path):
    a = pd.read_csv(camelyon17.prepare_camelyon17(raw, str(tmp_path / "a"), seed=1))
    b = pd.read_csv(camelyon17.prepare_camelyon17(raw, str(tmp_path / "b"), seed=1))
    c = pd.read_csv(camelyon17.prepare_camelyon17(raw, str(tmp_path / "c"), seed=2))
    pd.testing.assert_frame_equal(a, b)
    assert not a.equals(c)
    capped = pd.read_csv(camelyon17.prepare_camelyon17(raw, str(tmp_path / "d"), seed=1, max_per_site=5))
    assert capped.groupby("site").size().tolist() == [5] * 5
    assert set(capped["image"]) <= set(a["image"])
    again = pd.read_csv(camelyon17.prepare_camelyon17(raw, str(tmp_path / "e"), seed=1, max_per_site=5))
    pd.testing.assert_frame_equal(capped, again)
    other = pd.read_csv(camelyon17.prepare_camelyon17(raw, str(tmp_path / "f"), seed=3, max_per_site=5))
    assert set(other["image"]) != set(capped["image"])


def test_prepare_copy_images_makes_a_standalone_folder(raw, tmp_path):
    out = tmp_path / "root" / "camelyon17"
    frame = pd.read_csv(
        camelyon17.prepare_camelyon17(raw, str(out), max_per_site=4, copy_images=True, fractions=(0.5, 0.25, 0.25))
    )
    assert len(frame) == 20
    for image in frame["image"]:
        assert image.startswith("patches/patient_") and os.path.isfile(out / image)
    assert len(list((out / "patches").rglob("*.png"))) == 20


def test_loader_gives_normalised_rgb_96(raw, tmp_path):
    camelyon17.prepare_camelyon17(raw, str(tmp_path / "root" / "camelyon17"), seed=0)
    data = camelyon17.load_site("site-3", data_root=str(tmp_path / "root"))
    assert (data.num_classes, data.in_channels) == (2, 3)
    assert data.sizes() == {"train": 6, "val": 2, "test": 2}
    image, label = data.test[0]
    assert image.shape == (3, 96, 96) and image.dtype == torch.float32
    assert label in (0, 1)
    # red channel 80/255 (centre 2), blue 0, ImageNet-normalised
    assert torch.allclose(image[0], torch.full((96, 96), (80 / 255 - 0.485) / 0.229), atol=1e-5)
    assert torch.allclose(image[2], torch.full((96, 96), -0.406 / 0.225), atol=1e-5)
    raw_scale = load_site_data("camelyon17", "site-3", data_root=str(tmp_path / "root"), normalize=False, image_size=64)
    small, _ = raw_scale.test[0]
    assert small.shape == (3, 64, 64) and abs(float(small[0].mean()) - 80 / 255) < 1e-5


def test_clear_errors(raw, tmp_path, monkeypatch):
    with pytest.raises(FileNotFoundError, match="does not exist.*camelyon17"):
        camelyon17.prepare_camelyon17(str(tmp_path / "nowhere"), str(tmp_path / "out"))
    (tmp_path / "empty").mkdir()
    with pytest.raises(FileNotFoundError, match="no metadata.csv"):
        camelyon17.prepare_camelyon17(str(tmp_path / "empty"), str(tmp_path / "out"))
    no_tumor = write_bundle(
        tmp_path / "no_tumor", 3, ["patient", "node", "x_coord", "y_coord", "slide", "center", "split"]
    )
    with pytest.raises(ValueError, match="lacks columns \\['tumor'\\]"):
        camelyon17.prepare_camelyon17(no_tumor, str(tmp_path / "out"))
    os.remove(pd.read_csv(camelyon17.prepare_camelyon17(raw, str(tmp_path / "ok")))["image"][0])
    with pytest.raises(FileNotFoundError, match="1 of 50 patches .* missing"):
        camelyon17.prepare_camelyon17(raw, str(tmp_path / "out"))
    with pytest.raises(ValueError, match="max_per_site"):
        camelyon17.prepare_camelyon17(raw, str(tmp_path / "out"), max_per_site=2, check_files=False)
    monkeypatch.delenv("LIGHTYEAR_DATA_ROOT", raising=False)
    with pytest.raises(ValueError, match="LIGHTYEAR_DATA_ROOT"):
        camelyon17.load_site("site-1")
    with pytest.raises(FileNotFoundError, match="prepare the camelyon17 dataset"):
        camelyon17.load_site("site-1", data_root=str(tmp_path / "unprepared"))


def test_prepare_script(raw, tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("LIGHTYEAR_DATA_ROOT", str(tmp_path / "root"))
    spec = importlib.util.spec_from_file_location(
        "prepare_camelyon17", os.path.join(REPO, "datasets", "camelyon17", "prepare.py")
    )
    script = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(script)
    assert script.main(["--raw", os.path.join(raw, "camelyon17_v1.0"), "--max-per-site", "6"]) == 0
    split = tmp_path / "root" / "camelyon17" / SPLIT_FILE
    assert str(split) in capsys.readouterr().out
    assert len(pd.read_csv(split)) == 30
