"""Every ``lightyear.<module>...`` a docstring, comment or page names exists: a renamed or removed
module does not live on in the text that explains the code."""

from __future__ import annotations

import importlib
import re
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
DOTTED = re.compile(r"\blightyear(?:\.[A-Za-z_]\w*)+")
NOT_CODE = {
    # names that are not Python: FLARE message topics, job meta keys, entry point groups, a domain
    "lightyear.ping",
    "lightyear.model",
    "lightyear.progress",
    "lightyear.collude",
    "lightyear.round_metrics",
    "lightyear.declare",
    "lightyear.upload",
    "lightyear.forwarded_model",
    "lightyear.certificates",
    "lightyear.method",
    "lightyear.methods",
    "lightyear.attacks",
    "lightyear.datasets",
    "lightyear.models",
    "lightyear.org",
}


def resolves(dotted: str) -> bool:
    parts = dotted.split(".")
    for cut in range(len(parts), 0, -1):
        try:
            found = importlib.import_module(".".join(parts[:cut]))
        except ImportError:
            continue
        for name in parts[cut:]:
            if not hasattr(found, name):
                return False
            found = getattr(found, name)
        return True
    return False


def sources():
    yield from (REPO / "custom" / "lightyear").rglob("*.py")
    yield from (REPO / "benchmarks").rglob("*.py")
    yield from (REPO / "docs").glob("*.md")
    yield REPO / "README.md"


def test_every_named_module_and_object_exists():
    stale = []
    for path in sources():
        for number, line in enumerate(path.read_text().splitlines(), 1):
            for name in DOTTED.findall(line):
                if name in NOT_CODE:
                    continue
                if re.search(rf"{re.escape(name)}\.(py|md|json|yaml)\b", line) or resolves(name):
                    continue
                stale.append(f"{path.relative_to(REPO)}:{number}: {name}")
    assert not stale, "\n".join(stale)
