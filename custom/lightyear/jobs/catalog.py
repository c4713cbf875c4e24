"""What a job is built from: the known methods and datasets (and the pairs of them whose jobs are
committed under ``jobs/``), a dataset's job settings and a method's configuration templates (its
topology's shared templates with the method's classes and arguments put in).
:mod:`lightyear.jobs.generate` combines them into job folders.
"""

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
    """The known methods (the registry: the toolkit's and installed plugins')."""
    return registry.names()


def method_templates(method: Method, settings: Mapping | None = None, given: Collection[str] = ()) -> tuple[dict, dict]:
    """(server, client) configuration templates of ``method``: its topology's shared templates
    (``app_configs/templates/<topology>/``, the package's) with the method's classes, without the
    arguments it ``omit``s, and with its ``fixed`` values (in place where a template sets the
    argument, else appended to the site executor's).

    With the job's ``settings``, each constructor argument no template sets whose setting the job
    gives is added as that setting's placeholder (:func:`lightyear.jobs.settings.with_direct_arguments`;
    before the appended fixed values); an argument the method omits only when ``--set`` gives it
    (``given``: the ``--set`` keys), not from the other layers."""
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
    """The datasets a job can use: those with a settings file in ``configs/datasets/`` and the
    installed plugins' (whose settings are in their module, :func:`lightyear.data.plugin_settings`)."""
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
    """Every (method, dataset) pair of the toolkit's own: the job folders kept under ``jobs/``
    (installed plugins' methods and datasets have none there)."""
    files = sorted(f[:-5] for f in os.listdir(os.path.join(configs, "datasets")) if f.endswith(".json"))
    return [(m, d) for m in registry.builtin_names() for d in files]
