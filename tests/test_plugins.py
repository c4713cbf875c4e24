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
