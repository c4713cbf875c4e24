"""A user's YAML or JSON settings file read as plain JSON values (pure, no FLARE).

PyYAML's safe loader builds more than JSON holds (dates, sets, keys that are numbers or booleans: ``on: 3`` is
``{True: 3}``) and, like ``json.loads``, silently keeps the last of two equal keys; :func:`plain_document` refuses
each of those with its place and the fix.
"""

from __future__ import annotations

import datetime
import json
import math

from lightyear.cli import UserError, yaml_problem


class DocumentError(UserError):
    """A settings file that is not a plain JSON document; the message names the place and the fix."""


def plain_document(text: str, path: str, yaml_format: bool):
    """The value of ``text`` (YAML when ``yaml_format``, else JSON) read from ``path``; a :class:`DocumentError` for a
    syntax error, a repeated key, a key that is not a string, or a value JSON has no form for (a date, NaN, ...)."""
    try:
        value = _load_yaml(text) if yaml_format else json.loads(text, object_pairs_hook=_unique_pairs)
    except _RepeatedKey as exc:
        raise DocumentError(f"{path} gives the key {exc.key!r:.60} twice: keep one") from None
    except json.JSONDecodeError as exc:
        raise DocumentError(f"{path} is not valid JSON: {exc.msg} at line {exc.lineno}, column {exc.colno}") from None
    except RecursionError:
        raise DocumentError(f"{path} nests lists or mappings too deep to read") from None
    except ValueError as exc:  # a number Python will not convert (an integer of thousands of digits)
        raise DocumentError(f"{path} holds a value that cannot be read ({str(exc).split(';')[0][:100]})") from None
    except Exception as exc:  # noqa: BLE001 - PyYAML's errors, imported lazily
        if type(exc).__module__.startswith("yaml"):
            raise DocumentError(f"{path} is not valid YAML: {yaml_problem(exc)}") from None
        raise
    if problem := _first_problem(value, "", ()):
        raise DocumentError(f"{path}: {problem}")
    return value


class _RepeatedKey(ValueError):
    def __init__(self, key):
        super().__init__(f"repeated key {key!r}")
        self.key = key


def _unique_pairs(pairs):
    out = {}
    for key, value in pairs:
        if key in out:
            raise _RepeatedKey(key)
        out[key] = value
    return out


def _load_yaml(text: str):
    import yaml

    class UniqueKeys(yaml.SafeLoader):
        def construct_mapping(self, node, deep=False):
            # the keys written out must not repeat; they may override what a merge key (<<: *base) brings in
            written = [k for k, _v in node.value if k.tag != "tag:yaml.org,2002:merge"]
            seen = set()
            for key_node in written:
                key = self.construct_object(key_node, deep=deep)
                try:
                    repeated = key in seen
                    seen.add(key)
                except TypeError:  # an unhashable key: named below as a key that is not a string
                    continue
                if repeated:
                    raise _RepeatedKey(key)
            return super().construct_mapping(node, deep=deep)

    return yaml.load(text, Loader=UniqueKeys)  # noqa: S506 - a SafeLoader subclass


MAX_DEPTH = 64  # how deep lists and mappings may nest


def _first_problem(value, where: str, parents: tuple) -> str | None:
    at = f"'{where}'" if where else "the top level"
    if isinstance(value, (dict, list)):
        if any(value is p for p in parents):
            return f"{at} holds itself (a YAML alias inside its own anchor): write the value out"
        if len(parents) >= MAX_DEPTH:
            return f"{at} nests lists or mappings more than {MAX_DEPTH} deep"
        parents = (*parents, value)
    if isinstance(value, dict):
        for key, item in value.items():
            if not isinstance(key, str):
                return f"the key {key!r:.40} in {at} is not a string: quote it (YAML reads on/off/yes/no as true/false)"
            if problem := _first_problem(item, f"{where}.{key}" if where else key, parents):
                return problem
        return None
    if isinstance(value, list):
        for n, item in enumerate(value):
            if problem := _first_problem(item, f"{where}[{n}]", parents):
                return problem
        return None
    if isinstance(value, float) and not math.isfinite(value):
        return f"{at} is {value}, which is no number a setting can take"
    if value is None or isinstance(value, (str, bool, int, float)):
        return None
    kind = "a date" if isinstance(value, (datetime.date, datetime.datetime)) else type(value).__name__
    return f"{at} holds {str(value)[:40]!r}, {kind}, which is no JSON value: write it as a string (in quotes) or a list"
