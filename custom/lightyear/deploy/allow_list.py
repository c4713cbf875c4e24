"""``lightyear-allow``: add this package to FLARE participants' component allow lists (the policy
itself: :mod:`lightyear.flare.component_policy`)."""

from __future__ import annotations

import argparse
import sys

from lightyear.flare.component_policy import AllowListError, allow_package, local_folder


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(
        prog="lightyear-allow",
        description="Append lightyear. (and the FLARE classes its jobs use) to each participant's component "
        "allow list, keeping the rest of its resources.json.",
    )
    ap.add_argument("folders", nargs="+", help="participant folders (startup kits) or their local/ folders")
    args = ap.parse_args(argv)
    try:
        for folder in args.folders:
            path, added = allow_package(local_folder(folder))
            print(f"{path}: " + (f"added {', '.join(added)}" if added else "already allows this toolkit"))
    except AllowListError as e:
        print(f"lightyear-allow: {e}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
