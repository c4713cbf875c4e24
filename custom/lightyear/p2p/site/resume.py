"""Where a peer-to-peer site starts: its own checkpoint, a previous job's, or round 0 (no FLARE import).

A restarted site's own checkpoint wins; a job submitted again takes the one ``resume_from`` names
(docs/reliability.md), from a job with the same seed. ``resume_from`` allows only a plain ``{site}`` placeholder (a
format spec such as ``{site:>200000000}`` would build a string of any size).
"""

from __future__ import annotations

import os
import string
from collections.abc import Callable
from typing import Protocol

from lightyear.p2p.site.checkpoint import (
    CHECKPOINT_FILE,
    CheckpointError,
    SiteCheckpoint,
    load_site_checkpoint,
    read_checkpoint_meta,
)

MAX_RESUME_FROM = 4096
"""Longest ``resume_from`` accepted, in characters (Linux's PATH_MAX)."""
OWN_FIX = "remove it to start this site from round 0"
RESUME_FIX = "remove it, point resume_from at another checkpoint, or leave resume_from out to start from round 0"


def check_resume_from(value) -> str | None:
    """None, or a non-empty path of at most MAX_RESUME_FROM characters whose only placeholder is a plain {site}."""
    if value is None:
        return None
    if not isinstance(value, str) or not value.strip() or "\0" in value:
        raise ValueError(
            f"resume_from must be a folder path (with {{site}} for the site's name) or null, got {value!r:.80}"
        )
    if len(value) > MAX_RESUME_FROM:
        raise ValueError(f"resume_from is {len(value)} characters long; a folder path has at most {MAX_RESUME_FROM}")
    try:
        fields = [(name, spec, conv) for _, name, spec, conv in string.Formatter().parse(value) if name is not None]
    except ValueError as exc:
        raise ValueError(
            f"resume_from {value!r:.80} is not a valid path template ({exc}); write {{site}} for the site's name"
        ) from None
    for name, spec, conv in fields:
        if name != "site" or spec or conv:
            shown = "{" + name + (f"!{conv}" if conv else "") + (f":{spec}" if spec else "") + "}"
            raise ValueError(
                "resume_from may hold only the placeholder {site}, written plainly (no format spec or conversion), "
                f"got {shown[:60]!r}"
            )
    return value


def resume_folder(resume_from: str, site: str, workspace_root: str) -> str:
    folder = check_resume_from(resume_from).format(site=site)
    return folder if os.path.isabs(folder) else os.path.join(workspace_root, folder)


def find_checkpoint(
    run_dir: str, meta: dict, site: str, resume_from: str | None
) -> tuple[SiteCheckpoint | None, str, str]:
    """(checkpoint without arrays, folder, fix) to continue from, or (None, "", ""); a ValueError naming the file."""
    own = read_checkpoint_meta(run_dir, fix=OWN_FIX)
    if own is not None and own.meta == meta:
        found, folder, fix = own, run_dir, OWN_FIX
    elif resume_from is None:
        return None, "", ""
    else:
        folder = resume_folder(resume_from, site, os.path.dirname(os.path.abspath(run_dir)))
        found, fix = (read_checkpoint_meta(folder, fix=RESUME_FIX) if os.path.isdir(folder) else None), RESUME_FIX
        if found is None:
            raise ValueError(
                f"resume_from={resume_from!r}: {os.path.join(folder, CHECKPOINT_FILE)} does not exist for {site}; "
                "name the folder holding this site's checkpoint (absolute, with {site} for the site's name, or a "
                "previous job's ID on this site's workspace), or leave resume_from out to start from round 0"
            )
        if found.meta.get("seed") != meta["seed"]:
            raise ValueError(
                f"resume_from: the checkpoint in {folder} comes from a job with seed {found.meta.get('seed')!r:.40}, "
                f"this job has seed {meta['seed']}: resume only with the same seed"
            )
    if not 0 <= found.round < meta["rounds"]:
        raise CheckpointError(
            f"the site checkpoint {os.path.join(folder, CHECKPOINT_FILE)} holds round {found.round}, "
            f"outside this job's rounds 0..{meta['rounds'] - 1}; {fix}"
        )
    return found, folder, fix


class HoldsWeights(Protocol):
    """The site's model as a resume sets it (:class:`~lightyear.training.site_runtime.SiteRuntime`)."""

    def get_weights(self) -> dict: ...

    def set_weights(self, weights: dict) -> None: ...


def resume_into(
    runtime: HoldsWeights,
    restore: Callable[[dict, dict], None],
    folder: str,
    fix: str,
    max_abs: float | None,
    rounds: int,
) -> SiteCheckpoint:
    """Check the checkpoint in ``folder`` against ``runtime``'s fresh model, then load its weights and state."""
    checkpoint = load_site_checkpoint(folder, runtime.get_weights(), max_abs, rounds, fix)
    runtime.set_weights(checkpoint.weights)
    restore_state(checkpoint, folder, fix, restore)
    return checkpoint


def restore_state(checkpoint: SiteCheckpoint, folder: str, fix: str, restore: Callable[[dict, dict], None]) -> None:
    """``restore(state, arrays)`` with the method's state; one it cannot take raises a CheckpointError."""
    try:
        restore(checkpoint.state, checkpoint.arrays)
    except (ValueError, KeyError, TypeError, AttributeError) as exc:
        path = os.path.join(folder, CHECKPOINT_FILE)
        problem = f"{type(exc).__name__}: {exc}"
        raise CheckpointError(
            f"the site checkpoint {path} holds a method state this site cannot take ({problem}); {fix}"
        ) from None
