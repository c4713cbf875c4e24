"""Job folders on disk: reading a job's JSON files, and writing a job folder in place of one the
generator wrote before (:func:`write_job`), never over a folder it did not write."""

from __future__ import annotations

import json
import os
import re
import shutil
import tempfile

from lightyear.cli import UserError, read_text

JOB_FILE = re.compile(r"^(meta\.json|[A-Za-z0-9_]+/config/config_fed_(server|client)\.json)$")
"""The files of a job folder this generator writes."""


class JobFolderExists(UserError):
    """The place a job would be written holds something the generator did not write."""


def load_json(path: str, what: str = "the file"):
    """The JSON value in ``path``; a :class:`~lightyear.cli.UserError` naming the file and the
    position when it is not UTF-8 JSON."""
    text = read_text(path, what)
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise UserError(f"{what} {path} is not valid JSON: {exc.msg} at line {exc.lineno} column {exc.colno}") from None
    except ValueError as exc:  # a number Python will not convert (an integer of thousands of digits)
        raise UserError(f"{what} {path} is not usable JSON: {exc}") from None


def foreign_files(folder: str) -> list[str]:
    """Files under ``folder`` that the generator does not write, or that show it is not a job
    folder the generator wrote (no ``meta.json`` with its ``lightyear`` block); [] when it is one."""
    found = sorted(os.path.relpath(os.path.join(d, f), folder) for d, _, names in os.walk(folder) for f in names)
    foreign = [rel for rel in found if not JOB_FILE.fullmatch(rel.replace(os.sep, "/"))]
    if found and not foreign:
        try:
            meta = load_json(os.path.join(folder, "meta.json"))
        except (UserError, OSError):
            meta = None
        if not (isinstance(meta, dict) and isinstance(meta.get("lightyear"), dict)):
            foreign = ["meta.json"]
    return foreign


def check_replaceable(folder: str, force: bool = False) -> None:
    """Refuse to replace ``folder`` unless it is missing, empty or a job folder the generator wrote
    (``force``: any folder). A file in the way is refused either way."""
    if os.path.lexists(folder) and not os.path.isdir(folder):
        raise JobFolderExists(f"{folder} is a file, not a job folder: move it away or choose another --out")
    if force or not os.path.isdir(folder):
        return
    foreign = foreign_files(folder)
    if foreign:
        shown = ", ".join(foreign[:3]) + (", ..." if len(foreign) > 3 else "")
        raise JobFolderExists(
            f"{folder} holds files lightyear-jobs did not write ({shown}): choose another --out, move them away, "
            "or pass --force to replace the folder"
        )


def write_job(files: dict, folder: str, force: bool = False) -> None:
    """Write the job ``files`` as ``folder``, replacing a job folder the generator wrote there before
    (any folder with ``force``; see :func:`check_replaceable`). The files are written beside it
    first, so a failure leaves the previous folder as it was."""
    check_replaceable(folder, force)
    parent = os.path.dirname(os.path.abspath(folder))
    os.makedirs(parent, exist_ok=True)
    staging = tempfile.mkdtemp(dir=parent, prefix=f".{os.path.basename(folder)}.")
    try:
        for rel, obj in files.items():
            path = os.path.join(staging, rel)
            os.makedirs(os.path.dirname(path), exist_ok=True)
            with open(path, "w") as f:
                json.dump(obj, f, indent=2)
                f.write("\n")
        os.chmod(staging, 0o777 & ~_umask())
        if os.path.isdir(folder):
            shutil.rmtree(folder)
        os.rename(staging, folder)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask
