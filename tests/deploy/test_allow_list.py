"""lightyear-allow: a participant's policy gains this toolkit and nothing more."""

import json
import os

import pytest

from lightyear.deploy import allow_list
from lightyear.flare import component_policy
from lightyear.flare.component_policy import AllowListError, allow_package, with_package

from repo import ROOT


def _write(path, obj):
    with open(path, "w") as f:
        json.dump(obj, f)


def _read(path):
    with open(path) as f:
        return json.load(f)


def test_a_provisioned_default_file_keeps_every_key_and_gains_only_the_package(tmp_path):
    default = {
        "format_version": 2,
        "class_allow_list": ["nvflare.app_common.workflows.fedavg.FedAvg"],
        "components": [
            {
                "id": "resource_manager",
                "path": "nvflare.app_common.resource_managers.gpu_resource_manager.GPUResourceManager",
            }
        ],
        "snapshot_persistor": {"path": "x"},
    }
    _write(tmp_path / "resources.json.default", default)
    path, added = allow_package(str(tmp_path))
    assert path == str(tmp_path / "resources.json")
    out = _read(path)
    assert out["components"] == default["components"] and out["snapshot_persistor"] == default["snapshot_persistor"]
    assert out["class_allow_list"][:1] == default["class_allow_list"]
    assert "lightyear." in out["class_allow_list"]
    assert "nvflare." not in out["class_allow_list"]
    assert added == ["lightyear."]  # the jobs name no FLARE class beyond its default list
    # the provisioned default is left as it was
    assert _read(tmp_path / "resources.json.default") == default


def test_running_it_twice_changes_nothing_the_second_time(tmp_path):
    path, added = allow_package(str(tmp_path))
    first = _read(path)
    assert added
    path, added = allow_package(str(tmp_path))
    assert added == [] and _read(path) == first


def test_no_policy_at_all_means_flare_default_plus_the_package(tmp_path):
    path, _ = allow_package(str(tmp_path))
    listed = _read(path)["class_allow_list"]
    defaults = component_policy.flare_default_allow_list()
    assert listed[: len(defaults)] == defaults
    assert listed == defaults + ["lightyear."]
    assert "nvflare." not in listed


def test_entries_already_covered_by_a_prefix_are_not_added_again():
    out, added = with_package({"class_allow_list": ["lightyear", "nvflare.app_common.widgets"]})
    assert added == [] and out["class_allow_list"] == ["lightyear", "nvflare.app_common.widgets"]
    out, added = with_package({"class_allow_list": ["nvflare.app_common.widgets"]})
    assert added == ["lightyear."]
    out, added = with_package({"class_allow_list": ["*"]})
    assert added == [] and out["class_allow_list"] == ["*"]


def test_malformed_files_are_refused_with_the_file_named(tmp_path):
    (tmp_path / "resources.json").write_text("{not json")
    with pytest.raises(AllowListError, match="resources.json is not valid JSON"):
        allow_package(str(tmp_path))
    assert (tmp_path / "resources.json").read_text() == "{not json"  # left as it was
    _write(tmp_path / "resources.json", {"class_allow_list": "lightyear."})
    with pytest.raises(AllowListError, match="must be a list of strings"):
        allow_package(str(tmp_path))
    with pytest.raises(AllowListError, match="not a folder"):
        allow_package(str(tmp_path / "missing"))


def test_the_cli_takes_startup_kits_and_reports_what_it_added(tmp_path, capsys):
    kit = tmp_path / "site-1"
    (kit / "local").mkdir(parents=True)
    assert allow_list.main([str(kit)]) == 0
    assert "added lightyear." in capsys.readouterr().out
    assert os.path.isfile(kit / "local" / "resources.json")
    (kit / "local" / "resources.json").write_text("[")
    assert allow_list.main([str(kit)]) == 2


def test_the_repository_workspace_policy_is_flare_default_plus_the_package():
    listed = _read(os.path.join(ROOT, "workspace", "local", "resources.json"))["class_allow_list"]
    assert "nvflare." not in listed
    _, added = with_package({"class_allow_list": listed})
    assert added == []
    assert set(listed) == set(component_policy.flare_default_allow_list()) | {"lightyear."}


def _components(obj):
    """Every dict of a configuration that names a class (``path``)."""
    if isinstance(obj, dict):
        if isinstance(obj.get("path"), str):
            yield obj
        for v in obj.values():
            yield from _components(v)
    elif isinstance(obj, list):
        for v in obj:
            yield from _components(v)


def test_every_flare_class_a_job_names_is_allowed_by_the_default_list_plus_ours():
    """Generated jobs, and the Job API's folders (the same files), name no FLARE class that a
    participant with FLARE's default policy would refuse after ``lightyear-allow``."""
    from lightyear.jobs import generate

    configs = os.path.join(ROOT, "app_configs")
    allowed = with_package({})[0]["class_allow_list"]
    for method in generate.methods():
        for malfunction, faulty in (("none", 0), ("sfa", 1)):
            _, files = generate.build_job(configs, method, "digits", malfunction, faulty)
            for name in (
                "app/config/config_fed_server.json",
                "app/config/config_fed_client.json",
                "app_faulty/config/config_fed_client.json",
            ):
                for path in (c["path"] for c in _components(files.get(name, {}))):
                    assert component_policy._covered(path, allowed), f"{method}: {path} is not allowed"


def test_components_the_default_policy_lacks_carry_the_fix_right_after_their_path():
    config = {
        "workflows": [{"id": "c", "path": "lightyear.p2p.server.controller.P2PController", "args": {"rounds": 2}}],
        "components": [
            {"id": "tb", "path": "nvflare.app_opt.tracking.tb.tb_receiver.TBAnalyticsReceiver", "args": {}},
            {"id": "s", "path": "nvflare.app_common.widgets.streaming.AnalyticsSender", "args": {}},
        ],
        "filters": [
            {
                "path": "lightyear.flare.malfunction_filter.MalfunctionFilter",
                "args": {"nested": {"path": "lightyear.x.Y"}},
            }
        ],
    }
    marked = component_policy.with_refusal_fix(config)
    controller = marked["workflows"][0]
    assert list(controller) == [
        "id",
        "path",
        component_policy.REFUSAL_FIX_KEY,
        "args",
    ]  # FLARE prints keys in this order
    assert controller[component_policy.REFUSAL_FIX_KEY] == component_policy.REFUSAL_FIX.format(package="lightyear")
    assert component_policy.REFUSAL_FIX_KEY not in marked["components"][0]  # in FLARE's default list
    assert component_policy.REFUSAL_FIX_KEY in marked["components"][1]  # AnalyticsSender is not
    assert component_policy.REFUSAL_FIX_KEY in marked["filters"][0]["args"]["nested"]
    assert component_policy.with_refusal_fix(marked) == marked  # idempotent
    assert component_policy.REFUSAL_FIX_KEY not in config["workflows"][0]  # the input is left alone


def test_every_generated_component_flare_would_refuse_names_the_fix():
    from lightyear.jobs import generate

    configs = os.path.join(ROOT, "app_configs")
    default = component_policy.flare_default_allow_list()
    for method in generate.methods():
        _, files = generate.build_job(configs, method, "digits", "sfa", 1)
        refusable = [
            c for f in files.values() for c in _components(f) if not component_policy._covered(c["path"], default)
        ]
        assert refusable, method
        for c in refusable:  # the hint names the class's own package (FLARE's AnalyticsSender: nvflare.)
            package = c["path"].split(".")[0]
            assert c.get(component_policy.REFUSAL_FIX_KEY) == component_policy.REFUSAL_FIX.format(package=package), (
                method
            )


def test_flare_builds_a_component_that_carries_the_fix():
    """The extra key must not reach the constructor: FLARE's builder takes only ``path`` and ``args``."""
    from nvflare.fuel.utils.component_builder import ComponentBuilder

    class Builder(ComponentBuilder):
        def get_module_scanner(self):
            return None

    marked = component_policy.with_refusal_fix(
        {"id": "m", "path": "lightyear.flare.malfunction_filter.MalfunctionFilter", "args": {"kind": "sfa"}}
    )
    built = Builder().build_component(marked)
    assert type(built).__name__ == "MalfunctionFilter"


def test_lightyear_simulate_allows_the_workspace_and_passes_every_option_to_flare(tmp_path):
    from lightyear.deploy import simulate

    job = os.path.join(ROOT, "jobs", "lightyear_digits")
    ws = tmp_path / "new" / "ws"
    cmd, workspace, before = simulate.simulator_command([job, "-t", "8", "-w", str(ws), "-gpu", "0,1"])
    assert cmd[1:] == ["simulator", job, "-w", str(ws), "-t", "8", "-gpu", "0,1"] and cmd[0].endswith("nvflare")
    assert workspace == str(ws) and before == set()  # a fresh workspace: a run whose site never started may start again
    policy = _read(ws / "local" / "resources.json")["class_allow_list"]
    assert "lightyear." in policy and "nvflare." not in policy


def test_lightyear_simulate_refuses_what_is_not_a_job_before_touching_the_workspace(tmp_path, capsys):
    from lightyear.deploy import simulate

    assert simulate.main([str(tmp_path), "-w", str(tmp_path / "ws")]) == 2
    assert "no meta.json" in capsys.readouterr().err
    assert not (tmp_path / "ws").exists()


def allow_cli(capsys, *folders):
    status = allow_list.main([str(f) for f in folders])
    out = capsys.readouterr()
    return status, out.out, out.err


def test_a_resources_json_that_is_a_folder_is_refused_in_one_line(tmp_path, capsys):
    (tmp_path / "local" / "resources.json").mkdir(parents=True)
    status, _, err = allow_cli(capsys, tmp_path)
    assert status == 2 and "resources.json is a folder, not a file: remove it" in err and err.count("\n") == 1


def test_a_binary_resources_json_is_named_and_left_unchanged(tmp_path, capsys):
    (tmp_path / "resources.json").write_bytes(b"\x00\xff\xfe")
    status, _, err = allow_cli(capsys, tmp_path)
    assert (
        status == 2
        and "is not a UTF-8 text file" in err
        and (tmp_path / "resources.json").read_bytes() == b"\x00\xff\xfe"
    )


def test_a_folder_that_cannot_be_written_is_named_with_the_fix(tmp_path, capsys, monkeypatch):
    def refuse(*args, **kwargs):
        raise PermissionError(13, "Permission denied", str(tmp_path))

    monkeypatch.setattr(component_policy.tempfile, "mkstemp", refuse)  # root may write anywhere: simulate the refusal
    (tmp_path / "local").mkdir()
    status, _, err = allow_cli(capsys, tmp_path / "local")
    assert (
        status == 2 and "cannot write in" in err and "(Permission denied)" in err and "make the folder writable" in err
    )
    assert not os.listdir(tmp_path / "local")


@pytest.mark.skipif(os.geteuid() == 0, reason="root writes into read-only folders")
def test_a_read_only_folder_is_named_with_the_fix(tmp_path, capsys):
    (tmp_path / "local").mkdir()
    (tmp_path / "local").chmod(0o555)
    try:
        status, _, err = allow_cli(capsys, tmp_path)
    finally:
        (tmp_path / "local").chmod(0o755)
    assert status == 2 and "cannot write in" in err


def test_a_linked_resources_json_is_updated_at_its_target(tmp_path, capsys):
    shared = tmp_path / "shared" / "policy.json"
    shared.parent.mkdir()
    _write(shared, {"format_version": 2, "class_allow_list": ["nvflare."]})
    local = tmp_path / "site" / "local"
    local.mkdir(parents=True)
    (local / "resources.json").symlink_to(shared)
    status, out, _ = allow_cli(capsys, local)
    assert status == 0 and f"(a link to {shared})" in out
    assert os.path.islink(local / "resources.json") and "lightyear." in _read(shared)["class_allow_list"]
    (local / "resources.json").unlink()
    (local / "resources.json").symlink_to(tmp_path / "gone.json")
    status, _, err = allow_cli(capsys, local)
    assert status == 2 and "which does not exist: fix or remove the link" in err


def test_the_file_keeps_its_mode(tmp_path, capsys):
    _write(tmp_path / "resources.json", {"format_version": 2, "class_allow_list": ["nvflare.app_common."]})
    (tmp_path / "resources.json").chmod(0o444)
    assert allow_cli(capsys, tmp_path)[0] == 0
    assert (tmp_path / "resources.json").stat().st_mode & 0o777 == 0o444
    assert "lightyear." in _read(tmp_path / "resources.json")["class_allow_list"]
    assert sorted(os.listdir(tmp_path)) == ["resources.json"]  # no temporary file left


def test_the_cli_refuses_a_folder_flare_never_reads_a_policy_from(tmp_path, capsys):
    ws = tmp_path / "ws"  # a simulator workspace without local/: FLARE reads ws/local/resources.json
    ws.mkdir()
    assert allow_list.main([str(ws)]) == 2
    assert "neither a participant's local/ folder" in capsys.readouterr().err and os.listdir(ws) == []
    (ws / "local").mkdir()
    assert allow_list.main([str(ws / "local")]) == 0 and os.path.isfile(ws / "local" / "resources.json")
