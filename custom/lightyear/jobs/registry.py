"""The methods the toolkit knows, by name: its own declarations (:class:`~lightyear.flare.declarations.Method`) and
those installed plugins announce under the entry point group ``lightyear.methods`` (docs/extending.md)."""

from __future__ import annotations

import functools

from lightyear.flare.declarations import Method
from lightyear.plugins import announced, load

GROUP = "lightyear.methods"
"""The entry point group a plugin announces its methods under."""

BUILTIN = (
    "lightyear.p2p.methods.lightyear:METHOD",
    "lightyear.p2p.methods.lightyear_paper:METHOD",
    "lightyear.p2p.methods.local:METHOD",
    "lightyear.p2p.methods.p2p_fedavg:METHOD",
    "lightyear.p2p.methods.balance:METHOD",
    "lightyear.p2p.methods.scclip:METHOD",
    "lightyear.p2p.methods.defta:METHOD",
    "lightyear.star.rules.fedavg:METHOD",
    "lightyear.star.sites.fedprox:METHOD",
    "lightyear.star.sites.ditto:METHOD",
    "lightyear.star.rules.krum:METHOD",
    "lightyear.star.rules.afa:METHOD",
    "lightyear.star.rules.asmr:METHOD",
    "lightyear.star.rules.cfl:METHOD",
    "lightyear.star.rules.fedcap:METHOD",
)
"""The toolkit's own declarations, ``module:attribute``."""

FEATURED = "lightyear"
"""The toolkit's own method, drawn first and in black in the reports' figures."""


class RegistryError(ValueError):
    """A plugin's declaration that cannot be used; the message names the entry point and the fix."""


def _load(target: str, where: str) -> Method:
    try:
        found = load(target)
    except (ImportError, AttributeError) as exc:
        raise RegistryError(
            f"{where} names {target}, which cannot be loaded ({type(exc).__name__}: {exc}); "
            "fix the entry point or reinstall the package that declares it"
        ) from None
    if not isinstance(found, Method):
        raise RegistryError(
            f"{where} names {target}, a {type(found).__name__}, not a lightyear.flare.declarations.Method"
        )
    return found


@functools.cache
def methods() -> dict[str, Method]:
    """name -> declaration of every known method: the toolkit's, then the plugins' (sorted by name)."""
    found: dict[str, Method] = {}
    for target in BUILTIN:
        method = _load(target, "the toolkit")
        found[method.name] = method
    for entry in announced(GROUP):
        method = _load(entry.value, f"the entry point {entry.name} of group {GROUP}")
        if method.name in found:
            raise RegistryError(
                f"the entry point {entry.name} of group {GROUP} declares method {method.name!r}, which exists "
                "already; give the plugin's method another name"
            )
        found[method.name] = method
    return dict(sorted(found.items()))


def builtin_names() -> list[str]:
    return sorted(_load(t, "the toolkit").name for t in BUILTIN)


def method(name: str) -> Method:
    """The declaration of method ``name``; an unknown name is refused with the known ones."""
    known = methods()
    if name not in known:
        raise RegistryError(f"unknown method {name!r}; choose one of {', '.join(known)}")
    return known[name]


def names(topology: str | None = None) -> list[str]:
    return [n for n, m in methods().items() if topology is None or m.topology == topology]


def with_adaptive_attack() -> list[str]:
    """The methods an adaptive attack targets (in the toolkit's order of declaration, then plugins')."""
    return [m.name for m in _declaration_order() if m.adaptive is not None]


def featured() -> list[str]:
    """The methods the reports draw first and in black (the toolkit's own, :data:`FEATURED`)."""
    return [FEATURED] if FEATURED in methods() else []


def _declaration_order() -> list[Method]:
    known = methods()
    builtin = [_load(t, "the toolkit").name for t in BUILTIN]
    return [known[n] for n in builtin] + [m for n, m in known.items() if n not in builtin]


@functools.cache
def plugin_packages() -> tuple[str, ...]:
    """The installed plugins' class packages as allow-list prefixes (``"my_package."``) for
    :func:`lightyear.flare.component_policy.allow_package`; loads only the plugins' declarations (no PyTorch). Read
    once a process, as :func:`methods` is: every component of a generated job is looked up against it."""
    packages = set()
    for entry in announced(GROUP):
        declared = _load(entry.value, f"the entry point {entry.name} of group {GROUP}")
        packages.update(cls.__module__.split(".")[0] + "." for cls in (declared.site, declared.rule) if cls)
    return tuple(sorted(packages - {"lightyear."}))
