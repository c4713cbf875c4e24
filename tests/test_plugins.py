"""The table of datasets and networks that plugins extend through entry points."""

from types import SimpleNamespace

import pytest

from lightyear import plugins


def _entries(monkeypatch, **named):
    found = [SimpleNamespace(name=n, value=v) for n, v in named.items()]
    monkeypatch.setattr(plugins, "entry_points", lambda group: found if group == "g" else [])


def test_plugins_come_after_the_toolkits_own_sorted_by_name(monkeypatch):
    _entries(monkeypatch, zeta="pkg.zeta", alpha="pkg.alpha")
    table = plugins.module_table({"digits": "lightyear.data.digits"}, "g", "dataset")
    assert list(table.items()) == [
        ("digits", "lightyear.data.digits"),
        ("alpha", "pkg.alpha"),
        ("zeta", "pkg.zeta"),
    ]


def test_a_plugin_may_not_take_a_name_the_toolkit_has(monkeypatch):
    _entries(monkeypatch, cnn="pkg.cnn")
    with pytest.raises(ValueError, match="entry point cnn of group g names a network that exists already; rename it"):
        plugins.module_table({"cnn": "lightyear.models.femnist_cnn"}, "g", "network")


def test_the_builtin_table_is_not_changed(monkeypatch):
    _entries(monkeypatch, extra="pkg.extra")
    builtin = {"cnn": "lightyear.models.femnist_cnn"}
    plugins.module_table(builtin, "g", "network")
    assert builtin == {"cnn": "lightyear.models.femnist_cnn"}


def test_the_plugins_packages_are_read_once_a_process_however_many_components_a_job_has(monkeypatch):
    from lightyear.jobs import registry, settings

    reads = []
    monkeypatch.setattr(registry, "announced", lambda group: reads.append(group) or [])
    forget = getattr(registry.plugin_packages, "cache_clear", lambda: None)
    forget()
    try:
        job = {"components": [{"path": "lightyear.a.A", "args": {"inner": {"path": "lightyear.b.B"}}}] * 3}
        assert [c["path"] for c in settings.toolkit_components(job)] == ["lightyear.a.A", "lightyear.b.B"] * 3
        settings.toolkit_components(job)
        assert registry.plugin_packages() == () and reads == [registry.GROUP]
    finally:
        forget()
