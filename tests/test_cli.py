"""The front door every console script shares: a user error is one line and exit status 2, a bug
keeps its traceback; and every console script answers --help and a nonsense argument without one."""

import argparse
import importlib
import os

import pytest

from lightyear import cli

from repo import ROOT, console_scripts


def scripts():
    """[project.scripts] of pyproject.toml, and the Job API front end (python -m lightyear.jobs.job_api)."""
    return {**console_scripts(), "python -m lightyear.jobs.job_api": "lightyear.jobs.job_api:main"}


def entry(target):
    module, _, name = target.partition(":")
    return getattr(importlib.import_module(module), name)


def exit_status(main, argv):
    try:
        return main(argv)
    except SystemExit as exc:
        return exc.code


@pytest.mark.parametrize("name", sorted(scripts()))
def test_every_console_script_answers_help_and_nonsense_without_a_traceback(name, capsys):
    main = entry(scripts()[name])
    assert exit_status(main, ["--help"]) == 0
    out = capsys.readouterr()
    assert "usage:" in out.out and "Traceback" not in out.out + out.err
    assert exit_status(main, ["--no-such-option", "x"]) == 2
    out = capsys.readouterr()
    assert "error:" in out.err and "Traceback" not in out.out + out.err


def test_the_scripts_are_the_ones_pyproject_installs():
    assert {
        "lightyear-jobs",
        "lightyear-summary",
        "lightyear-sweep",
        "lightyear-report",
        "lightyear-allow",
        "lightyear-slurm",
        "lightyear-poc",
        "lightyear-simulate",
        "lightyear-detection",
    } <= set(scripts())


def make(exc):
    @cli.command("prog")
    def main(argv=None):
        raise exc

    return main


def test_a_user_error_is_one_line_and_exit_status_2(capsys):
    assert make(cli.UserError("--x 3 is too big:\n  use at most 2"))([]) == 2
    assert capsys.readouterr().err == "prog: error: --x 3 is too big: | use at most 2\n"


def test_an_os_error_about_a_path_names_it_and_the_fix(capsys):
    assert make(FileNotFoundError(2, "No such file or directory", "/no/such"))([]) == 2
    assert capsys.readouterr().err == "prog: error: /no/such: No such file or directory (check the path)\n"
    assert make(IsADirectoryError(21, "Is a directory", "/tmp"))([]) == 2
    assert "it is a folder: give a file" in capsys.readouterr().err


@pytest.mark.parametrize("exc", [ValueError("a bug"), KeyError("k"), TypeError("t"), OSError("no path")])
def test_a_bug_keeps_its_traceback(exc):
    with pytest.raises(type(exc)):
        make(exc)([])


def test_ctrl_c_is_one_line_and_130(capsys):
    assert make(KeyboardInterrupt())([]) == 130
    assert capsys.readouterr().err == "prog: interrupted\n"


def test_read_text_names_what_is_wrong(tmp_path):
    (tmp_path / "bin").write_bytes(b"\x89PNG\r\n\x1a\n\x00")
    with pytest.raises(
        cli.UserError, match=r"the spec .*bin is not a UTF-8 text file \(byte 0x89 at offset 0\): give YAML"
    ):
        cli.read_text(str(tmp_path / "bin"), "the spec", "give YAML")
    (tmp_path / "nul").write_bytes(b"a\x00b")
    with pytest.raises(cli.UserError, match="not a text file"):
        cli.read_text(str(tmp_path / "nul"), "the spec")
    with pytest.raises(cli.UserError, match="is a folder, not a file"):
        cli.read_text(str(tmp_path), "the spec")
    with pytest.raises(cli.UserError, match="cannot be read"):
        cli.read_text(str(tmp_path / "missing"), "the spec")
    (tmp_path / "ok").write_text("héllo")
    assert cli.read_text(str(tmp_path / "ok"), "the spec") == "héllo"


def test_output_folder_is_created_or_refused_naming_the_option(tmp_path):
    assert cli.output_folder(str(tmp_path / "a" / "b")) == str(tmp_path / "a" / "b")
    (tmp_path / "file").write_text("")
    with pytest.raises(cli.UserError, match="--out .*file is a file: give a folder"):
        cli.output_folder(str(tmp_path / "file"))
    with pytest.raises(cli.UserError, match="--report /proc/x cannot be created"):
        cli.output_folder("/proc/x", "--report")
    assert not os.path.exists("/proc/x")


@pytest.mark.parametrize("text", ["inf", "nan", "-1", "abc", "1e999"])
def test_seconds_refuses_what_no_timer_can_wait(text):
    with pytest.raises(argparse.ArgumentTypeError):
        cli.seconds()(text)


def test_seconds_takes_finite_values_within_bounds():
    assert cli.seconds()("0") == 0.0 and cli.seconds(positive=True)("2.5") == 2.5
    with pytest.raises(argparse.ArgumentTypeError):
        cli.seconds(positive=True)("0")
    assert cli.control_characters("gpu:1\n#SBATCH") and not cli.control_characters("gpu:a100:2")


@pytest.mark.parametrize(
    "command, argv",
    [
        ("lightyear-jobs", ["--method", "fedavg", "--dataset", "digits", "--out", "{out}"]),
        ("lightyear-simulate", ["{job}", "-w", "{out}"]),
        ("lightyear-poc", ["{job}", "--out", "{out}"]),
        ("lightyear-sweep", ["digits_dynamic", "--out", "{out}", "--dry-run"]),
        ("python -m lightyear.jobs.job_api", ["--method", "fedavg", "--dataset", "digits", "--workspace", "{out}"]),
    ],
)
@pytest.mark.parametrize("out", ["with\nbreak", "", "   "])
def test_a_folder_name_that_is_empty_or_holds_a_line_break_is_refused_before_anything_is_written(
    command, argv, out, tmp_path, capsys, monkeypatch
):
    monkeypatch.chdir(tmp_path)
    job = os.path.join(ROOT, "jobs", "fedavg_digits")
    argv = [a.format(job=job, out=out) for a in argv]
    assert exit_status(entry(scripts()[command]), argv) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"{command}: error: ") and err.count("\n") == 1, err
    assert ("line break" in err) if out.strip() else ("is empty" in err)
    assert os.listdir(tmp_path) == []


def test_a_closed_output_pipe_stops_the_command_quietly(tmp_path):
    """``lightyear-sweep SPEC --dry-run | head``: once head has read enough, the rest of the listing
    goes nowhere; the command stops with SIGPIPE's status and no traceback."""
    import subprocess
    import sys

    spec = tmp_path / "s.yaml"
    spec.write_text(
        "datasets: [digits]\nmethods: [fedavg, krum, afa, cfl]\nmalfunctions: [ana, sfa]\nfaulty: [0, 1, 2, 3]\n"
    )
    code = "import sys; from lightyear.experiments.sweep import main; sys.exit(main(sys.argv[1:]))"
    args = [sys.executable, "-c", code, str(spec), "--out", str(tmp_path / "out"), "--dry-run"]
    reader, writer = os.pipe()
    os.close(reader)  # the reader is gone before the command writes anything
    with open(tmp_path / "err", "w") as err:
        done = subprocess.run(args, stdout=writer, stderr=err, cwd=ROOT, timeout=120)
    os.close(writer)
    assert done.returncode == 141, (tmp_path / "err").read_text()
    assert "Traceback" not in (tmp_path / "err").read_text()


def test_a_broken_pipe_that_is_not_the_output_keeps_its_traceback():
    def main(argv=None):
        raise BrokenPipeError("a worker's pipe")

    with pytest.raises(BrokenPipeError):
        cli.command("prog")(main)()
