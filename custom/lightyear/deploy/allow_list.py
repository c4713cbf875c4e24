"""``lightyear-allow``: let FLARE participants build this package (:mod:`lightyear.flare.component_policy`)."""

from __future__ import annotations

import argparse
import os
import sys

from lightyear.cli import command
from lightyear.flare.component_policy import allow_package, local_folder
from lightyear.jobs import registry


@command("lightyear-allow")
def main(argv=None) -> int:
    ap = argparse.ArgumentParser(
        prog="lightyear-allow",
        description="Append lightyear. (and the FLARE classes its jobs use) to each participant's component allow "
        "list, keeping the rest of its resources.json (a link is updated at its target, the file keeps its mode).",
    )
    ap.add_argument("folders", nargs="+", help="participant folders (startup kits) or their local/ folders")
    args = ap.parse_args(argv)
    for folder in args.folders:
        path, added = allow_package(local_folder(folder), registry.plugin_packages())
        shown = f"{path} (a link to {os.path.realpath(path)})" if os.path.islink(path) else path
        print(f"{shown}: " + (f"added {', '.join(added)}" if added else "already allows this toolkit"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
