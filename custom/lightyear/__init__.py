"""LIGHTYEAR: resilient peer-to-peer federated learning on NVIDIA FLARE. ``lightyear.algorithms`` holds the pure rules
(agreement score, aggregation, malfunctions, metrics); ``lightyear.flare`` the thin FLARE components on top of them."""

__version__ = "0.1.0"
