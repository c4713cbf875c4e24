"""What a job is built from: the known methods and datasets (and the committed pairs), a dataset's job settings and a
method's configuration templates; :mod:`lightyear.jobs.generate` combines them into job folders."""

from __future__ import annotations

import os
from collections.abc import Collection, Mapping

from lightyear import configs as config_folders
from lightyear import data as data_registry
from lightyear.flare.declarations import Method
from lightyear.jobs import registry
from lightyear.jobs.folders import load_json
from lightyear.jobs.settings import with_direct_arguments


def methods() -> list[str]:
    return registry.names()


def method_templates(method: Method, settings: Mapping | None = None, given: Collection[str] = ()) -> tuple[dict, dict]:
    """(server, client) templates of ``method``: its topology's shared ones with its classes, without what it
    ``omit``s, with its ``fixed`` values; with ``settings``, also its direct arguments
    (:func:`lightyear.jobs.settings.with_direct_arguments`), an omitted one only if ``given`` (by ``--set``)."""
    folder = os.path.join(config_folders.bundled(), "templates", method.topology)
    server = load_json(os.path.join(folder, "config_fed_server.json"), "the server template")
    client = load_json(os.path.join(folder, "config_fed_client.json"), "the client template")
    executor = client["executors"][0]["executor"]
    executor["path"] = method.site_path
    workflow = server["workflows"][0]
    components = [executor, workflow]
    if method.rule is not None:
        rule = server["components"][0]
        rule["path"] = method.rule_path
        components.append(rule)
    for component in components:
        component["args"] = {k: v for k, v in component["args"].items() if k not in method.omit}
    appended = []
    for key, value in method.fixed.items():
        holders = [c for c in components if key in c["args"]]
        for component in holders:
            component["args"][key] = value
        if not holders:
            executor["args"][key] = value
            appended.append(key)
    if settings is None:
        return server, client
    skip = set(method.omit) - set(given)
    server, client = with_direct_arguments([server, client], {k: v for k, v in settings.items() if k not in skip})
    executor = client["executors"][0]["executor"]
    for key in appended:
        executor["args"][key] = executor["args"].pop(key)
    return server, client


def datasets(configs: str) -> list[str]:
    """The datasets with a settings file in ``configs/datasets/`` and the installed plugins' (with ``SETTINGS``)."""
    folder = os.path.join(configs, "datasets")
    files = {f[:-5] for f in os.listdir(folder) if f.endswith(".json")}
    return sorted(
        files | {name for name in data_registry.datasets() if data_registry.plugin_settings(name) is not None}
    )


def dataset_settings_of(configs: str, dataset: str):
    """The dataset's job settings: its settings file, or a plugin's ``SETTINGS``."""
    path = os.path.join(configs, "datasets", f"{dataset}.json")
    if not os.path.isfile(path) and data_registry.plugin_settings(dataset) is not None:
        return data_registry.plugin_settings(dataset)
    return load_json(path, "the dataset file")


def committed_jobs(configs: str) -> list[tuple[str, str]]:
    """Every (method, dataset) pair of the toolkit's own: the job folders kept under ``jobs/``."""
    files = sorted(f[:-5] for f in os.listdir(os.path.join(configs, "datasets")) if f.endswith(".json"))
    return [(m, d) for m in registry.builtin_names() for d in files]
