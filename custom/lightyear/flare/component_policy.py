"""The component policy of a FLARE participant: let it build this package's components, and nothing more.

FLARE 2.9 builds a component only if the participant's ``class_allow_list`` (``local/resources.json``, else
``resources.json.default``, else built in) admits its class; :func:`allow_package` appends only this package's and
plugins' (``"nvflare."`` would reopen FLARE's whole namespace), keeping every other key."""

from __future__ import annotations

import copy
import json
import os
import tempfile

from lightyear.cli import UserError, read_text

PACKAGE_PREFIX = "lightyear."
ALLOW_LIST_KEY = "class_allow_list"
RESOURCES = "resources.json"
RESOURCES_DEFAULT = "resources.json.default"

REFUSAL_FIX_KEY = "if_not_in_allow_list"
REFUSAL_FIX = (
    "add {package}. to class_allow_list in local/resources.json of every participant, keeping the rest: "
    "lightyear-allow <participant>/local (it adds lightyear. and every installed plugin's package); for nvflare "
    "simulator -w WS: mkdir -p WS/local && lightyear-allow WS/local (or run lightyear-simulate JOB -w WS)"
)
"""Written, with the class's top-level package, beside the path of every component FLARE's default policy lacks
(:func:`with_refusal_fix`), so that FLARE's refusal, which quotes the component's configuration, names the fix."""


class AllowListError(UserError):
    """A participant's resources file cannot be read or holds a malformed allow list."""


def flare_default_allow_list() -> list[str]:
    """FLARE's built-in default component policy (the list provisioning writes)."""
    from nvflare.app_common.default_component_policy import DEFAULT_CLASS_ALLOW_LIST

    return list(DEFAULT_CLASS_ALLOW_LIST)


def _covered(entry: str, allow_list: list[str]) -> bool:
    """FLARE's rule: an item admits its exact class, a prefix ending in ".", a package name, or "*" everything."""
    return any(
        item in ("*", entry) or entry.startswith(item if item.endswith(".") else item + ".") for item in allow_list
    )


def with_package(resources: dict, plugins: tuple[str, ...] = ()) -> tuple[dict, list[str]]:
    """(a copy of ``resources`` whose allow list, FLARE's default when missing, also admits this toolkit and the
    ``plugins``' prefixes such as ``"my_package."``, [entries added])."""
    if not isinstance(resources, dict):
        raise AllowListError(f"resources must be a JSON object, got {type(resources).__name__}")
    out = copy.deepcopy(resources)
    allow_list = out.get(ALLOW_LIST_KEY, flare_default_allow_list())
    if not isinstance(allow_list, list) or not all(isinstance(x, str) for x in allow_list):
        raise AllowListError(f"{ALLOW_LIST_KEY} must be a list of strings, got {allow_list!r:.80}")
    added = [e for e in (PACKAGE_PREFIX, *plugins) if not _covered(e, allow_list)]
    out[ALLOW_LIST_KEY] = allow_list + added
    out.setdefault("format_version", 2)
    return out, added


def with_refusal_fix(config):
    """A copy of a job configuration where each component whose class FLARE's default policy lacks carries
    :data:`REFUSAL_FIX` after its path: FLARE refuses such a class before any code of ours runs, quoting the
    configuration (``nvflare/fuel/utils/json_scanner.py``), and ignores unknown keys (``component_builder.py``)."""
    default = flare_default_allow_list()

    def mark(node):
        if isinstance(node, list):
            return [mark(v) for v in node]
        if not isinstance(node, dict):
            return node
        out = {}
        for key, value in node.items():
            if key == REFUSAL_FIX_KEY:
                continue
            out[key] = mark(value)
            if key == "path" and isinstance(value, str) and not _covered(value, default):
                out[REFUSAL_FIX_KEY] = REFUSAL_FIX.format(package=value.split(".")[0])
        return out

    return mark(config)


def _read(path: str) -> dict:
    try:
        return json.loads(read_text(path, "the resources file", "fix or remove it, then run again"))
    except UserError as e:
        raise AllowListError(str(e)) from None
    except ValueError as e:
        raise AllowListError(f"{path} is not valid JSON ({e}): fix or remove it, then run again") from None


def _write_in_place(target: str, resources: dict) -> None:
    """Replace the file ``target`` with ``resources`` through a temporary file beside it, keeping its mode."""
    mode = os.stat(target).st_mode & 0o7777 if os.path.exists(target) else None
    folder = os.path.dirname(target)
    try:
        fd, tmp = tempfile.mkstemp(dir=folder, prefix=f".{os.path.basename(target)}.", suffix=".tmp")
    except OSError as e:
        raise AllowListError(
            f"cannot write in {folder} ({e.strerror}): "
            "run lightyear-allow as the participant's owner, or make the folder writable"
        ) from None
    try:
        with os.fdopen(fd, "w") as f:
            json.dump(resources, f, indent=2)
            f.write("\n")
        os.chmod(tmp, mode if mode is not None else 0o666 & ~_umask())
        os.replace(tmp, target)
    except OSError as e:
        raise AllowListError(
            f"cannot write {target} ({e.strerror}): run lightyear-allow as the participant's owner, or make it writable"
        ) from None
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def allow_package(local_dir: str, plugins: tuple[str, ...] = ()) -> tuple[str, list[str]]:
    """Let ``local_dir``'s participant build this toolkit's and ``plugins``' components (idempotent): edits or writes
    ``resources.json`` (at a link's target, mode kept; else from the default policy); (the file, the entries added)."""
    if not os.path.isdir(local_dir):
        raise AllowListError(f"{local_dir} is not a folder: give a participant's local/ folder (or its startup kit)")
    target = os.path.join(local_dir, RESOURCES)
    default = os.path.join(local_dir, RESOURCES_DEFAULT)
    if os.path.islink(target) and not os.path.exists(target):
        raise AllowListError(
            f"{target} is a link to {os.readlink(target)}, which does not exist: fix or remove the link"
        )
    if os.path.isdir(target):
        raise AllowListError(
            f"{target} is a folder, not a file: remove it (FLARE reads its policy from a resources.json file)"
        )
    source = target if os.path.isfile(target) else default if os.path.isfile(default) else None
    resources = _read(source) if source else {}
    updated, added = with_package(resources, tuple(plugins))
    if source == target and not added:
        return target, []
    _write_in_place(os.path.realpath(target), updated)
    return target, added


def local_folder(path: str) -> str:
    """``path`` itself when it is a ``local/`` folder (named so, or holding a FLARE resources file), else its ``local/``
    subfolder (a startup kit); an :class:`AllowListError` for any other folder, whose policy FLARE would never read."""
    sub = os.path.join(path, "local")
    if os.path.isdir(sub):
        return sub
    named = os.path.basename(os.path.normpath(os.path.abspath(path))) == "local"
    holds = any(os.path.lexists(os.path.join(path, f)) for f in (RESOURCES, RESOURCES_DEFAULT))
    if named or holds or not os.path.isdir(path):
        return path  # a missing folder is refused, with its name, where it is used
    raise AllowListError(
        f"{path} is neither a participant's local/ folder nor a startup kit holding one, so FLARE would never read "
        f"a policy written there: give the local/ folder (for nvflare simulator -w WS: mkdir -p WS/local && "
        f"lightyear-allow WS/local)"
    )
