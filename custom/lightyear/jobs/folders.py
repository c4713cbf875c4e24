"""Job folders on disk: reading JSON files, and writing a job folder (:func:`write_job`) only over one the generator
wrote whose files are unchanged since (each lists its files' SHA-256 in :data:`MARK`)."""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import tempfile

from lightyear.cli import UserError, read_text

JOB_FILE = re.compile(r"^(meta\.json|[A-Za-z0-9_]+/config/config_fed_(server|client)\.json)$")
"""The files of a job folder this generator writes."""

MARK = ".lightyear-jobs.json"
"""The list of the files the generator wrote in a job folder, with their SHA-256 (an older folder without it is known
by its file names and meta.json)."""


class JobFolderExists(UserError):
    """The place a job would be written holds something the generator did not write."""


def load_json(path: str, what: str = "the file"):
    """The JSON value in ``path``; a :class:`~lightyear.cli.UserError` naming file and position if not UTF-8 JSON."""
    text = read_text(path, what)
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise UserError(f"{what} {path} is not valid JSON: {exc.msg} at line {exc.lineno} column {exc.colno}") from None
    except ValueError as exc:  # a number Python will not convert (an integer of thousands of digits)
        raise UserError(f"{what} {path} is not usable JSON: {exc}") from None


def job_file_bytes(obj) -> bytes:
    """A job file (a JSON object) as the generator writes it."""
    return (json.dumps(obj, indent=2) + "\n").encode()


def sha256_of(path: str) -> str | None:
    """None when the file cannot be read."""
    try:
        with open(path, "rb") as f:
            return hashlib.sha256(f.read()).hexdigest()
    except OSError:
        return None


def written_files(folder: str) -> dict[str, str] | None:
    """``{relative path: SHA-256}`` of ``folder``'s :data:`MARK` (None without one); a bad mark is
    :class:`JobFolderExists`."""
    path = os.path.join(folder, MARK)
    if not os.path.lexists(path):
        return None
    fix = "check the folder, then pass --force to replace it"
    try:
        mark = load_json(path, "the list of files lightyear-jobs wrote")
    except UserError as exc:
        raise JobFolderExists(f"{exc}: {fix}") from None
    listed = mark.get("sha256") if isinstance(mark, dict) else None
    if not isinstance(listed, dict) or not all(
        JOB_FILE.fullmatch(rel) and isinstance(digest, str) for rel, digest in listed.items()
    ):
        raise JobFolderExists(f"{path} is not the list of files lightyear-jobs writes (a 'sha256' of job files): {fix}")
    return listed


def foreign_files(folder: str) -> list[str]:
    """Files under ``folder`` the generator did not write (not job files, or not in its :data:`MARK`; without a mark,
    a ``meta.json`` lacking the ``lightyear`` block); [] for a job folder the generator wrote."""
    found = sorted(
        os.path.relpath(os.path.join(d, f), folder).replace(os.sep, "/")
        for d, _, names in os.walk(folder)
        for f in names
    )
    found = [rel for rel in found if rel != MARK]
    foreign = [rel for rel in found if not JOB_FILE.fullmatch(rel)]
    listed = written_files(folder)
    if listed is not None:
        return foreign or [rel for rel in found if rel not in listed]
    if found and not foreign:
        try:
            meta = load_json(os.path.join(folder, "meta.json"))
        except (UserError, OSError):
            meta = None
        if not (isinstance(meta, dict) and isinstance(meta.get("lightyear"), dict)):
            foreign = ["meta.json"]
    return foreign


def edited_files(folder: str) -> list[str]:
    """The files of ``folder``'s :data:`MARK` changed since (by hand); a removed one is not (nothing of it is lost)."""
    listed = written_files(folder) or {}
    return [
        rel
        for rel, digest in sorted(listed.items())
        if os.path.lexists(os.path.join(folder, rel)) and sha256_of(os.path.join(folder, rel)) != digest
    ]


def check_replaceable(folder: str, force: bool = False) -> None:
    """Refuse to replace ``folder`` unless it is missing, empty or an unchanged job folder the generator wrote
    (``force``: any folder); a file in the way is refused either way."""
    if os.path.lexists(folder) and not os.path.isdir(folder):
        raise JobFolderExists(f"{folder} is a file, not a job folder: move it away or choose another --out")
    if force or not os.path.isdir(folder):
        return
    foreign = foreign_files(folder)
    if foreign:
        raise JobFolderExists(
            f"{folder} holds files lightyear-jobs did not write ({_first_few(foreign)}): choose another --out, "
            "move them away, or pass --force to replace the folder"
        )
    edited = edited_files(folder)
    if edited:
        raise JobFolderExists(
            f"{folder}: {_first_few(edited)} changed since lightyear-jobs wrote {'it' if len(edited) == 1 else 'them'}"
            ": choose another --out, or pass --force to replace the folder and lose the change (a setting can be "
            "given with --set instead)"
        )


def _first_few(paths: list[str]) -> str:
    return ", ".join(paths[:3]) + (", ..." if len(paths) > 3 else "")


def write_job(files: dict, folder: str, force: bool = False) -> None:
    """Write the job ``files`` as ``folder`` (if :func:`check_replaceable`) with its :data:`MARK`; they are written
    beside it first, so a failure leaves the previous folder as it was."""
    check_replaceable(folder, force)
    parent = os.path.dirname(os.path.abspath(folder))
    os.makedirs(parent, exist_ok=True)
    staging = tempfile.mkdtemp(dir=parent, prefix=f".{os.path.basename(folder)}.")
    try:
        written = {}
        for rel, obj in files.items():
            data = job_file_bytes(obj)
            _write(os.path.join(staging, rel), data)
            written[rel] = hashlib.sha256(data).hexdigest()
        mark = {
            "written_by": "lightyear-jobs, which replaces this folder only while these files are as it wrote them",
            "sha256": dict(sorted(written.items())),
        }
        _write(os.path.join(staging, MARK), job_file_bytes(mark))
        os.chmod(staging, 0o777 & ~_umask())
        if os.path.isdir(folder):
            shutil.rmtree(folder)
        os.rename(staging, folder)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise


def _write(path: str, data: bytes) -> None:
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "wb") as f:
        f.write(data)


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask
