"""What lightyear-sweep accepts before it runs anything: the spec (a bad, binary or unreadable one is
named in one line), ``--out``, and the sweeps shipped with the package, by name from any folder."""

from lightyear.experiments import sweep

from sweep_fakes import CONFIGS, refused, write_spec


def test_bad_spec_stops_before_anything_is_written(tmp_path, capsys):
    path = write_spec(tmp_path, [0], methods=["nope"])
    assert sweep.main([path, "--out", str(tmp_path / "out"), "--configs", CONFIGS]) == 2
    assert "unknown methods nope" in capsys.readouterr().err and not (tmp_path / "out").exists()
    path = write_spec(tmp_path, [0], set={"tau": 3})
    assert sweep.main([path, "--out", str(tmp_path / "out"), "--configs", CONFIGS]) == 2
    assert "run fedavg_digits_clean_s0: " in capsys.readouterr().err


def test_a_binary_or_unreadable_spec_is_named(tmp_path, capsys):
    (tmp_path / "spec.yaml").write_bytes(b"\x89PNG\r\n\x1a\n\x00\x00")
    refused(capsys, [str(tmp_path / "spec.yaml"), "--out", str(tmp_path / "o")], "spec.yaml is not a UTF-8 text file")
    (tmp_path / "spec.yaml").write_text("datasets: [digits\nmethods: all\n")
    refused(capsys, [str(tmp_path / "spec.yaml"), "--out", str(tmp_path / "o")], "is not valid YAML")
    (tmp_path / "spec.yaml").write_text("datasets: [[digits]]\nmethods: all\nfaulty: [0]\n")
    refused(capsys, [str(tmp_path / "spec.yaml"), "--out", str(tmp_path / "o")], "'datasets' must list plain values")
    (tmp_path / "spec.yaml").write_text("")  # an empty file: YAML reads it as nothing at all
    refused(
        capsys,
        [str(tmp_path / "spec.yaml"), "--out", str(tmp_path / "o")],
        "spec.yaml must hold a mapping with the keys name, datasets",
    )
    assert not (tmp_path / "o").exists()


def test_an_out_that_cannot_be_a_folder_is_refused_before_anything_is_written(tmp_path, capsys):
    spec = write_spec(tmp_path, [0])
    (tmp_path / "FILE").write_text("mine")
    for extra in ([], ["--slurm"]):
        refused(
            capsys,
            [spec, "--out", str(tmp_path / "FILE"), "--configs", CONFIGS, *extra],
            "is a file: give the sweep folder",
        )
    assert (tmp_path / "FILE").read_text() == "mine"
    refused(capsys, [spec, "--out", "/proc/x", "--configs", CONFIGS, "--slurm"], "--out /proc/x cannot be created")


def test_the_sweep_uses_the_packages_configurations_anywhere(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    spec = write_spec(tmp_path, [0])
    assert sweep.main([spec, "--out", str(tmp_path / "o"), "--dry-run"]) == 0
    assert "todo  fedavg_digits_clean_s0" in capsys.readouterr().out
    assert sweep.main(["digits_baselines", "--out", str(tmp_path / "o"), "--dry-run"]) == 0  # a shipped sweep, by name
    assert "nothing was written" in capsys.readouterr().out and not (tmp_path / "o").exists()
    refused(
        capsys,
        ["digits_nope", "--out", str(tmp_path / "o")],
        "no sweep description 'digits_nope': give a .yaml or .json file, or the name",
    )


def test_every_run_of_the_shipped_adaptive_sweep_generates(tmp_path, capsys):
    assert sweep.main(["digits_adaptive", "--out", str(tmp_path / "out"), "--configs", CONFIGS, "--dry-run"]) == 0
    text = capsys.readouterr().out
    assert (
        "todo  krum_digits_adaptive5_full_s0" in text
        and "16 runs: 0 done, 16 to run" in text
        and "todo  fedcap_digits_adaptive3_full_s0" in text
    )
