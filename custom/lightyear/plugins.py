"""Plugins: the datasets, networks, methods and attacks installed packages add through entry point groups
(``lightyear.datasets``, ``lightyear.models``, ``lightyear.methods``, ``lightyear.attacks``; no FLARE import). The
toolkit's own come first, and a plugin may not reuse one of their names.
"""

from __future__ import annotations

import importlib
from collections.abc import Mapping
from importlib.metadata import EntryPoint, entry_points


def announced(group: str) -> list[EntryPoint]:
    """The entry points of ``group`` that installed packages announce, sorted by name."""
    return sorted(entry_points(group=group), key=lambda e: e.name)


def load(target: str):
    """The object a ``module:attribute`` target names; ImportError or AttributeError for the caller to explain."""
    module, _, attribute = target.partition(":")
    return getattr(importlib.import_module(module), attribute)


def module_table(builtin: Mapping[str, str], group: str, kind: str) -> dict[str, str]:
    """name -> module: ``builtin``, then ``group``'s entry points; a ValueError for a name that exists already."""
    found = dict(builtin)
    for entry in announced(group):
        if entry.name in found:
            raise ValueError(
                f"the entry point {entry.name} of group {group} names a {kind} that exists already; rename it"
            )
        found[entry.name] = entry.value
    return found
