"""Plugins: what installed packages add to the toolkit through entry points (no FLARE import).

A plugin package announces each dataset, network, method or attack it adds under an entry point
group (``lightyear.datasets``, ``lightyear.models``, ``lightyear.methods``, ``lightyear.attacks``);
the toolkit's own come first and a plugin may not reuse one of their names.
"""

from __future__ import annotations

import importlib
from collections.abc import Mapping
from importlib.metadata import EntryPoint, entry_points


def announced(group: str) -> list[EntryPoint]:
    """The entry points of ``group`` that installed packages announce, sorted by name."""
    return sorted(entry_points(group=group), key=lambda e: e.name)


def load(target: str):
    """The object a ``module:attribute`` target (an entry point's value) names; ImportError or
    AttributeError when it cannot be loaded, for the caller to say which entry point and how to fix it."""
    module, _, attribute = target.partition(":")
    return getattr(importlib.import_module(module), attribute)


def module_table(builtin: Mapping[str, str], group: str, kind: str) -> dict[str, str]:
    """name -> module of every known ``kind`` (dataset, network): ``builtin``'s, then the entry points of
    ``group`` sorted by name, each naming a module. A plugin's name that exists already is refused."""
    found = dict(builtin)
    for entry in announced(group):
        if entry.name in found:
            raise ValueError(
                f"the entry point {entry.name} of group {group} names a {kind} that exists already; rename it"
            )
        found[entry.name] = entry.value
    return found
