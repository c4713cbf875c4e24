"""``lightyear-summary`` and the record readers: a damaged record file is named in one line."""

import os
import stat

import pytest

from lightyear import records

HEADER = "site,malfunction,status,acc,ece,last_round,reason\n"


def summary_in(tmp_path, content: bytes):
    folder = tmp_path / "ws" / "server" / "simulate_job"
    folder.mkdir(parents=True)
    (folder / "summary.csv").write_bytes(content)
    return str(tmp_path / "ws")


@pytest.mark.parametrize(
    "content, message",
    [
        (b"", "is empty: the run did not finish writing it"),
        (HEADER.encode(), "has a header and no rows"),
        (b"\x89PNG\r\n\x1a\n\x00\x00\xff", "is not a UTF-8 text file"),
        (b"site,acc\nsite-1,0.5\x00\n", "is not a text file (it holds NUL bytes)"),
        (
            (HEADER + "site-1,none,finished,0.9,0.1,3,\nsite-2,none,fini").encode(),
            "line 3 has 3 fields, the header 7 (the file is cut or damaged)",
        ),
        ((HEADER + "site-1,none,finished,0.9,0.1,3,,extra\n").encode(), "line 2 has 8 fields, the header 7"),
    ],
)
def test_a_damaged_summary_is_named_in_one_line(tmp_path, capsys, content, message):
    assert records.summary_main([summary_in(tmp_path, content)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("lightyear-summary: error: the summary ") and message in err and err.count("\n") == 1, err


def test_a_missing_workspace_or_summary_is_named(tmp_path, capsys):
    assert records.summary_main([str(tmp_path / "nowhere")]) == 2
    assert "no workspace folder at" in capsys.readouterr().err
    assert records.summary_main([str(tmp_path)]) == 2
    assert "no summary.csv under" in capsys.readouterr().err


def test_a_good_summary_is_printed(tmp_path, capsys):
    ws = summary_in(tmp_path, (HEADER + "site-1,none,finished,0.9,0.1,3,\nmean_benign,n=1,,0.9,0.1,,\n").encode())
    assert records.summary_main([ws]) == 0
    out = capsys.readouterr().out
    assert out.splitlines()[0].endswith(os.path.join("server", "simulate_job", "summary.csv")) and "mean_benign" in out


@pytest.mark.parametrize("column, value", [("acc", "inf"), ("acc", "abc"), ("ece", "-inf"), ("ece", "1e999")])
def test_a_metric_that_is_not_a_finite_number_is_named_not_printed_as_a_mean(tmp_path, capsys, column, value):
    cells = {"acc": "0.8", "ece": "0.1", column: value}
    content = HEADER + "site-1,none,finished,0.9,0.1,3,\n" + f"site-2,none,finished,{cells['acc']},{cells['ece']},3,\n"
    ws = summary_in(tmp_path, (content + "mean_benign,n=2,,0.85,0.1,,\n").encode())
    assert records.summary_main([ws]) == 2
    out = capsys.readouterr()
    path = os.path.join(ws, "server", "simulate_job", "summary.csv")
    assert out.out == "" and out.err.count("\n") == 1, out
    assert out.err.startswith(f"lightyear-summary: error: the summary {path}: site-2: {column} {value!r} ") and (
        "is not a finite number" in out.err
    ), out.err


def test_a_failed_sites_missing_metric_is_printed_as_no_value(tmp_path, capsys):
    content = HEADER + "site-1,none,finished,0.9,0.1,3,\nsite-2,none,failed,nan,,1,out of memory\n"
    ws = summary_in(tmp_path, (content + "mean_benign,n=1,,0.9,0.1,,\nstd_benign,n=1,,0.0,0.0,,\n").encode())
    assert records.summary_main([ws]) == 0
    assert "out of memory" in capsys.readouterr().out


def test_table_rows_keeps_the_good_rows_and_names_the_rest(tmp_path):
    path = tmp_path / "rounds.csv"
    path.write_text("round,acc\n0,0.5\n1,0.6,x\n2,0.7\n3")
    rows, problems = records.table_rows(str(path), "site-1's rounds.csv")
    assert [r["round"] for r in rows] == ["0", "2"]
    assert problems == [
        "line 3 has 3 fields, the header 2 (the file is cut or damaged)",
        "line 5 has 1 field, the header 2 (the file is cut or damaged)",
    ]
    path.write_text("")
    assert records.table_rows(str(path), allow_empty=True) == ([], [])


def test_a_stray_quote_in_a_long_record_is_named_not_a_traceback(tmp_path, capsys):
    # an unclosed quote makes the rest of the file one field, past the csv module's field limit
    content = HEADER + 'site-1,none,"finished,0.9,0.1,3,\n' + "x" * 200_000 + "\n"
    assert records.summary_main([summary_in(tmp_path, content.encode())]) == 2
    err = capsys.readouterr().err
    assert "is not a readable CSV table (field larger than field limit" in err and err.count("\n") == 1, err


def test_a_byte_order_mark_does_not_hide_the_first_column(tmp_path):
    path = tmp_path / "summary.csv"
    path.write_bytes(b"\xef\xbb\xbf" + (HEADER + "site-1,none,finished,0.9,0.1,3,\n").encode())
    rows, problems = records.table_rows(str(path))
    assert problems == [] and rows[0]["site"] == "site-1"


def test_an_atomically_written_file_gets_the_permissions_the_umask_gives_any_other_file(tmp_path):
    previous = os.umask(0o022)
    try:
        written = records.atomic_write(str(tmp_path / "summary.json"), lambda f: f.write(b"{}"))
        (tmp_path / "plain.json").write_text("{}")
    finally:
        os.umask(previous)
    assert stat.S_IMODE(os.stat(written).st_mode) == stat.S_IMODE(os.stat(tmp_path / "plain.json").st_mode) == 0o644
