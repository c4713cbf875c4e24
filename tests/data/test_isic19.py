"""Fed-ISIC2019 prepare step, augmentations and loader, on tiny ISIC/HAM10000 files in tmp_path."""

from __future__ import annotations

import importlib.util
import math
import os

import numpy as np
import pandas as pd
import pytest
import torch
from PIL import Image

from lightyear.data import isic19, load_site_data
from lightyear.data.isic19 import augment, constants, prepare
from lightyear.data.split_file import SPLIT_FILE

from repo import ROOT as REPO

GT_COLUMNS = ["MEL", "NV", "BCC", "AK", "BKL", "DF", "VASC", "SCC", "UNK"]
# (lesion_id prefix, HAM10000 dataset or None) of FLamby's centres 0..5
CENTRES = [
    ("BCN_", None),
    ("HAM_", "vidir_molemax"),
    ("HAM_", "vidir_modern"),
    ("HAM_", "rosendahl"),
    ("MSK4", None),
    ("HAM_", "vienna_dias"),
]
IMAGES_PER_CENTRE = 5


def image_id(centre: int, i: int) -> str:
    return f"ISIC_{centre}{i:06d}"


def label_of(centre: int, i: int) -> int:
    return (centre + 3 * i) % 8


def write_raw(root, unk: bool = False, extra_lesion: str | None = None):
    """ISIC 2019 training files (80x60 JPEGs, ground truth, metadata) and HAM10000 metadata."""
    root = str(root)
    folder = os.path.join(root, "ISIC_2019_Training_Input")
    os.makedirs(folder)
    for name in ("ATTRIBUTION.txt", "LICENSE.txt"):
        open(os.path.join(folder, name), "w").write("ISIC 2019\n")
    rng = np.random.default_rng(0)
    gt, meta, ham = [], [], []

    def add(image, lesion, label):
        colour = rng.integers(60, 200, size=3)
        ramp = np.linspace(-40, 40, 80)[None, :, None] + np.linspace(-20, 20, 60)[:, None, None]
        pixels = np.clip(colour + ramp, 0, 255).astype(np.uint8)  # smooth, like a photograph
        Image.fromarray(pixels).save(os.path.join(folder, f"{image}.jpg"))
        onehot = [0.0] * 9
        onehot[label] = 1.0
        gt.append([image] + onehot)
        meta.append([image, 45.0, "anterior torso", lesion, "female"])

    for c, (prefix, dataset) in enumerate(CENTRES):
        for i in range(IMAGES_PER_CENTRE):
            image = image_id(c, i)
            lesion = f"{prefix}{c}{i:06d}" if prefix != "MSK4" else f"MSK4_{c}{i:06d}"
            add(image, lesion, label_of(c, i))
            if dataset is not None:
                ham.append([lesion, image, "nv", "histo", 45.0, "female", "back", dataset])
    add("ISIC_9000000", None, 1)  # no lesion_id: FLamby drops it
    add("ISIC_9000001", None, 8)  # dropped, so its UNK label does not matter
    if unk:
        add("ISIC_9000002", "BCN_9000002", 8)
    if extra_lesion:
        add("ISIC_9000003", extra_lesion, 0)
    pd.DataFrame(gt, columns=["image"] + GT_COLUMNS).to_csv(
        os.path.join(root, "ISIC_2019_Training_GroundTruth.csv"), index=False
    )
    pd.DataFrame(meta, columns=["image", "age_approx", "anatom_site_general", "lesion_id", "sex"]).to_csv(
        os.path.join(root, "ISIC_2019_Training_Metadata.csv"), index=False
    )
    ham_columns = ["lesion_id", "image_id", "dx", "dx_type", "age", "sex", "localization", "dataset"]
    pd.DataFrame(ham, columns=ham_columns).to_csv(os.path.join(root, "HAM10000_metadata"), index=False)
    return root


@pytest.fixture(scope="module")
def prepared(tmp_path_factory):
    """Raw files and one prepared root (seed 0), shared by the tests that only read them."""
    base = tmp_path_factory.mktemp("isic")
    raw = write_raw(base / "raw")
    root = base / "root"
    path = prepare.prepare_isic19(raw, str(root / "isic19"), seed=0)
    return raw, str(root), path


def test_prepare_maps_flamby_centres_to_sites(prepared):
    raw, root, path = prepared
    frame = pd.read_csv(path)
    assert list(frame.columns) == ["site", "split", "image", "label"]
    assert sorted(frame["site"].unique()) == [f"site-{k}" for k in range(1, 7)]
    assert len(frame) == 6 * IMAGES_PER_CENTRE  # the two images without lesion_id are dropped
    for site, rows in frame.groupby("site"):
        centre = int(site.split("-")[1]) - 1
        assert rows["split"].value_counts().to_dict() == {"train": 3, "val": 1, "test": 1}
        for image, label in zip(rows["image"], rows["label"]):
            name = os.path.basename(image)[: -len(".jpg")]
            assert image == f"images/{name}.jpg"
            assert int(name[5]) == centre and label == label_of(centre, int(name[6:]))
    assert frame["label"].between(0, 7).all()


def test_prepare_resizes_shorter_side_and_applies_colour_constancy(prepared):
    raw, root, path = prepared
    image = pd.read_csv(path)["image"][0]
    with Image.open(os.path.join(root, "isic19", image)) as out:
        assert out.size == (298, 224) and out.mode == "RGB"  # 80x60 -> shorter side 224
        pixels = np.asarray(out).astype(np.float64)
    with Image.open(os.path.join(raw, "ISIC_2019_Training_Input", os.path.basename(image))) as src:
        expected = prepare.shades_of_gray(np.asarray(prepare.resize_shorter_side(src.convert("RGB"))))
    assert np.abs(pixels - expected).mean() < 2.0  # JPEG round trip


def test_shades_of_gray_makes_a_uniform_colour_gray_truncating_as_flamby():
    pixels = np.empty((4, 5, 3), dtype=np.uint8)
    pixels[...] = (100, 60, 200)
    gray = math.sqrt(100**2 + 60**2 + 200**2) / math.sqrt(3)  # 133.67: FLamby's cast to uint8 keeps 133
    np.testing.assert_array_equal(prepare.shades_of_gray(pixels), np.full((4, 5, 3), math.floor(gray), dtype=np.uint8))
    bright = np.full((2, 2, 3), (250, 10, 10), dtype=np.uint8)
    assert prepare.shades_of_gray(bright).max() <= 255  # clipped, not wrapped


def test_prepare_is_deterministic_in_the_seed(prepared, tmp_path):
    raw, root, path = prepared
    again = pd.read_csv(prepare.prepare_isic19(raw, str(tmp_path / "a"), seed=0, color_constancy=False))
    other = pd.read_csv(prepare.prepare_isic19(raw, str(tmp_path / "b"), seed=7, color_constancy=False))
    first = pd.read_csv(path)
    pd.testing.assert_frame_equal(first, again)
    assert not first.equals(other)
    assert sorted(first["image"]) == sorted(other["image"])


def test_flamby_centres_rejects_unknown_origin():
    metadata = pd.DataFrame({"image": ["a", "b", "c"], "lesion_id": ["BCN_1", "MSK1_2", None]})
    ham = pd.DataFrame({"image_id": ["x"], "dataset": ["vidir_modern"]})
    with pytest.raises(ValueError, match="unknown origin.*MSK1nan"):
        prepare.flamby_centres(metadata, ham)
    ok = prepare.flamby_centres(metadata.iloc[[0, 2]], ham)
    assert ok.to_dict("list") == {"image": ["a"], "dataset": ["BCN_nan"], "center": [0]}


def test_loader_shapes_labels_and_augmentation(prepared):
    raw, root, path = prepared
    data = isic19.load_site("site-2", data_root=root)
    assert (data.num_classes, data.in_channels) == (8, 3)
    assert data.sizes() == {"train": 3, "val": 1, "test": 1}
    torch.manual_seed(0)
    train_a, label = data.train[0]
    train_b, _ = data.train[0]
    torch.manual_seed(0)
    train_c, _ = data.train[0]
    assert train_a.shape == (3, 200, 200) and train_a.dtype == torch.float32
    assert isinstance(label, int) and 0 <= label < 8
    assert torch.equal(train_a, train_c) and not torch.equal(train_a, train_b)

    val, _ = data.val[0]
    with Image.open(data.val.paths[0]) as image:
        pixels = torch.from_numpy(np.asarray(image.convert("RGB")).copy()).permute(2, 0, 1).float() / 255
    top, left = round((pixels.shape[1] - 200) / 2), round((pixels.shape[2] - 200) / 2)
    crop = pixels[:, top : top + 200, left : left + 200]
    mean, std = (
        torch.tensor(constants.IMAGENET_MEAN)[:, None, None],
        torch.tensor(constants.IMAGENET_STD)[:, None, None],
    )
    assert torch.allclose(val, (crop - mean) / std, atol=1e-5)

    plain = load_site_data("isic19", "site-2", data_root=root, augment=False, crop_size=160)
    assert plain.train[0][0].shape == (3, 160, 160)
    assert torch.equal(plain.train[0][0], plain.train[0][0])
    with pytest.raises(ValueError, match="coarse_dropout_holes"):
        isic19.load_site("site-2", data_root=root, coarse_dropout_holes=-1)


def test_augmentation_steps():
    image = torch.full((3, 60, 80), 0.5)
    image[0, :, :40] = 0.8
    rotated = augment.RandomRotateReflect(50.0, p=1.0)(image)
    assert rotated.shape == image.shape
    assert float(rotated.min()) > 0.45  # reflected border, no black corners
    scaled = augment.RandomScale(0.07, p=1.0)(image)
    assert 55 <= scaled.shape[1] <= 64 and 74 <= scaled.shape[2] <= 85
    torch.manual_seed(1)
    adjusted = augment.RandomBrightnessContrast(0.15, 0.1, p=1.0)(image)
    ratio = (adjusted[0, 0, 0] - adjusted[1, 0, 0]) / (0.8 - 0.5)  # alpha, contrast in 1 +- 0.1
    assert 0.9 <= float(ratio) <= 1.1 and abs(float(adjusted[1, 0, 0] - 0.5 * ratio)) <= 0.15
    corners = torch.arange(4.0).reshape(1, 2, 2)  # [[0, 1], [2, 3]]
    flips = {tuple(augment.RandomFlip(p=1.0)(corners).flatten().tolist()) for _ in range(60)}
    assert flips == {(1.0, 0.0, 3.0, 2.0), (2.0, 3.0, 0.0, 1.0), (3.0, 2.0, 1.0, 0.0)}  # h, v, both; never none
    dropped = augment.CoarseDropout(holes=3, size=16, p=1.0)(torch.ones(3, 200, 200))
    assert 16 * 16 <= int((dropped[0] == 0).sum()) <= 3 * 16 * 16
    assert torch.equal(augment.CoarseDropout(holes=0)(image), image)


def test_clear_errors(prepared, tmp_path, monkeypatch):
    raw, root, path = prepared
    with pytest.raises(prepare.PrepareError, match="does not exist.*ISIC_2019_Training_Input.zip"):
        prepare.prepare_isic19(str(tmp_path / "nowhere"), str(tmp_path / "out"))
    with pytest.raises(prepare.PrepareError, match="HAM10000 metadata not found.*FLamby"):
        prepare.prepare_isic19(raw, str(tmp_path / "out"), ham_metadata=str(tmp_path / "HAM10000_metadata"))
    unk = write_raw(tmp_path / "unk", unk=True)
    with pytest.raises(ValueError, match="1 images .*ISIC_9000002.* labelled UNK"):
        prepare.prepare_isic19(unk, str(tmp_path / "out"))
    odd = write_raw(tmp_path / "odd", extra_lesion="MSK2_0000001")
    with pytest.raises(ValueError, match="unknown origin.*MSK2nan"):
        prepare.prepare_isic19(odd, str(tmp_path / "out"))
    broken = write_raw(tmp_path / "broken")
    gt = pd.read_csv(os.path.join(broken, "ISIC_2019_Training_GroundTruth.csv")).drop(columns=["UNK"])
    gt.to_csv(os.path.join(broken, "ISIC_2019_Training_GroundTruth.csv"), index=False)
    with pytest.raises(ValueError, match="lacks columns \\['UNK'\\]"):
        prepare.prepare_isic19(broken, str(tmp_path / "out"))
    missing = write_raw(tmp_path / "missing")
    os.remove(os.path.join(missing, "ISIC_2019_Training_Input", f"{image_id(3, 2)}.jpg"))
    with pytest.raises(prepare.PrepareError, match=f"1 of 30 images are missing.*{image_id(3, 2)}"):
        prepare.prepare_isic19(missing, str(tmp_path / "out"))
    monkeypatch.delenv("LIGHTYEAR_DATA_ROOT", raising=False)
    with pytest.raises(ValueError, match="LIGHTYEAR_DATA_ROOT"):
        isic19.load_site("site-1")
    with pytest.raises(FileNotFoundError, match="prepare the isic19 dataset"):
        isic19.load_site("site-1", data_root=str(tmp_path / "unprepared"))


def prepare_script():
    spec = importlib.util.spec_from_file_location(
        "prepare_isic19", os.path.join(REPO, "datasets", "isic19", "prepare.py")
    )
    script = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(script)
    return script


def test_the_prepare_script_names_a_missing_or_other_ham_metadata_in_one_line(prepared, tmp_path, capsys):
    raw, root, path = prepared
    common = pd.read_csv(os.path.join(raw, "HAM10000_metadata")).drop(columns=["dataset"])  # the widespread copy
    common.to_csv(tmp_path / "HAM10000_metadata.csv", index=False)
    (tmp_path / "binary.csv").write_bytes(b"\x00\xff\xfe")
    for ham, message in (
        (tmp_path / "HAM10000_metadata.csv", "lacks columns ['dataset']"),
        (tmp_path / "missing.csv", "HAM10000 metadata not found at"),
        (tmp_path / "binary.csv", "is not a readable table"),
    ):
        assert prepare_script().main(["--raw", raw, "--ham-metadata", str(ham), "--out", str(tmp_path / "out")]) == 2
        err = capsys.readouterr().err
        assert err.startswith("datasets/isic19/prepare.py: error: ") and message in err and err.count("\n") == 1, err
        assert not (tmp_path / "out").exists()


def test_prepare_script_with_workers(prepared, tmp_path, monkeypatch, capsys):
    raw, root, path = prepared
    monkeypatch.setenv("LIGHTYEAR_DATA_ROOT", str(tmp_path / "root"))
    script = prepare_script()
    ham = os.path.join(raw, "HAM10000_metadata")
    assert script.main(["--raw", raw, "--ham-metadata", ham, "--workers", "2", "--seed", "0"]) == 0
    split = tmp_path / "root" / "isic19" / SPLIT_FILE
    assert str(split) in capsys.readouterr().out
    pd.testing.assert_frame_equal(pd.read_csv(split), pd.read_csv(path))
    assert len(list((tmp_path / "root" / "isic19" / "images").glob("*.jpg"))) == 30
