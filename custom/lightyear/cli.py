"""What every console script shares: a bad input ends in one line, never a traceback.

:func:`command` wraps each ``main``: a :class:`UserError` (the base of the modules' own errors) or an ``OSError``
naming a path becomes ``prog: error: <message>`` on stderr, exit status 2; a reader of the output that went away
(``... | head``) ends it quietly with SIGPIPE's status, as shell tools do. Anything else is a bug and keeps its
traceback. :func:`read_text` reads input files, :func:`output_folder` and :func:`output_file` check outputs first.
"""

from __future__ import annotations

import argparse
import contextlib
import errno
import functools
import math
import os
import select
import signal
import sys
import tempfile


class UserError(ValueError):
    """A bad input: the message names the setting (option, file, key) and the fix."""


OS_FIXES = {
    errno.ENOENT: "check the path",
    errno.EACCES: "check its permissions, or choose a place you may use",
    errno.EPERM: "check its permissions, or choose a place you may use",
    errno.EROFS: "it is on a read-only file system: choose another place",
    errno.EISDIR: "it is a folder: give a file",
    errno.ENOTDIR: "a part of the path is a file, not a folder",
    errno.EEXIST: "it exists already: choose another name",
    errno.ENOSPC: "the disk is full: free space or choose another place",
    errno.ENAMETOOLONG: "the name is too long",
}


def one_line(text: str) -> str:
    """``text`` on one line (line breaks of quoted parser messages become ' | ')."""
    return " | ".join(part.strip() for part in str(text).splitlines() if part.strip())


def os_error_message(exc: OSError) -> str:
    """``<path>: <reason> (<fix>)`` for an OSError that names a path."""
    path = exc.filename if exc.filename2 is None else f"{exc.filename} -> {exc.filename2}"
    reason = exc.strerror or str(exc)
    fix = OS_FIXES.get(exc.errno)
    return f"{path}: {reason}" + (f" ({fix})" if fix else "")


def yaml_problem(exc) -> str:
    """A YAML parser error as ``<problem> at line L, column C`` (PyYAML's own text spans lines)."""
    problem = getattr(exc, "problem", None) or getattr(exc, "context", None)
    mark = getattr(exc, "problem_mark", None) or getattr(exc, "context_mark", None)
    if not problem:
        return one_line(str(exc))
    return problem + (f" at line {mark.line + 1}, column {mark.column + 1}" if mark is not None else "")


def fail(prog: str, message: str) -> int:
    print(f"{prog}: error: {one_line(message)}", file=sys.stderr, flush=True)
    return 2


def _stdout_reader_gone() -> bool:
    """Whether standard output is a pipe whose reading end was closed."""
    try:
        poller = select.poll()
        poller.register(sys.stdout.fileno(), select.POLLOUT)
        return any(events & (select.POLLERR | select.POLLHUP) for _, events in poller.poll(0))
    except (AttributeError, OSError, ValueError):  # no poll on this platform, or stdout is not a file
        return False


def command(prog: str):
    """Decorate a console script's ``main(argv=None)`` so that user errors end in one line and exit status 2."""

    def wrap(main):
        @functools.wraps(main)
        def run(argv=None):
            try:
                return main(argv)
            except UserError as exc:
                return fail(prog, str(exc))
            except BrokenPipeError:
                if not _stdout_reader_gone():
                    raise  # another pipe broke: a bug, keep the traceback
                # the reader went away: stdout goes nowhere so that the exit flush cannot fail
                os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
                return 128 + signal.SIGPIPE
            except OSError as exc:
                if exc.filename is None:
                    raise  # not about a path the user gave: a bug, keep the traceback
                return fail(prog, os_error_message(exc))
            except KeyboardInterrupt:
                print(f"{prog}: interrupted", file=sys.stderr, flush=True)
                return 130

        return run

    return wrap


def read_text(path: str, what: str, fix: str = "") -> str:
    """The text of the UTF-8 file ``path``; a :class:`UserError` naming ``what`` when it cannot be read as such."""
    hint = f": {fix}" if fix else ""
    if os.path.isdir(path):
        raise UserError(f"{what} {path} is a folder, not a file{hint}")
    try:
        with open(path, "rb") as f:
            data = f.read()
    except OSError as exc:
        raise UserError(f"{what} {path} cannot be read ({exc.strerror or exc}){hint}") from None
    try:
        text = data.decode("utf-8").removeprefix("\ufeff")  # a byte-order mark some editors write
    except UnicodeDecodeError as exc:
        raise UserError(
            f"{what} {path} is not a UTF-8 text file (byte {data[exc.start]:#04x} at offset {exc.start}){hint}"
        ) from None
    if "\0" in text:
        raise UserError(f"{what} {path} is not a text file (it holds NUL bytes){hint}")
    return text


def folder_name(path, option: str = "--out") -> str:
    """``path``; a :class:`UserError` naming ``option`` when it is empty or holds a control character."""
    if not isinstance(path, str) or not path.strip():
        raise UserError(f"{option} is empty: give a folder (write '.' for the current folder)")
    if control_characters(path):
        raise UserError(
            f"{option} {path!r:.80} holds a line break or another control character: choose a name without one"
        )
    return path


def output_folder(path: str, option: str = "--out") -> str:
    """The absolute path of the folder ``path``, created if needed and writable; else a :class:`UserError`."""
    path = os.path.abspath(folder_name(path, option))
    if os.path.exists(path) and not os.path.isdir(path):
        raise UserError(f"{option} {path} is a file: give a folder (it is created if missing)")
    try:
        os.makedirs(path, exist_ok=True)
    except OSError as exc:
        raise UserError(f"{option} {path} cannot be created ({exc.strerror or exc}): choose another {option}") from None
    if not os.access(path, os.W_OK | os.X_OK):
        raise UserError(f"{option} {path} is not writable: choose another {option}")
    return path


def _limit(folder: str, name: str, fallback: int) -> int:
    try:
        return os.pathconf(folder, name)
    except (OSError, ValueError):
        return fallback


def output_file(path, option: str, replaceable: bool = False) -> str:
    """Check, before any work, that a file can be written at ``path``; its absolute path. Else a :class:`UserError`
    naming ``option``; an existing file is refused unless ``replaceable`` (one this command wrote, or ``--force``)."""
    full = os.path.abspath(folder_name(path, option))
    folder, name = os.path.split(full)
    if os.path.lexists(full):
        if not os.path.exists(full):
            raise UserError(f"{option} {path} is a link that leads nowhere (or to itself): give another file name")
        if os.path.isdir(full):
            raise UserError(f"{option} {path} is a folder: give a file name")
        if not os.path.isfile(full):
            raise UserError(f"{option} {path} is not a regular file: give another file name")
        if not replaceable:
            raise UserError(
                f"{option} {path} exists and this command did not write it: give another name, "
                "or add --force to replace it"
            )
    ancestor = folder
    while not os.path.lexists(ancestor):
        ancestor = os.path.dirname(ancestor)
    if not os.path.isdir(ancestor):
        raise UserError(f"{option} {path}: {ancestor} is a file, not a folder: give a file in a folder")
    if ancestor != folder:
        raise UserError(f"{option} {path}: the folder {folder} does not exist: create it first, or give another place")
    too_long = len(name.encode()) > _limit(folder, "PC_NAME_MAX", 255)
    if too_long or len(full.encode()) >= _limit(folder, "PC_PATH_MAX", 4096):
        raise UserError(f"{option} {path}: the name is too long: give a shorter one")
    try:  # a folder that takes no new file (/proc, a read-only or full file system) says so now
        with tempfile.NamedTemporaryFile(dir=folder, prefix=".lightyear-check-"):
            pass
    except OSError as exc:
        reason = exc.strerror or exc
        raise UserError(
            f"{option} {path}: no file can be written in {folder} ({reason}): choose another place"
        ) from None
    return full


def seconds(minimum: float = 0.0, positive: bool = False):
    """An argparse ``type`` for a finite number of seconds ``>= minimum`` (``> minimum`` when ``positive``)."""
    bound = f"> {minimum:g}" if positive else f">= {minimum:g}"

    def parse(text: str) -> float:
        try:
            value = float(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not a number of seconds") from None
        if not math.isfinite(value) or value < minimum or (positive and value == minimum):
            raise argparse.ArgumentTypeError(f"{text!r}: give a finite number of seconds {bound}")
        return value

    parse.__name__ = "seconds"
    return parse


def control_characters(value: str) -> bool:
    """Whether ``value`` holds a line break or another control character (lines smuggled into a script or log)."""
    return any(ord(c) < 32 or ord(c) == 127 for c in value)


@contextlib.contextmanager
def terminate_as_interrupt(signals=(signal.SIGTERM, signal.SIGHUP)):
    """Within this block ``signals`` raise KeyboardInterrupt like Ctrl-C, so that cleanup in ``finally`` runs however
    the command is stopped. Yields the names of the signals received, for code that catches the interrupt on its
    way (FLARE's simulator does)."""
    received: list[str] = []

    def handler(signum, frame):
        received.append(signal.Signals(signum).name)
        raise KeyboardInterrupt(f"stopped by signal {signal.Signals(signum).name}")

    previous = {sig: signal.signal(sig, handler) for sig in signals}
    try:
        yield received
    finally:
        for sig, old in previous.items():
            signal.signal(sig, old)
