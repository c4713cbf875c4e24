"""Prepare and load the xray dataset from tiny MIMIC-CXR-JPG + CheXmask fixtures."""

import importlib.util
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import torch
from PIL import Image

from lightyear.data import SEGMENTATION, load_site_data
from lightyear.data.mask_folder import resize_mask
from lightyear.data.xray import decode_rle, load_site, mask_shape, prepare_xray

from repo import ROOT

REPO = Path(ROOT)
HEIGHT, WIDTH = 96, 80  # JPG size; not square, so a Height/Width swap shows
CHEXMASK_HEADER = [
    "dicom_id",
    "Dice RCA (Mean)",
    "Dice RCA (Max)",
    "Landmarks",
    "Left Lung",
    "Right Lung",
    "Heart",
    "Height",
    "Width",
]
METADATA_HEADER = [
    "dicom_id",
    "subject_id",
    "study_id",
    "PerformedProcedureStepDescription",
    "ViewPosition",
    "Rows",
    "Columns",
    "StudyDate",
    "StudyTime",
    "ProcedureCodeSequence_CodeMeaning",
    "ViewCodeSequence_CodeMeaning",
    "PatientOrientationCodeSequence_CodeMeaning",
]


def encode_rle(mask: np.ndarray) -> str:
    """CheXmask's encoding: 1-based starts of runs of ones in the row-major flattened mask, with lengths."""
    flat = np.concatenate([[0], mask.flatten(), [0]])
    edges = np.flatnonzero(flat[1:] != flat[:-1])
    starts, ends = edges[0::2], edges[1::2]
    return " ".join(f"{s + 1} {e - s}" for s, e in zip(starts, ends))


def lungs(index: int) -> tuple[np.ndarray, np.ndarray]:
    """Right and left lung rectangles, shifted a little per image."""
    right = np.zeros((HEIGHT, WIDTH), dtype=np.uint8)
    left = np.zeros((HEIGHT, WIDTH), dtype=np.uint8)
    right[20 + index % 5 : 76, 8:36] = 1
    left[20 : 70 + index % 7, 44:72] = 1
    return right, left


def make_raw(root: Path, ghost: bool = False) -> tuple[Path, Path]:
    """MIMIC-CXR-JPG (files/ + metadata) and CheXmask (OriginalResolution/MIMIC-CXR-JPG.csv) under ``root``."""
    mimic, chexmask = root / "mimic-cxr-jpg", root / "chexmask"
    (chexmask / "OriginalResolution").mkdir(parents=True)
    rng = np.random.default_rng(0)
    meta, masks = [], []
    # 20 patients with one good image; patient 10000000 has a second one; 3 patients with poor masks
    entries = [(f"img{i:02d}", 10000000 + i, 0.9) for i in range(20)] + [("img20", 10000000, 0.85)]
    entries += [(f"bad{i}", 12000000 + i, 0.5) for i in range(3)]
    for i, (dicom, subject, dice) in enumerate(entries):
        study = 50000000 + i
        folder = mimic / "files" / f"p{str(subject)[:2]}" / f"p{subject}" / f"s{study}"
        folder.mkdir(parents=True)
        Image.fromarray(rng.integers(0, 256, size=(HEIGHT, WIDTH), dtype=np.uint8)).save(
            folder / f"{dicom}.jpg", quality=95
        )
        meta.append(
            [
                dicom,
                subject,
                study,
                "CHEST (PA AND LAT)",
                "PA",
                HEIGHT,
                WIDTH,
                21800101,
                120000.0,
                "",
                "postero-anterior",
                "Erect",
            ]
        )
        right, left = lungs(i)
        swapped = i % 3 == 0  # CheXmask's Height/Width may be swapped
        masks.append(
            [
                dicom,
                dice,
                dice + 0.05,
                "[]",
                encode_rle(left),
                encode_rle(right),
                "",
                WIDTH if swapped else HEIGHT,
                HEIGHT if swapped else WIDTH,
            ]
        )
    masks.append(["not-in-mimic", 0.95, 0.97, "[]", "1 5", "10 5", "", HEIGHT, WIDTH])
    if ghost:  # listed everywhere, but its JPG was not downloaded
        meta.append(
            ["ghost", 19999999, 59999999, "CHEST", "AP", HEIGHT, WIDTH, 21800101, 0.0, "", "antero-posterior", "Erect"]
        )
        masks.append(["ghost", 0.95, 0.97, "[]", "1 5", "10 5", "", HEIGHT, WIDTH])
    pd.DataFrame(meta, columns=METADATA_HEADER).to_csv(mimic / "mimic-cxr-2.0.0-metadata.csv.gz", index=False)
    pd.DataFrame(masks, columns=CHEXMASK_HEADER).to_csv(
        chexmask / "OriginalResolution" / "MIMIC-CXR-JPG.csv", index=False
    )
    return chexmask, mimic


def prepare(raw, out, **options):
    chexmask, mimic = raw
    options.setdefault("num_images", 15)
    return prepare_xray(str(chexmask), str(mimic), str(out), **options)


@pytest.fixture(scope="module")
def raw(tmp_path_factory):
    return make_raw(tmp_path_factory.mktemp("raw"))


@pytest.fixture(scope="module")
def prepared(raw, tmp_path_factory):
    root = tmp_path_factory.mktemp("data")
    return root, prepare(raw, root / "xray", seed=0, chunksize=7)


def test_decode_rle_hand_made_case():
    # 3x4, row-major: pixels 2,3,4 (1-based) of row 0 and 7,8 = row 1, columns 2 and 3
    expected = np.array([[0, 1, 1, 1], [0, 0, 1, 1], [0, 0, 0, 0]], dtype=np.uint8)
    assert np.array_equal(decode_rle("2 3 7 2", 3, 4), expected)
    assert np.array_equal(decode_rle("", 2, 2), np.zeros((2, 2), dtype=np.uint8))
    assert np.array_equal(decode_rle(float("nan"), 2, 2), np.zeros((2, 2), dtype=np.uint8))
    right, left = lungs(3)
    assert np.array_equal(decode_rle(encode_rle(left), HEIGHT, WIDTH), left)
    with pytest.raises(ValueError, match="odd count"):
        decode_rle("1 2 3", 3, 4)
    with pytest.raises(ValueError, match="past the 3x4"):
        decode_rle("11 3", 3, 4)
    with pytest.raises(ValueError, match="1-based"):
        decode_rle("0 3", 3, 4)


def test_height_width_swap_is_checked_against_the_jpg():
    assert mask_shape(96, 80, (80, 96), "a") == (96, 80, False)
    assert mask_shape(80, 96, (80, 96), "a") == (96, 80, True)
    with pytest.raises(ValueError, match="OriginalResolution"):
        mask_shape(1024, 1024, (80, 96), "a")


def test_prepare_selects_good_masks_in_five_sites_of_equal_size(prepared):
    root, summary = prepared
    split = pd.read_csv(root / "xray" / "split.csv")
    sources = pd.read_csv(root / "xray" / "sources.csv", dtype={"dicom_id": str, "subject_id": str})
    assert list(split.columns) == ["site", "split", "image", "mask"]
    assert len(split) == summary["images"] == 15
    assert summary["qualifying_rows"] == 21  # 24 images - 3 poor masks; not-in-mimic has no image
    assert summary["height_width_swapped"] == int(sources["height_width_swapped"].sum()) > 0
    assert (sources["dice"] >= 0.7).all() and not sources["dicom_id"].str.startswith("bad").any()
    assert sources["subject_id"].is_unique  # one image per patient
    assert split.groupby("site").size().to_dict() == {f"site-{k}": 3 for k in range(1, 6)}
    assert all(s == {"train": 1, "val": 1, "test": 1} for s in summary["sizes"].values())


def test_masks_are_the_decoded_lungs_at_64x64(prepared):
    root, _ = prepared
    sources = pd.read_csv(root / "xray" / "sources.csv", dtype={"dicom_id": str})
    for row in sources.itertuples():
        index = int(row.dicom_id[3:])
        right, left = lungs(index)
        expected = resize_mask(np.logical_or(right, left), 64)
        written = np.asarray(Image.open(root / "xray" / "masks" / f"{row.dicom_id}.png"))
        assert written.shape == (64, 64) and np.array_equal(written, expected)


def test_loader(prepared):
    root, summary = prepared
    for site in summary["sizes"]:
        data = load_site_data("xray", site, data_root=str(root))
        assert data.task == SEGMENTATION and data.num_classes == 2 and data.in_channels == 1
        assert data.sizes() == {"train": 1, "val": 1, "test": 1}
        image, mask = data.test[0]
        assert image.shape == (1, 64, 64) and image.dtype == torch.float32
        assert mask.shape == (64, 64) and mask.dtype == torch.int64
        assert set(mask.unique().tolist()) == {0, 1}


def test_deterministic_and_seeded(raw, prepared, tmp_path):
    root, _ = prepared
    prepare(raw, tmp_path / "same", seed=0)
    prepare(raw, tmp_path / "other", seed=1)
    first = (root / "xray" / "split.csv").read_bytes()
    assert (tmp_path / "same" / "split.csv").read_bytes() == first
    assert (tmp_path / "other" / "split.csv").read_bytes() != first
    name = pd.read_csv(tmp_path / "same" / "split.csv")["mask"][0]
    assert (tmp_path / "same" / name).read_bytes() == (root / "xray" / name).read_bytes()


def test_options(raw, tmp_path):
    with pytest.raises(ValueError, match="only 20 images qualify"):
        prepare(raw, tmp_path / "a", num_images=25)
    summary = prepare(raw, tmp_path / "b", num_images=20, num_sites=4, min_dice=0.0, one_per_subject=False)
    assert summary["qualifying_rows"] == 24 and len(summary["sizes"]) == 4
    with pytest.raises(ValueError, match="fewer than the 15"):
        prepare(raw, tmp_path / "c", view_positions=["AP"])


def test_prepare_script(raw, tmp_path, monkeypatch):
    spec = importlib.util.spec_from_file_location("prepare_xray_script", REPO / "datasets" / "xray" / "prepare.py")
    script = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(script)
    monkeypatch.setenv("LIGHTYEAR_DATA_ROOT", str(tmp_path))
    chexmask, mimic = raw
    csv = chexmask / "OriginalResolution" / "MIMIC-CXR-JPG.csv"
    assert (
        script.main(
            [
                "--chexmask",
                str(csv),
                "--mimic",
                str(mimic),
                "--num-images",
                "15",
                "--seed",
                "2",
                "--fractions",
                "0.6,0.2,0.2",
            ]
        )
        == 0
    )
    assert load_site("site-2").sizes() == {"train": 1, "val": 1, "test": 1}


def test_clear_errors(raw, tmp_path):
    chexmask, mimic = raw
    with pytest.raises(FileNotFoundError, match="MIMIC-CXR-JPG folder"):
        prepare_xray(str(chexmask), str(tmp_path / "nowhere"), str(tmp_path / "out"))
    with pytest.raises(FileNotFoundError, match="no CheXmask MIMIC-CXR-JPG CSV"):
        prepare_xray(str(tmp_path), str(mimic), str(tmp_path / "out"))
    (tmp_path / "empty-mimic").mkdir()
    with pytest.raises(FileNotFoundError, match="mimic-cxr-2.0.0-metadata"):
        prepare_xray(str(chexmask), str(tmp_path / "empty-mimic"), str(tmp_path / "out"))
    frame = pd.read_csv(chexmask / "OriginalResolution" / "MIMIC-CXR-JPG.csv").rename(columns={"Left Lung": "LeftLung"})
    renamed = tmp_path / "renamed.csv"
    frame.to_csv(renamed, index=False)
    with pytest.raises(ValueError, match=r"lacks columns \['Left Lung'\]"):
        prepare_xray(str(renamed), str(mimic), str(tmp_path / "out"), num_images=15)
    (tmp_path / "xray").mkdir()
    with pytest.raises(FileNotFoundError, match="no split file"):
        load_site("site-1", data_root=str(tmp_path))


def test_missing_jpg_stops_or_is_skipped(tmp_path):
    raw = make_raw(tmp_path / "raw", ghost=True)
    with pytest.raises(FileNotFoundError, match="ghost.jpg does not exist"):
        prepare(raw, tmp_path / "a", num_images=21)  # needs every qualifying image, the ghost too
    with pytest.raises(ValueError, match="1 missing JPGs"):
        prepare(raw, tmp_path / "b", num_images=21, missing_images="skip")
    summary = prepare(raw, tmp_path / "c", num_images=20, missing_images="skip")
    sources = pd.read_csv(tmp_path / "c" / "sources.csv", dtype={"dicom_id": str})
    assert summary["images"] == 20 and "ghost" not in set(sources["dicom_id"])
