"""Who sends to whom: neighbour lists of a peer-to-peer job (no FLARE import)."""

from __future__ import annotations

TOPOLOGIES = ("full", "ring", "none")


def neighbours_of(site: str, sites: list[str], topology: str = "full", seed: int = 0, **kwargs) -> list[str]:
    """The sites ``site`` exchanges models with.

    ``full``: every other site (the LIGHTYEAR setting). ``ring``: the previous and next site in
    sorted order. ``none``: no one (each site trains alone).
    """
    sites = sorted(sites)
    if site not in sites:
        raise ValueError(f"{site!r} is not among the sites {sites}")
    if topology == "full":
        return [s for s in sites if s != site]
    if topology == "ring":
        i = sites.index(site)
        return sorted({sites[(i - 1) % len(sites)], sites[(i + 1) % len(sites)]} - {site})
    if topology == "none":
        return []
    raise ValueError(f"unknown topology {topology!r}; choose one of {', '.join(TOPOLOGIES)}")
