"""The ISIC 2019 files, classes and centres, and FLamby's image sizes (shared by preparation and loading)."""

from __future__ import annotations

NAME = "isic19"
INPUT_FOLDER = "ISIC_2019_Training_Input"
GROUND_TRUTH = "ISIC_2019_Training_GroundTruth.csv"
METADATA = "ISIC_2019_Training_Metadata.csv"
HAM_METADATA_NAMES = ("HAM10000_metadata", "HAM10000_metadata.csv", "HAM10000_metadata.tab")
GROUND_TRUTH_COLUMNS = ("MEL", "NV", "BCC", "AK", "BKL", "DF", "VASC", "SCC", "UNK")
CLASSES = GROUND_TRUTH_COLUMNS[:8]
NUM_CLASSES = len(CLASSES)
# FLamby's centre ids, keyed by lesion_id[:4] + str(HAM10000 dataset).
CENTRE_IDS = {
    "BCN_nan": 0,
    "HAM_vidir_molemax": 1,
    "HAM_vidir_modern": 2,
    "HAM_rosendahl": 3,
    "MSK4nan": 4,
    "HAM_vienna_dias": 5,
}
NUM_SITES = len(CENTRE_IDS)
PREPROCESSED_SIZE = 224
CROP_SIZE = 200
JPEG_QUALITY = 75  # Pillow's default, with which FLamby saves its preprocessed images
IMAGENET_MEAN = (0.485, 0.456, 0.406)
IMAGENET_STD = (0.229, 0.224, 0.225)
OBTAIN = (
    "download ISIC_2019_Training_Input.zip, ISIC_2019_Training_GroundTruth.csv and "
    "ISIC_2019_Training_Metadata.csv from the ISIC 2019 challenge (challenge.isic-archive.com/data/#2019) "
    "and unzip the images next to the CSVs; see datasets/isic19/README.md"
)
OBTAIN_HAM = (
    "FLamby ships it as flamby/datasets/fed_isic2019/HAM10000_metadata (github.com/owkin/FLamby); "
    "the HAM10000 dataset on Harvard Dataverse (doi:10.7910/DVN/DBW86T) has it as HAM10000_metadata"
)
