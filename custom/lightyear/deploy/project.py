"""A FLARE provisioning project (``project.yml``) for a server, N sites and one admin.

``nvflare provision`` makes each participant's kit: the server named as sites reach it, the sites as jobs name them."""

from __future__ import annotations

import argparse
import re
import sys

import yaml

from lightyear.checks import int_in, positive_int

API_VERSION = 3
DEFAULT_ORG = "lightyear"
DEFAULT_ADMIN = "admin@lightyear.org"
DEFAULT_FED_PORT = 8002
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*$")
_ADMIN = re.compile(r"^[^@\s]+@[^@\s]+$")


def site_names(n: int) -> list[str]:
    """The names generated jobs deploy to: site-1 ... site-n."""
    positive_int("the number of sites", n)
    return [f"site-{i}" for i in range(1, n + 1)]


def project_dict(
    sites: list[str],
    server: str = "localhost",
    name: str = "lightyear",
    fed_learn_port: int = DEFAULT_FED_PORT,
    admin_port: int | None = None,
    org: str = DEFAULT_ORG,
    admin: str = DEFAULT_ADMIN,
) -> dict:
    """The project as a dict, checked; ``admin_port`` defaults to ``fed_learn_port`` (FLARE 2.9 serves both on one)."""
    for label, value in [("project name", name), ("server", server), ("org", org), *[("site", s) for s in sites]]:
        if not isinstance(value, str) or not _NAME.match(value):
            raise ValueError(
                f"{label} {value!r} is not a valid FLARE participant name (letters, digits, '.', '_', '-')"
            )
    if not sites:
        raise ValueError("a project needs at least one site")
    if len(set(sites)) != len(sites) or server in sites:
        raise ValueError(f"participant names must be distinct: server {server!r}, sites {sites}")
    if not isinstance(admin, str) or not _ADMIN.match(admin):
        raise ValueError(f"the admin must be named like an e-mail address (user@org), got {admin!r}")
    admin_port = fed_learn_port if admin_port is None else admin_port
    for label, port in [("fed_learn_port", fed_learn_port), ("admin_port", admin_port)]:
        int_in(label, port, 1, 65535, note="a port number")
    server_entry = {"name": server, "type": "server", "org": org, "fed_learn_port": fed_learn_port}
    if admin_port != fed_learn_port:
        server_entry["admin_port"] = admin_port
    return {
        "api_version": API_VERSION,
        "name": name,
        "description": f"LIGHTYEAR toolkit: a server and {len(sites)} sites",
        "participants": [
            server_entry,
            *[{"name": s, "type": "client", "org": org} for s in sites],
            {"name": admin, "type": "admin", "org": org, "role": "project_admin"},
        ],
        "builders": [
            {
                "path": "nvflare.lighter.impl.workspace.WorkspaceBuilder",
                "args": {"template_file": ["master_template.yml"]},
            },
            {"path": "nvflare.lighter.impl.static_file.StaticFileBuilder", "args": {"config_folder": "config"}},
            {"path": "nvflare.lighter.impl.cert.CertBuilder"},
            {"path": "nvflare.lighter.impl.signature.SignatureBuilder"},
        ],
    }


def write_project(path: str, sites: list[str], **kwargs) -> dict:
    project = project_dict(sites, **kwargs)
    with open(path, "w") as f:
        yaml.safe_dump(project, f, sort_keys=False)
    return project


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m lightyear.deploy.project", description=__doc__.split("\n\n")[0])
    ap.add_argument("--sites", required=True, help="number of sites (site-1 ... site-N) or comma-separated names")
    ap.add_argument("--server", default="localhost", help="the server's host name as the sites reach it")
    ap.add_argument("--fed-port", type=int, default=DEFAULT_FED_PORT)
    ap.add_argument("--admin-port", type=int, default=None)
    ap.add_argument("--name", default="lightyear")
    ap.add_argument("--out", default="project.yml")
    args = ap.parse_args(argv)
    try:
        sites = site_names(int(args.sites)) if args.sites.isdigit() else [s.strip() for s in args.sites.split(",")]
        write_project(
            args.out,
            sites,
            server=args.server,
            name=args.name,
            fed_learn_port=args.fed_port,
            admin_port=args.admin_port,
        )
    except ValueError as e:
        print(f"project: {e}", file=sys.stderr)
        return 2
    print(f"wrote {args.out}: server {args.server}, {len(sites)} sites")
    return 0


if __name__ == "__main__":
    sys.exit(main())
