"""lightyear-sweep --slurm: the batch script (one array task per run), what an array task runs,
never replacing a spec or script no sweep wrote, and no value that could add a line to the script."""

import json

import pytest

from lightyear.experiments import sweep

from sweep_fakes import CONFIGS, refused, statuses, write_spec


def test_slurm_script_runs_one_task_per_run(tmp_path, fake, capsys):
    out = tmp_path / "out"
    spec = write_spec(tmp_path, [0, 3])
    assert (
        sweep.main([spec, "--out", str(out), "--configs", CONFIGS, "--slurm", "--gres", "gpu:1", "--time", "01:00:00"])
        == 0
    )
    text = (out / "sweep.sbatch").read_text()
    assert text.startswith("#!/bin/bash\n")
    for line in ("#SBATCH --array=0-1", "#SBATCH --gres=gpu:1", "#SBATCH --time=01:00:00", "#SBATCH --cpus-per-task=2"):
        assert line in text
    assert (
        f"-m lightyear.experiments.sweep {out / 'spec.json'} --out {out} --configs {CONFIGS} "
        '--task "$SLURM_ARRAY_TASK_ID"' in text
    )
    assert "sbatch " + str(out / "sweep.sbatch") in capsys.readouterr().out
    assert not (out / "runs").exists()
    no_gres = sweep.main([spec, "--out", str(out), "--configs", CONFIGS, "--slurm"])
    assert no_gres == 0 and "sbatch --gres=gpu:1" in (out / "sweep.sbatch").read_text()
    # what array task 1 runs
    assert sweep.main([str(out / "spec.json"), "--out", str(out), "--configs", CONFIGS, "--task", "1"]) == 0
    assert statuses(out) == {"fedavg_digits_clean_s3": "finished"}
    assert sweep.main([str(out / "spec.json"), "--out", str(out), "--configs", CONFIGS, "--task", "2"]) == 2


def test_slurm_never_replaces_a_spec_or_script_no_sweep_wrote(tmp_path, fake, capsys):
    out = tmp_path / "out"
    out.mkdir()
    spec = write_spec(tmp_path, [0])
    for name in ("spec.json", "sweep.sbatch"):
        (out / name).write_text("mine\n")
        assert sweep.main([spec, "--out", str(out), "--configs", CONFIGS, "--slurm"]) == 2
        err = capsys.readouterr().err
        assert f"holds {name}, which no sweep wrote" in err and "--force" in err and err.count("\n") == 1
        assert (out / name).read_text() == "mine\n" and not (out / "sweep.json").exists()
        (out / name).unlink()
    assert sweep.main([spec, "--out", str(out), "--configs", CONFIGS, "--slurm"]) == 0
    assert sweep.main([spec, "--out", str(out), "--configs", CONFIGS, "--slurm"]) == 0  # its own files: replaced
    (out / "sweep.sbatch").write_text("mine\n")
    assert sweep.main([spec, "--out", str(out), "--configs", CONFIGS, "--slurm", "--force"]) == 0
    assert "lightyear.experiments.sweep" in (out / "sweep.sbatch").read_text()
    own = out / "spec.json"  # a spec read from the sweep folder itself stays as written
    own.write_text(json.dumps({"datasets": ["digits"], "methods": ["fedavg"], "faulty": [0], "seeds": [0]}))
    (out / "sweep.json").unlink()
    assert sweep.main([str(own), "--out", str(out), "--configs", CONFIGS, "--slurm"]) == 0
    assert "name" not in json.loads(own.read_text())


@pytest.mark.parametrize(
    "option, value, message",
    [
        ("--gres", "gpu:1\n#SBATCH --wrap=evil", "is not a SLURM gres"),
        ("--gres", "gpu:1 --wrap=x", "is not a SLURM gres"),
        ("--time", "01:00:00\n#SBATCH --wrap=evil", "is not a SLURM time"),
    ],
)
def test_no_value_can_add_a_line_to_the_batch_script(tmp_path, capsys, option, value, message):
    spec = write_spec(tmp_path, [0])
    refused(capsys, [spec, "--out", str(tmp_path / "o"), "--configs", CONFIGS, "--slurm", option, value], message)
    assert not (tmp_path / "o").exists()
    refused(
        capsys,
        [spec, "--out", str(tmp_path / "o\n#SBATCH --wrap=evil"), "--configs", CONFIGS, "--slurm"],
        "holds a line break",
    )
    assert (
        sweep.main(
            [spec, "--out", str(tmp_path / "o"), "--configs", CONFIGS, "--slurm", "--gres", "gpu:a100:2,mps:100"]
        )
        == 0
    )
    assert "#SBATCH --gres=gpu:a100:2,mps:100\n" in (tmp_path / "o" / "sweep.sbatch").read_text()
