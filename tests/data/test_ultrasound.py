"""Prepare and load the ultrasound dataset from tiny fixtures in the publisher's layout."""

import importlib.util
import os
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import torch
from PIL import Image

from lightyear.data import SEGMENTATION, load_site_data
from lightyear.data.ultrasound import assign_patients, list_samples, load_site, prepare_ultrasound

from repo import ROOT

TOP = "Fetal Abdominal Structures Segmentation Dataset Using Ultrasonic Images"
HEIGHT, WIDTH = 60, 80

REPO = Path(ROOT)
# Patient tokens as written after "P" (padding varies); "001" and "1" are one patient.
PATIENTS = [
    "01",
    "02",
    "3",
    "004",
    "0149",
    "12",
    "13",
    "0014",
    "15",
    "16",
    "17",
    "18",
    "19",
    "0200",
    "21",
    "22",
    "23",
    "24",
]


def liver_mask() -> np.ndarray:
    """Rows 15..45 of 60 and columns 20..60 of 80: exactly rows/columns 16..48 at 64x64."""
    mask = np.zeros((HEIGHT, WIDTH), dtype=np.uint8)
    mask[15:45, 20:60] = 1
    return mask


def write_sample(folder: Path, name: str, rng: np.random.Generator, grayscale: bool) -> None:
    shape = (HEIGHT, WIDTH) if grayscale else (HEIGHT, WIDTH, 3)
    image = rng.integers(0, 256, size=shape, dtype=np.uint8)
    structures = {key: np.zeros((HEIGHT, WIDTH), dtype=np.uint8) for key in ("artery", "stomach", "vein")}
    structures["liver"] = liver_mask()
    structures["stomach"][5:10, 5:10] = 1
    np.save(folder / "ARRAY_FORMAT" / f"{name}.npy", {"image": image, "structures": structures}, allow_pickle=True)
    Image.fromarray(image).save(folder / "IMAGES" / f"{name}.png")


def make_raw(root: Path, extra_patient_one: bool = True) -> Path:
    """The unzipped dataset, nested twice, with 2-3 images per patient."""
    folder = root / TOP / TOP
    (folder / "ARRAY_FORMAT").mkdir(parents=True)
    (folder / "IMAGES").mkdir()
    rng = np.random.default_rng(0)
    for p, token in enumerate(PATIENTS):
        for n in range(1, 2 + p % 2 + 1):
            write_sample(folder, f"P{token}_IMG{n}", rng, grayscale=(p + n) % 4 == 0)
    if extra_patient_one:
        write_sample(folder, "P001_IMG9", rng, grayscale=False)  # same patient as P01
    np.save(folder / "ARRAY_FORMAT" / "readme.npy", np.zeros(3))  # not a sample: skipped
    return root


@pytest.fixture(scope="module")
def raw(tmp_path_factory) -> Path:
    return make_raw(tmp_path_factory.mktemp("raw"))


@pytest.fixture(scope="module")
def prepared(raw, tmp_path_factory) -> tuple[Path, dict]:
    root = tmp_path_factory.mktemp("data")
    summary = prepare_ultrasound(str(raw), str(root / "ultrasound"), seed=0)
    return root, summary


def test_prepare_writes_five_sites_with_disjoint_patients(prepared):
    root, summary = prepared
    assert summary["patients"] == len(PATIENTS)
    assert summary["skipped_files"] == ["readme.npy"]
    split = pd.read_csv(root / "ultrasound" / "split.csv")
    assert list(split.columns) == ["site", "split", "image", "mask"]
    sources = pd.read_csv(root / "ultrasound" / "sources.csv", dtype=str)
    assert len(split) == len(sources) == summary["images"] == sum(2 + p % 2 for p in range(len(PATIENTS))) + 1
    assert sorted(split["site"].unique()) == [f"site-{k}" for k in range(1, 6)]
    site_sets = [set(rows["patient"]) for _, rows in sources.groupby("site")]
    assert sum(len(s) for s in site_sets) == len(set().union(*site_sets)) == len(PATIENTS)
    for _, rows in sources.groupby("site"):
        per_split = [set(r["patient"]) for _, r in rows.groupby("split")]
        assert len(per_split) == 3 and sum(map(len, per_split)) == len(set().union(*per_split))
    # P01 and P001 are one patient, kept together
    one = sources[sources["patient"] == "1"]
    assert len(one) == 3 and one["site"].nunique() == 1 and one["split"].nunique() == 1
    # image counts are balanced across sites
    counts = split.groupby("site").size()
    assert counts.max() - counts.min() <= 3


def test_loader_gives_64x64_images_and_binary_liver_masks(prepared):
    root, summary = prepared
    expected = np.zeros((64, 64), dtype=np.int64)
    expected[16:48, 16:48] = 1
    for site, sizes in summary["sizes"].items():
        data = load_site_data("ultrasound", site, seed=0, data_root=str(root))
        assert data.task == SEGMENTATION and data.num_classes == 2 and data.in_channels == 1
        assert data.sizes() == sizes and min(sizes.values()) >= 1
        image, mask = data.train[0]
        assert image.shape == (1, 64, 64) and image.dtype == torch.float32
        assert 0.0 <= float(image.min()) and float(image.max()) <= 1.0
        assert mask.shape == (64, 64) and mask.dtype == torch.int64
        assert set(mask.unique().tolist()) == {0, 1}
        assert np.array_equal(mask.numpy(), expected)


def test_prepare_is_deterministic_and_seeded(raw, prepared, tmp_path):
    root, _ = prepared
    again = tmp_path / "again"
    prepare_ultrasound(str(raw), str(again), seed=0)
    assert (again / "split.csv").read_bytes() == (root / "ultrasound" / "split.csv").read_bytes()
    name = pd.read_csv(again / "split.csv")["image"][0]
    assert (again / name).read_bytes() == (root / "ultrasound" / name).read_bytes()
    counts = {f"p{i}": 1 + i % 3 for i in range(40)}
    assert assign_patients(counts, 5, seed=0) == assign_patients(counts, 5, seed=0)
    assert assign_patients(counts, 5, seed=0) != assign_patients(counts, 5, seed=1)


def test_patient_id_as_text_keeps_padding_apart(raw):
    samples, _ = list_samples(os.path.join(raw, TOP, TOP, "ARRAY_FORMAT"), patient_id="text")
    assert {"01", "001"} <= set(samples["patient"])


def test_png_image_source(raw, tmp_path):
    summary = prepare_ultrasound(str(raw), str(tmp_path / "ultrasound"), seed=0, image_source="png")
    data = load_site("site-1", data_root=str(tmp_path))
    assert data.sizes() == summary["sizes"]["site-1"]


def test_prepare_script(raw, tmp_path, monkeypatch):
    spec = importlib.util.spec_from_file_location(
        "prepare_ultrasound_script", REPO / "datasets" / "ultrasound" / "prepare.py"
    )
    script = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(script)
    monkeypatch.setenv("LIGHTYEAR_DATA_ROOT", str(tmp_path))
    assert script.main(["--raw", str(raw), "--seed", "3"]) == 0
    assert (tmp_path / "ultrasound" / "split.csv").is_file()
    assert load_site("site-5").sizes()["train"] >= 1  # found through $LIGHTYEAR_DATA_ROOT


def test_clear_errors(raw, tmp_path, monkeypatch):
    with pytest.raises(FileNotFoundError, match="Mendeley"):
        prepare_ultrasound(str(tmp_path / "nowhere"), str(tmp_path / "out"))
    (tmp_path / "empty").mkdir()
    with pytest.raises(FileNotFoundError, match="ARRAY_FORMAT"):
        prepare_ultrasound(str(tmp_path / "empty"), str(tmp_path / "out"))
    with pytest.raises(
        ValueError, match=r"no 'kidney' mask; its structures are \['artery', 'liver', 'stomach', 'vein'\]"
    ):
        prepare_ultrasound(str(raw), str(tmp_path / "out"), structure="kidney")
    with pytest.raises(FileNotFoundError, match="datasets/ultrasound/prepare.py"):
        load_site("site-1", data_root=str(tmp_path / "nowhere"))
    (tmp_path / "ultrasound").mkdir()
    with pytest.raises(FileNotFoundError, match="no split file"):
        load_site("site-1", data_root=str(tmp_path))
    pd.DataFrame({"site": ["site-1"], "split": ["train"], "image": ["a.png"], "label": [0]}).to_csv(
        tmp_path / "ultrasound" / "split.csv", index=False
    )
    with pytest.raises(ValueError, match=r"lacks columns \['mask'\]"):
        load_site("site-1", data_root=str(tmp_path))
    monkeypatch.delenv("LIGHTYEAR_DATA_ROOT", raising=False)
    with pytest.raises(ValueError, match="LIGHTYEAR_DATA_ROOT"):
        load_site("site-1")


def test_missing_prepared_png_is_a_clear_error(prepared, tmp_path):
    root, _ = prepared
    split = pd.read_csv(root / "ultrasound" / "split.csv")
    split["image"] = [str(root / "ultrasound" / p) for p in split["image"]]
    split["mask"] = [str(root / "ultrasound" / p) for p in split["mask"]]
    split.loc[0, "mask"] = str(tmp_path / "gone.png")
    (tmp_path / "ultrasound").mkdir()
    split.to_csv(tmp_path / "ultrasound" / "split.csv", index=False)
    with pytest.raises(FileNotFoundError, match="re-run the prepare step"):
        load_site(split.loc[0, "site"], data_root=str(tmp_path))
