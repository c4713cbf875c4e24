"""The package as a user installs it: a wheel built from this checkout, installed into a fresh
virtual environment outside the repository, generates jobs there with the configurations it
ships, and every console script it installs answers --help without a traceback.

The environment sees the dependencies already installed for this interpreter (a ``.pth`` file
naming their folders), so nothing is downloaded again; the wheel itself goes in with
``--no-deps``. When setuptools is importable here the wheel is built without build isolation
(no download either); otherwise pip fetches setuptools from PyPI.
"""

import importlib.util
import os
import shutil
import subprocess
import sys
import sysconfig

import pytest

from repo import ROOT, console_scripts

SCRIPTS = tuple(console_scripts())  # every console script pyproject.toml installs


def run(argv, **kwargs):
    done = subprocess.run(argv, capture_output=True, text=True, timeout=600, **kwargs)
    assert done.returncode == 0, f"{' '.join(map(str, argv))}\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
    return done


def build_wheel(tmp_path) -> str:
    """A wheel of a clean copy of the sources (the checkout's build/ and egg-info stay untouched)."""
    src = tmp_path / "src"
    src.mkdir()
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(os.path.join(ROOT, name), src / name)
    shutil.copytree(
        os.path.join(ROOT, "custom", "lightyear"),
        src / "custom" / "lightyear",
        ignore=shutil.ignore_patterns("__pycache__"),
    )
    isolation = ["--no-build-isolation"] if importlib.util.find_spec("setuptools") else []
    run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", *isolation, str(src), "-w", str(tmp_path / "wheels")])
    (wheel,) = os.listdir(tmp_path / "wheels")
    return str(tmp_path / "wheels" / wheel)


def dependency_folders() -> list[str]:
    """Every folder this interpreter imports installed packages from: its own site-packages and those
    it reaches through .pth files or --system-site-packages (an environment layered on another, as
    on a cluster's or a GPU image's PyTorch), which a .pth file naming only the first would miss."""
    here = sysconfig.get_paths()
    found = [here["purelib"], here["platlib"]]
    found += [p for p in sys.path if os.path.basename(p) in ("site-packages", "dist-packages") and os.path.isdir(p)]
    return list(dict.fromkeys(found))


def fresh_venv(folder) -> str:
    """A virtual environment without pip whose Python also sees this interpreter's installed packages."""
    run([sys.executable, "-m", "venv", "--without-pip", str(folder)])
    python = os.path.join(folder, "bin", "python")
    site = run([python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"]).stdout.strip()
    with open(os.path.join(site, "_dependencies.pth"), "w") as f:
        f.write("\n".join(dependency_folders()) + "\n")
    return python


@pytest.mark.extended  # builds and installs a wheel (about 30 s): the second tier, so the first keeps its headroom
@pytest.mark.skipif(sys.platform == "win32", reason="POSIX virtual environment layout")
def test_an_installed_wheel_generates_jobs_outside_the_repository(tmp_path):
    wheel = build_wheel(tmp_path)
    python = fresh_venv(tmp_path / "venv")
    run([sys.executable, "-m", "pip", "--python", python, "install", "-q", "--no-deps", "--no-index", wheel])
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    where = run([python, "-c", "import lightyear; print(lightyear.__file__)"], cwd=elsewhere, env=env).stdout
    assert where.startswith(str(tmp_path / "venv")), where  # the installed copy, not the checkout
    bin_dir = tmp_path / "venv" / "bin"
    done = run(
        [str(bin_dir / "lightyear-jobs"), "--method", "lightyear", "--dataset", "digits", "--set", "rounds=2"],
        cwd=elsewhere,
        env=env,
    )
    job = elsewhere / "jobs" / "lightyear_digits"
    assert done.stdout.strip() == str(job) and (job / "app" / "config" / "config_fed_client.json").exists()
    done = run(
        [str(bin_dir / "lightyear-sweep"), "digits_dynamic", "--out", str(elsewhere / "sweep"), "--dry-run"],
        cwd=elsewhere,
        env=env,
    )
    assert "todo  lightyear_digits_dynamic7_s0" in done.stdout  # the sweep the package ships
    for script in SCRIPTS:
        done = run([str(bin_dir / script), "--help"], cwd=elsewhere, env=env)
        assert "usage:" in done.stdout and "Traceback" not in done.stdout + done.stderr
    refused = subprocess.run(
        [str(bin_dir / "lightyear-jobs"), "--check"],
        cwd=elsewhere,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert (
        refused.returncode == 2
        and "needs a checkout of the repository" in refused.stderr
        and "Traceback" not in refused.stderr
    )
