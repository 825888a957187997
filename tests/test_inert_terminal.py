"""Text that is not relgrade's reaches no terminal raw: every command's output, suite-wide.

Hostile text - a bidi override (U+202E), a terminal escape (ESC [31m), a bare carriage
return and a NUL - is put into what a user or a corpus supplies: query text, intent and
chunk text of a grading set-up, a grader's name and the text its command prints, arm names,
query ids and a reviewer's name in ``status``, run names and query ids of plain run files,
raters' names, a stage's pending work.
The commands a user runs print it; no raw control character reaches stdout or stderr and the
visible form (``\\u202e``, ``\\u001b``, ``\\u000d``, ``\\u0000``) does, through the one
boundary :func:`relgrade.terminal.inert_output` (the ``relgrade`` entry point and every
stage) and its rich console :func:`relgrade.terminal.console`.
"""

from __future__ import annotations

import io
import json
import sys

import pandas as pd
import pytest
from click.testing import CliRunner

from relgrade.cli import main
from relgrade.errors import PendingWork
from relgrade.terminal import InertStream, console, inert_output
from tests.graders import experiment as ex
from tests.test_status import exp  # noqa: F401 - the status fixture, reused

RLO, ESC, CR, NUL = "\u202e", "\x1b", "\r", "\x00"
#: The hostile text, and what is shown for it.
HOSTILE = f"x{RLO}y {ESC}[31mred{CR}z{NUL}"
SHOWN = "x\\u202ey \\u001b[31mred\\u000dz\\u0000"
RAW = (RLO, ESC, CR, NUL)
ARM = f"arm{RLO}b{ESC}[31m"
QUERY = f"q{NUL}1{RLO}"  # a CR would end the qrels or run line


def raw_in(text: str) -> list[str]:
    """The raw hostile characters in ``text`` (none allowed)."""
    return [ch for ch in RAW if ch in text]


def run(args, **kw):
    res = CliRunner().invoke(main, [str(a) for a in args], **kw)
    assert "Traceback" not in res.output, res.output
    return res


# --- the boundary -------------------------------------------------------------------------

def test_an_inert_stream_shows_each_control_and_keeps_newline_and_tab():
    out = io.StringIO()
    stream = InertStream(out)
    assert stream.write(f"a\t{HOSTILE}\n") == len(HOSTILE) + 3
    assert out.getvalue() == f"a\t{SHOWN}\n"
    with pytest.raises(TypeError):
        stream.write(b"bytes")  # bytes go to .buffer, unchanged
    text = io.TextIOWrapper(io.BytesIO(), encoding="utf-8")
    InertStream(text).buffer.write(HOSTILE.encode())
    assert text.buffer.getvalue() == HOSTILE.encode()


def test_inert_output_wraps_stdout_and_stderr_for_the_block_only(capsys):
    with inert_output():
        print(HOSTILE)
        print(HOSTILE, file=sys.stderr)
        with inert_output():  # entered twice: wrapped once
            assert not isinstance(sys.stdout.raw, InertStream)
    print("after\r")
    out, err = capsys.readouterr()
    assert out == f"{SHOWN}\nafter\r\n" and err == f"{SHOWN}\n"


def test_the_rich_console_keeps_its_own_styling_and_shows_outside_text_inert():
    c = console(force_terminal=True, color_system="standard", width=60)
    c.file = io.StringIO()
    c.print(f"[bold]arm[/bold] {HOSTILE}", highlight=False)
    text = c.file.getvalue()
    assert "\x1b[1m" in text  # rich's own bold, on a terminal
    assert SHOWN in text and "\x1b[31m" not in text and RLO not in text


# --- a grading set-up: query, intent and chunk text, a grader's name ----------------------

#: A grader command whose failure says what it was asked (query, intent and chunk text).
ECHO = ("import json, sys; r = json.loads(sys.stdin.read()); "
        "sys.stderr.write('cannot grade ' + r['query'] + ' / ' + r['intent'] + ' / ' "
        "+ r['chunks'][0]['text']); sys.exit(3)")

GRADER = f"bad{RLO}grader{ESC}[31m"


@pytest.fixture
def hostile_setup(tmp_path):
    graders = {GRADER: {"role": "grader", "kind": "model", "family": "test",
                        "command": [sys.executable, "-c", ECHO], "timeout": 20,
                        "retries": 0}}
    ex.build(tmp_path, queries=1, chunks=2, audit=1, graders=graders,
             text_of=lambda c: f"chunk {HOSTILE}")
    for role in ("grader", "auditor"):
        path = tmp_path / f"data/packets/{role}/q01.json"
        packet = json.loads(path.read_text())
        packet.update(query=f"query {HOSTILE}", intent=f"intent {HOSTILE}")
        path.write_text(json.dumps(packet))
    return tmp_path


def test_grade_run_shows_the_grader_name_and_what_its_command_said_inert(hostile_setup):
    res = run(["grade", "run", "--grader", GRADER, "--params",
               hostile_setup / "params.yaml", "--no-progress"])
    print(res.output)
    assert raw_in(res.output) == []
    assert "bad\\u202egrader\\u001b[31m: graded 0 pairs" in res.output
    # the command's stderr is quoted on one line, its whitespace (the CR) made one space
    told = SHOWN.replace("\\u000d", " ")
    assert f"cannot grade query {told} / intent {told} / chunk {told}" in res.output


def test_an_unknown_grader_named_on_the_command_line_is_shown_inert(hostile_setup):
    res = run(["grade", "run", "--grader", f"no{RLO}such{CR}", "--params",
               hostile_setup / "params.yaml"])
    print(res.output)
    assert res.exit_code != 0 and raw_in(res.output) == []
    assert "no\\u202esuch\\u000d" in res.output


def test_status_shows_arm_names_query_ids_and_the_reviewer_inert(exp):
    root, p = exp
    pool = pd.read_parquet(root / p["pool"])
    pool["query_id"] = pool["query_id"].replace("q1", QUERY)
    pool.to_parquet(root / p["pool"], index=False)
    manifest = json.loads((root / p["pool_manifest"]).read_text())
    (root / p["pool_manifest"]).write_text(json.dumps({**manifest,
                                                       "arms": [ARM, "hybrid", "tfidf"]}))
    intents = json.loads((root / p["intents_manifest"]).read_text())
    (root / p["intents_manifest"]).write_text(json.dumps({**intents, "reviewer": HOSTILE}))
    res = run(["status", "--params", root / "params.yaml"])
    print(res.output)
    assert res.exit_code == 0 and raw_in(res.output) == []
    assert "arms arm\\u202eb\\u001b[31m, hybrid, tfidf" in res.output
    assert f"reviewed by {SHOWN} at" in res.output
    assert "q\\u00001\\u202e" in res.output
    # JSON printed through the filter stays valid and reads back the very text
    res = run(["status", "--params", root / "params.yaml", "--json"])
    assert res.exit_code == 0 and raw_in(res.output) == []
    assert json.loads(res.output)["intents"]["reviewer"] == HOSTILE


# --- plain files: run (arm) names, query ids ----------------------------------------------


@pytest.fixture
def plain_runs(tmp_path):
    qrels = tmp_path / "key.qrels"
    qrels.write_text("".join(f"{q} 0 d{j} {g}\n" for q in (QUERY, "q2", "q3")
                             for j, g in enumerate((2, 1, 0))))
    runs = []
    for name, order in ((ARM, (0, 1, 2)), ("plain", (2, 1, 0))):
        path = tmp_path / f"{name}.run"
        path.write_text("".join(f"{q} Q0 d{j} {r + 1} {3 - r} {name}\n" for q in (QUERY, "q2", "q3")
                                for r, j in enumerate(order)))
        runs.append(path)
    return qrels, runs


def test_evaluate_shows_run_names_and_query_ids_inert(plain_runs):
    qrels, runs = plain_runs
    res = run(["evaluate", qrels, *runs, "--per-query"])
    print(res.output)
    assert res.exit_code == 0 and raw_in(res.output) == []
    assert "arm\\u202eb\\u001b[31m" in res.output and "q\\u00001\\u202e" in res.output


def test_compare_tables_show_run_names_inert(plain_runs):
    qrels, runs = plain_runs
    res = run(["compare", "--qrels", qrels, *runs])
    print(res.output)
    assert res.exit_code == 0 and raw_in(res.output) == []
    assert "arm\\u202eb\\u001b[31m" in res.output


# --- raters' names, the pairs listed for adjudication --------------------------------------

def test_aggregate_lists_rater_names_and_the_pairs_to_adjudicate_inert(tmp_path):
    rows = [{"query_id": q, "chunk_id": "c1", "grader": rater, "grade": grade}
            for q in (QUERY, "q2", "q3")
            for rater, grade in ((f"r{RLO}1", 0), ("r2", 2), ("r3", 1))]
    grades = tmp_path / "grades.jsonl"
    grades.write_text("".join(json.dumps(r) + "\n" for r in rows))
    res = run(["aggregate", "--grades", grades])
    print(res.output)
    assert res.exit_code == 0 and raw_in(res.output) == []
    assert "r\\u202e1" in res.output
    # the listing's columns stay aligned: each cell measured as it is shown
    assert "\nq\\u00001\\u202e  c1            1  0,1,2" in res.output
    assert "\nq2" + " " * (len("q\\u00001\\u202e") - 2 + 2) + "c1            1" in res.output


# --- a stage ------------------------------------------------------------------------------

def test_a_stage_s_pending_line_shows_outside_text_inert(tmp_path, capsys):
    from relgrade.experiment.stage import run_stage

    ex.build(tmp_path, queries=1, chunks=2, audit=1)

    def owed(experiment):
        raise PendingWork(f"grader {GRADER} owes 2 pairs")

    with pytest.raises(SystemExit):
        run_stage(owed, params_path=tmp_path / "params.yaml")
    err = capsys.readouterr().err
    assert raw_in(err) == []
    assert err.startswith("Pending: grader bad\\u202egrader\\u001b[31m owes 2 pairs, then ")


# --- the real entry point -----------------------------------------------------------------

def test_the_relgrade_program_writes_no_raw_control_byte(hostile_setup):
    import os
    import subprocess

    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    proc = subprocess.run(
        [sys.executable, "-c", "from relgrade.cli import main; main()", "grade", "run",
         "--grader", GRADER, "--params", str(hostile_setup / "params.yaml"), "--no-progress"],
        capture_output=True, env=env, timeout=120)
    out = proc.stdout + proc.stderr
    print(out.decode())
    assert b"Traceback" not in out
    assert [b for b in (b"\x1b", b"\r", b"\x00", RLO.encode()) if b in out] == []
    assert b"bad\\u202egrader\\u001b[31m: graded 0 pairs" in proc.stdout


def test_an_inert_stream_answers_for_its_stream_what_it_does_not_change():
    out = io.StringIO()
    out.name = "<out>"
    stream = InertStream(out)
    assert stream.name == "<out>" and stream.isatty() is False and stream.closed is False
    assert stream.getvalue() == ""  # delegated to the stream beneath


def test_inert_escapes_exactly_the_visible_categories_over_every_code_point():
    # the fast path (str.isprintable) against the rule itself, character by character
    import unicodedata

    from relgrade.text import VISIBLE_CATEGORIES, inert

    wrong = [i for i in range(0x110000)
             if inert(chr(i)) != (f"\\u{i:04x}" if unicodedata.category(chr(i))
                                  in VISIBLE_CATEGORIES else chr(i))]
    assert wrong == []
    assert inert("tab\there\n", keep="\t\n") == "tab\there\n"
    assert inert("nbsp\u00a0and\u3000ideographic") == "nbsp\u00a0and\u3000ideographic"
