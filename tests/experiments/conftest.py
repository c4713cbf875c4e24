"""Fixtures of the experiments tests: ``fake``, the stand-in for ``nvflare simulator`` that the
lightyear-sweep tests run (:mod:`sweep_fakes`)."""

import sys

import pytest

from sweep_fakes import FAKE


@pytest.fixture
def fake(tmp_path, monkeypatch):
    path = tmp_path / "fake_nvflare"
    path.write_text(f"#!{sys.executable}\n{FAKE}")
    path.chmod(0o755)
    monkeypatch.setenv("LIGHTYEAR_NVFLARE", str(path))
    return path
