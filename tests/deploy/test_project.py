"""project.yml for provisioning: the names jobs deploy to, checked before FLARE sees them."""

import pytest
import yaml

from lightyear.deploy import project


def test_sites_are_named_as_generated_jobs_deploy_them(tmp_path):
    path = tmp_path / "project.yml"
    project.write_project(str(path), project.site_names(3), server="fl.example.org", fed_learn_port=9102)
    loaded = yaml.safe_load(path.read_text())
    by_type = {}
    for p in loaded["participants"]:
        by_type.setdefault(p["type"], []).append(p)
    assert [p["name"] for p in by_type["client"]] == ["site-1", "site-2", "site-3"]
    assert by_type["server"] == [
        {"name": "fl.example.org", "type": "server", "org": "lightyear", "fed_learn_port": 9102}
    ]
    assert by_type["admin"][0]["role"] == "project_admin"
    assert loaded["api_version"] == 3


def test_a_separate_admin_port_is_written_only_when_it_differs():
    server = project.project_dict(["site-1"], fed_learn_port=9000, admin_port=9001)["participants"][0]
    assert server["admin_port"] == 9001


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({"sites": []}, "at least one site"),
        ({"sites": ["site-1", "site-1"]}, "distinct"),
        ({"sites": ["site 1"]}, "not a valid FLARE participant name"),
        ({"sites": ["site-1"], "fed_learn_port": 70000}, "port number"),
        ({"sites": ["site-1"], "admin": "admin"}, "e-mail"),
    ],
)
def test_bad_projects_are_refused_before_provisioning(kwargs, message):
    with pytest.raises(ValueError, match=message):
        project.project_dict(**kwargs)


def test_the_cli_writes_n_sites_or_named_ones(tmp_path):
    out = tmp_path / "p.yml"
    assert project.main(["--sites", "2", "--out", str(out)]) == 0
    assert [p["name"] for p in yaml.safe_load(out.read_text())["participants"]][:3] == ["localhost", "site-1", "site-2"]
    assert project.main(["--sites", "a,b", "--server", "b", "--out", str(out)]) == 2
