"""The dead-code check: vulture finds nothing unused in the package, the benchmarks and the dataset
scripts beyond tests/vulture_whitelist.py (settings: [tool.vulture] in pyproject.toml). A function
only tests call counts as unused: delete it with its tests, or name its real caller in the whitelist."""

import os
import runpy
import subprocess
import sys

import pytest

from repo import ROOT

pytest.importorskip("vulture", reason="vulture is not installed: pip install -e '.[test]' for the dead-code check")

if sys.version_info >= (3, 11):
    import tomllib
else:  # vulture itself needs tomli before Python 3.11
    import tomli as tomllib

WHITELIST = os.path.join(ROOT, "tests", "vulture_whitelist.py")


def vulture(*paths: str) -> subprocess.CompletedProcess:
    """vulture run in the repository, with pyproject.toml's settings (its paths unless ``paths`` are given)."""
    return subprocess.run(
        [sys.executable, "-m", "vulture", *paths], cwd=ROOT, capture_output=True, text=True, timeout=300
    )


def configured_paths() -> list[str]:
    with open(os.path.join(ROOT, "pyproject.toml"), "rb") as f:
        return tomllib.load(f)["tool"]["vulture"]["paths"]


def test_no_dead_code():
    done = vulture()
    assert (done.returncode, done.stdout) == (0, ""), (
        "vulture reports unused code; delete it (and the tests that alone call it), or, when FLARE, an entry point "
        f"or a library calls it, add it to tests/vulture_whitelist.py with that caller:\n{done.stdout}{done.stderr}"
    )


def test_the_check_reports_a_function_nothing_calls(tmp_path):
    extra = tmp_path / "extra.py"
    extra.write_text("def nothing_calls_me():\n    return 1\n")
    done = vulture(*configured_paths(), str(extra))
    assert done.returncode == 3, done.stdout + done.stderr  # vulture's exit status for dead code found
    assert done.stdout.splitlines() == [f"{extra}:1: unused function 'nothing_calls_me' (60% confidence)"]


def test_every_whitelist_entry_still_exists(monkeypatch):
    """The whitelist's expressions run: a name renamed or removed since it was listed fails here."""
    monkeypatch.syspath_prepend(os.path.join(ROOT, "benchmarks"))  # for benchmarks/cpu_profile.py
    runpy.run_path(WHITELIST)
