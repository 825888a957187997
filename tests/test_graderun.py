"""`relgrade grade run`: fresh processes per batch, validation, retries, resume, sampling.

The graders are real executables (tests/graders/grader.py) run as real subprocesses.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner

from relgrade.cli import main
from relgrade.errors import InputError
from relgrade.graders import command as graderun
from relgrade.graders.store import GradeStore
from tests.graders import experiment as ex

SRC = Path(__file__).resolve().parents[1] / "src"
ROOT = Path(__file__).resolve().parents[1]


def grader(mode="ok", **kw):
    return {"grader-a": {"role": "grader", "kind": "model", "family": "test",
                         "command": ex.command(mode), "timeout": 20, "retries": 1, **kw}}


def run(root, *args, grader_name="grader-a"):
    result = CliRunner().invoke(main, ["grade", "run", "--grader", grader_name,
                                       "--params", str(root / "params.yaml"), *args])
    return result


def grades_file(root, name="grader-a"):
    return root / "data/grades" / name / "round-1.jsonl"


def truth_rows(packets):
    return sorted((q, c["chunk_id"], ex.truth(c["chunk_id"]))
                  for q, p in packets.items() for b in p["batches"] for c in b)


def recorded(root, name="grader-a"):
    return sorted((r["query_id"], r["chunk_id"], r["grade"]) for r in ex.read_rows(grades_file(root, name)))


# --- settings ------------------------------------------------------------------------

@pytest.mark.parametrize("entry, rule", [
    ({"role": "grader", "kind": "model"}, "grader has no command to run"),
    ({"role": "grader", "kind": "model", "command": "x", "timeout": 0}, "timeout must be"),
    ({"role": "grader", "kind": "model", "command": "x", "workers": 0}, "workers must be"),
    ({"role": "grader", "kind": "model", "command": "x", "retries": -1}, "retries must be"),
    ({"role": "grader", "kind": "model", "command": "x", "samples": 1.5}, "samples must be"),
    ({"role": "grader", "kind": "model", "command": "x", "input": "xml"}, "input must be one of"),
])
def test_grader_settings_are_checked(entry, rule):
    with pytest.raises(InputError, match=rule):
        graderun.grader_setup(entry, "g")


def test_grader_run_names_an_undeclared_grader_and_the_params_file(tmp_path):
    ex.build(tmp_path)
    res = run(tmp_path, grader_name="grader-b")
    assert res.exit_code == 1
    assert res.output == (f"Error: {tmp_path / 'params.yaml'}: grader-b: grader not declared "
                          "in params `graders` (found graders grader-a). Add `grader-b` with "
                          "role, kind and family under `graders`\n")


def test_grade_run_on_a_human_grader_points_to_the_web_page_and_grade_import(tmp_path):
    ex.build(tmp_path, graders={"person-h": {"role": "grader", "kind": "human",
                                             "family": "people", "person": "an assessor"}})
    res = run(tmp_path, grader_name="person-h")
    assert res.exit_code == 1
    assert res.output == (
        f"Error: {tmp_path / 'params.yaml'}: person-h: a human grader has no command to run: "
        "a person grades on the web page. Run `relgrade serve --grader person-h` and open the "
        "login link it prints, or record grades made elsewhere with `relgrade grade import "
        "--grader person-h FILE`\n")


def test_a_grader_of_kind_import_points_to_grade_import():
    with pytest.raises(InputError, match=r"kind import has no command to run: its grades come "
                                         r"from a file.*`relgrade grade import --grader g FILE`"):
        graderun.grader_setup({"role": "grader", "kind": "import"}, "g")


def test_settings_defaults_and_the_workers_override():
    s = graderun.grader_setup({"role": "auditor", "kind": "model", "command": "a b"},
                              "g", workers=6)
    assert (s.argv, s.timeout, s.retries, s.workers, s.samples, s.input) == \
        (("a", "b"), 600.0, 2, 6, 1, "json")


def test_packets_with_a_batch_over_five_chunks_are_refused():
    p = ex.packet("q01", 6, batch_size=6)
    with pytest.raises(InputError, match="a batch holds 1 to 5 chunks"):
        graderun.check_packets({"q01": p}, batch_size=6)


def test_the_plan_keeps_only_pairs_without_a_grade_and_drops_finished_queries():
    packets = {"q01": ex.packet("q01", 7), "q02": ex.packet("q02", 3)}
    done = {("q01", "q01-c0"), ("q01", "q01-c1"), ("q01", "q01-c2"), ("q01", "q01-c3"),
            ("q01", "q01-c4"), ("q01", "q01-c5"), ("q02", "q02-c0"), ("q02", "q02-c1"),
            ("q02", "q02-c2")}
    tasks = graderun.plan(packets, recorded=done)
    assert [t.query_id for t in tasks] == ["q01"]
    assert [(b.batch, [c["chunk_id"] for c in b.chunks]) for b in tasks[0].batches] == \
        [(1, ["q01-c6"])]


# --- running -------------------------------------------------------------------------

def test_a_run_grades_every_pair_in_display_order_and_writes_the_sidecar(tmp_path):
    packets = ex.build(tmp_path, queries=3, chunks=7, graders=grader("ok"))
    result = run(tmp_path)
    assert result.exit_code == 0, result.output
    assert recorded(tmp_path) == truth_rows(packets)
    rows = ex.read_rows(grades_file(tmp_path))
    for q, p in packets.items():
        shown = [c["chunk_id"] for b in p["batches"] for c in b]
        assert [r["chunk_id"] for r in rows if r["query_id"] == q] == shown
    assert json.loads((grades_file(tmp_path).with_name("round-1.meta.json")).read_text()) == \
        {"intents_sha256": ex.INTENTS_SHA, "rubric_version": "v1", "round": 1, "regrade": "all"}
    assert "graded 21 pairs in 6 batches" in result.output
    assert "0 of 21 pairs still lack a grade" in result.output


def test_a_rerun_starts_no_process_and_changes_nothing(tmp_path):
    ex.build(tmp_path, queries=2, chunks=6, graders=grader("ok"))
    assert run(tmp_path).exit_code == 0
    before = grades_file(tmp_path).read_bytes()
    again = run(tmp_path)
    assert again.exit_code == 0
    assert "graded 0 pairs in 0 batches" in again.output and "0 processes" in again.output
    assert grades_file(tmp_path).read_bytes() == before


def test_every_batch_gets_a_fresh_process_and_sees_only_its_packet_batch(tmp_path, monkeypatch):
    log = tmp_path / "log"
    log.mkdir()
    monkeypatch.setenv("RELGRADE_TEST_LOG", str(log))
    packets = ex.build(tmp_path, queries=3, chunks=12, graders=grader("ok", workers=3))
    assert run(tmp_path).exit_code == 0
    requests = [json.loads(f.read_text()) for f in log.iterdir()]
    assert len(requests) == 9  # 3 queries x 3 batches, one process each
    seen = set()
    for req in requests:
        assert list(req) == [
            "exchange", "grader", "query_id", "query", "intent", "rubric_version", "rubric",
            "scale", "max_reason_words", "reason_required", "batch", "batches", "sample",
            "attempt", "previous_error", "chunks", "prompt"]
        p = packets[req["query_id"]]
        assert req["chunks"] == p["batches"][req["batch"]]
        assert req["rubric"].startswith("version: v1")
        seen.add((req["query_id"], req["batch"]))
    assert seen == {(q, b) for q in packets for b in range(3)}


def test_workers_do_not_change_what_is_recorded(tmp_path):
    a, b = tmp_path / "one", tmp_path / "four"
    for root, w in ((a, 1), (b, 4)):
        ex.build(root, queries=5, chunks=8, graders=grader("ok"))
        assert run(root, "--workers", str(w)).exit_code == 0
    assert sorted(ex.read_rows(grades_file(a)), key=str) == sorted(ex.read_rows(grades_file(b)), key=str)


@pytest.mark.parametrize("mode, message", [
    ("exit", "grader command exited with status 3 (found grader broke)"),
    ("nonjson", "grader output line is not JSON"),
    ("stranger", "row for a chunk that is not in this batch"),
    ("few", "too few rows: every chunk of the batch needs one row"),
])
def test_a_bad_grader_is_retried_then_reported_and_nothing_of_it_is_recorded(tmp_path, mode, message):
    ex.build(tmp_path, queries=1, chunks=3, graders=grader(mode, retries=2))
    result = run(tmp_path)
    assert result.exit_code == 1
    assert "retried 2 attempts; failed 1 batches" in result.output
    assert "failed: query q01 batch 0: grader-a command, q01 batch 0" in result.output
    assert message in result.output
    assert not grades_file(tmp_path).exists()  # nothing recorded: no empty file left
    # the exit is one Error line, last, naming the failures, what is kept and the rerun
    last = result.output.strip().splitlines()[-1]
    assert last.startswith("Error: 1 batch of grader-a failed on every attempt")
    assert "the 0 grades recorded in this run are kept" in last
    assert last.endswith("relgrade grade run --grader grader-a")


def test_a_grader_that_hangs_is_killed_at_the_timeout(tmp_path):
    ex.build(tmp_path, queries=1, chunks=2, graders=grader("hang", timeout=0.5, retries=0))
    t0 = time.monotonic()
    result = run(tmp_path)
    assert time.monotonic() - t0 < 15
    assert result.exit_code == 1
    assert "grader command timed out after 0.5 s" in result.output
    assert not grades_file(tmp_path).exists()


def test_a_retry_passes_the_previous_error_and_its_answer_is_recorded(tmp_path, monkeypatch):
    log = tmp_path / "log"
    log.mkdir()
    monkeypatch.setenv("RELGRADE_TEST_LOG", str(log))
    packets = ex.build(tmp_path, queries=1, chunks=3, graders=grader("flaky", retries=1))
    result = run(tmp_path)
    assert result.exit_code == 0, result.output
    assert "retried 1 attempts; failed 0 batches" in result.output
    reqs = sorted((json.loads(f.read_text()) for f in log.iterdir()), key=lambda r: r["attempt"])
    assert [r["attempt"] for r in reqs] == [1, 2]
    assert reqs[0]["previous_error"] is None
    assert "grader output line is not JSON" in reqs[1]["previous_error"]
    assert "Your previous answer was refused" in reqs[1]["prompt"]
    assert recorded(tmp_path) == truth_rows(packets)


def test_a_missing_command_is_refused_before_anything_runs(tmp_path):
    g = grader("ok")
    g["grader-a"]["command"] = ["/nonexistent/relgrade-grader"]
    ex.build(tmp_path, queries=1, chunks=2, graders=g)
    result = run(tmp_path)
    assert result.exit_code == 1
    assert "grader command not found or not executable" in result.output


def test_a_run_resumes_and_grades_only_what_is_missing_even_inside_a_batch(tmp_path):
    ex.build(tmp_path, queries=2, chunks=7, graders=grader("ok"))
    pre = [{"query_id": "q01", "chunk_id": c, "reason": "graded earlier by hand", "grade": 0}
           for c in ("q01-c0", "q01-c1", "q01-c2", "q01-c3", "q01-c4", "q01-c6")]
    with GradeStore(grades_file(tmp_path)).open() as store:
        store.append(pre)
    result = run(tmp_path)
    assert result.exit_code == 0, result.output
    assert "graded 8 pairs in 3 batches" in result.output  # q01-c5 alone, then q02's 7
    rows = ex.read_rows(grades_file(tmp_path))
    assert rows[:6] == pre
    pairs = [(r["query_id"], r["chunk_id"]) for r in rows]
    assert len(pairs) == len(set(pairs)) == 14
    assert {r["grade"] for r in rows if r["chunk_id"] == "q01-c5"} == {ex.truth("q01-c5")}


def test_an_invalid_recorded_row_stops_the_run_before_any_grading(tmp_path):
    ex.build(tmp_path, queries=1, chunks=2, graders=grader("ok"))
    f = grades_file(tmp_path)
    f.parent.mkdir(parents=True)
    f.write_text('{"query_id":"q01","chunk_id":"q01-c0","reason":"x","grade":5}\n')
    result = run(tmp_path)
    assert result.exit_code == 1
    assert f"{f}:1: grader-a: pair (q01, q01-c0): grade outside the scale 0-2" in result.output
    assert f.read_text().count("\n") == 1


def test_grades_made_on_an_edited_intent_are_offered_again_and_the_sidecar_follows(tmp_path):
    from relgrade.experiment.files import Experiment

    packets = ex.build(tmp_path, queries=1, chunks=2, graders=grader("ok"))
    experiment = Experiment.load(tmp_path / "params.yaml")
    now = experiment.made_on(experiment.packets("grader"))
    pre = [{"query_id": "q01", "chunk_id": "q01-c0", "reason": "read on the old intent",
            "grade": 0}]
    # a grade made while the intent line read otherwise: its bank line holds another hash
    with GradeStore(grades_file(tmp_path),
                    made_on=lambda row: {**now(row), "intent_sha256": "b" * 64}).open() as store:
        store.append(pre)
    meta = grades_file(tmp_path).with_name("round-1.meta.json")
    meta.write_text(json.dumps({"intents_sha256": "b" * 64, "rubric_version": "v1",
                                "round": 1}))
    result = run(tmp_path)
    assert result.exit_code == 0, result.output
    assert "graded 2 pairs in 1 batch" in result.output  # the stale one and the new one
    rows = ex.read_rows(grades_file(tmp_path))
    assert rows[0] == pre[0]  # the old grade stays recorded, beside what it was made on
    assert sorted(r["chunk_id"] for r in rows[1:]) == ["q01-c0", "q01-c1"]
    sidecar = json.loads(meta.read_text())
    assert sidecar["intents_sha256"] == next(iter(packets.values()))["intents_sha256"]
    assert sidecar["round"] == 1 and sidecar["regrade"] == "all"


def test_an_auditor_grades_its_own_packets_only(tmp_path):
    g = grader("ok")
    g["auditor-b"] = dict(g["grader-a"], role="auditor")
    ex.build(tmp_path, queries=4, chunks=3, audit=2, graders=g)
    assert run(tmp_path, grader_name="auditor-b").exit_code == 0
    rows = ex.read_rows(grades_file(tmp_path, "auditor-b"))
    assert sorted({r["query_id"] for r in rows}) == ["q01", "q02"]
    assert [r["chunk_id"] for r in rows if r["query_id"] == "q01"] == ["q01-c2", "q01-c1", "q01-c0"]


def test_ctrl_c_stops_the_run_keeps_accepted_batches_and_a_rerun_finishes(tmp_path):
    packets = ex.build(tmp_path, queries=6, chunks=10, graders=grader("sleep:0.3", workers=2))
    env = dict(os.environ, PYTHONPATH=f"{SRC}{os.pathsep}{ROOT}")
    cmd = [sys.executable, "-c", "from relgrade.cli import main; main()", "grade", "run",
           "--grader", "grader-a", "--params", str(tmp_path / "params.yaml")]
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    f = grades_file(tmp_path)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and (not f.exists() or f.stat().st_size == 0):
        time.sleep(0.05)
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=30)
    assert proc.returncode == 130, err
    assert "interrupted" in out
    rows = ex.read_rows(f)
    assert 0 < len(rows) < 60
    by_batch = {}
    for r in rows:
        q = r["query_id"]
        b = next(i for i, bt in enumerate(packets[q]["batches"])
                 if r["chunk_id"] in {c["chunk_id"] for c in bt})
        by_batch.setdefault((q, b), []).append(r["chunk_id"])
    for (q, b), ids in by_batch.items():  # whole batches only
        assert ids == [c["chunk_id"] for c in packets[q]["batches"][b]]
    g = yaml.safe_load((tmp_path / "params.yaml").read_text())
    g["graders"]["grader-a"]["command"] = ex.command("ok")
    (tmp_path / "params.yaml").write_text(yaml.safe_dump(g))
    assert run(tmp_path).exit_code == 0
    assert recorded(tmp_path) == truth_rows(packets)


# --- repeated sampling -----------------------------------------------------------------

def test_samples_record_the_majority_and_the_self_consistency_report(tmp_path):
    packets = ex.build(tmp_path, queries=2, chunks=6, graders=grader("samples", samples=3))
    result = run(tmp_path)
    assert result.exit_code == 0, result.output
    # samples 0 and 1 give the true grade, sample 2 gives 0: the majority is the truth
    assert recorded(tmp_path) == truth_rows(packets)
    samples = ex.read_rows(tmp_path / "data/grades/grader-a/samples/round-1.jsonl")
    assert len(samples) == 12 * 3
    assert list(samples[0]) == ["query_id", "chunk_id", "sample", "reason", "grade"]
    report = json.loads((tmp_path / "data/grades/grader-a/round-1.consistency.json").read_text())
    # per pair counts over (0,1,2): truth 0 -> (3,0,0); truth 1 -> (1,2,0); truth 2 -> (1,0,2)
    # four pairs of each truth
    p_i = [1.0] * 4 + [(1 + 4 - 3) / 6] * 8
    p_bar = sum(p_i) / 12
    p_j = [(12 + 4 + 4) / 36, 8 / 36, 8 / 36]
    p_e = sum(x * x for x in p_j)
    assert report["pairs"] == 12 and report["samples"] == 3
    assert report["unanimous_share"] == pytest.approx(4 / 12)
    assert report["fleiss_kappa"] == pytest.approx((p_bar - p_e) / (1 - p_e))
    assert "Fleiss' kappa" in result.output


def test_a_two_sample_tie_records_the_median_rounded_down_with_a_sampled_reason(tmp_path):
    ex.build(tmp_path, queries=1, chunks=2, graders=grader("samples", samples=2),
             text_of=lambda c: "TIE " + c["text"])
    assert run(tmp_path).exit_code == 0
    rows = ex.read_rows(grades_file(tmp_path))
    # sample 0 says 0, sample 1 says 2: the median of {0, 2} is 1; the reason is sample 0's
    assert [(r["grade"], r["reason"]) for r in rows] == [(1, "text marks it grade 0")] * 2


def test_a_recorded_sample_of_a_pair_that_left_the_pool_is_kept_in_the_file_and_not_counted():
    packets = {"q1": {"batches": [[{"chunk_id": "a"}]]}}  # (q1, b) has left the pool
    rows = [(1, {"query_id": "q1", "chunk_id": "b", "sample": 0, "reason": "Defines it.",
                 "grade": 2}),
            (2, {"query_id": "q1", "chunk_id": "a", "sample": 0, "reason": "Mentions it.",
                 "grade": 1})]
    df = graderun.recorded_samples(rows, packets=packets, scale=[0, 1, 2], max_reason_words=15,
                                   kind="model", role="grader", source="samples.jsonl")
    assert df.values.tolist() == [["q1", "a", 0, "Mentions it.", 1]]


def test_samples_already_recorded_are_not_asked_again(tmp_path, monkeypatch):
    packets = ex.build(tmp_path, queries=1, chunks=3, graders=grader("samples", samples=3))
    with GradeStore(tmp_path / "data/grades/grader-a/samples/round-1.jsonl",
                    key_fields=("query_id", "chunk_id", "sample")).open() as st:
        st.append([{"query_id": "q01", "chunk_id": c["chunk_id"], "sample": 0,
                    "reason": "from an earlier run", "grade": ex.truth(c["chunk_id"])}
                   for c in packets["q01"]["batches"][0]])
    log = tmp_path / "log"
    log.mkdir()
    monkeypatch.setenv("RELGRADE_TEST_LOG", str(log))
    assert run(tmp_path).exit_code == 0
    assert sorted(json.loads(f.read_text())["sample"] for f in log.iterdir()) == [1, 2]
    assert recorded(tmp_path) == truth_rows(packets)


def test_a_run_grades_again_only_the_pair_whose_chunk_changed_and_keeps_the_old_grade(tmp_path):
    ex.build(tmp_path, queries=1, chunks=3, graders=grader("ok"))
    assert run(tmp_path).exit_code == 0
    # q01-c1 (a POINTER, truth 1) is edited into an answer; the packets are rebuilt
    ex.build(tmp_path, queries=1, chunks=3, graders=grader("ok"),
             text_of=lambda c: "def f():\n    # ANSWER now\n" if c["chunk_id"] == "q01-c1"
             else None)
    result = run(tmp_path)
    assert result.exit_code == 0, result.output
    assert "graded 1 pairs in 1 batches" in result.output
    rows = ex.read_rows(grades_file(tmp_path))
    assert [(r["chunk_id"], r["grade"]) for r in rows] == [
        (rows[0]["chunk_id"], rows[0]["grade"]), (rows[1]["chunk_id"], rows[1]["grade"]),
        (rows[2]["chunk_id"], rows[2]["grade"]), ("q01-c1", 2)]
    assert sorted(r["chunk_id"] for r in rows[:3]) == ["q01-c0", "q01-c1", "q01-c2"]
    bank = ex.read_rows(grades_file(tmp_path).with_name("round-1.bank.jsonl"))
    c1 = [b["content_sha256"] for b in bank if b["chunk_id"] == "q01-c1"]
    assert len(bank) == 4 and len(c1) == 2 and c1[0] != c1[1]
    # a third run finds nothing to do: nothing is added
    assert run(tmp_path).exit_code == 0
    assert len(ex.read_rows(grades_file(tmp_path))) == 4


def test_packets_export_for_a_grader_holds_only_the_pairs_it_still_owes(tmp_path):
    ex.build(tmp_path, queries=2, chunks=3, graders=grader("ok"))
    assert run(tmp_path).exit_code == 0
    ex.build(tmp_path, queries=2, chunks=3, graders=grader("ok"),
             text_of=lambda c: "edited" if c["chunk_id"] == "q02-c2" else None)
    out = tmp_path / "owed.jsonl"
    res = CliRunner().invoke(main, ["packets", "export", "--role", "grader", "--out", str(out),
                                    "--grader", "grader-a",
                                    "--params", str(tmp_path / "params.yaml")])
    assert res.exit_code == 0, res.output
    owed = ex.read_rows(out)
    assert [(p["query_id"], [c["chunk_id"] for b in p["batches"] for c in b])
            for p in owed] == [("q02", ["q02-c2"])]


def test_packets_export_owes_by_default_once_the_grader_has_grades_and_all_on_request(tmp_path):
    # the change loop: grader-a graded everything, then one chunk changed; a plain export
    # (no --grader) holds only what grader-a owes, and its grades import back as they are
    def build(**kw):
        ex.build(tmp_path, queries=2, chunks=3, graders=grader("ok"), **kw)
        p = yaml.safe_load((tmp_path / "params.yaml").read_text())
        p["grading"]["key_grader"] = "grader-a"  # whose pairs a plain export owes
        (tmp_path / "params.yaml").write_text(yaml.safe_dump(p, sort_keys=False))

    build()
    params = ["--params", str(tmp_path / "params.yaml")]
    first = CliRunner().invoke(main, ["packets", "export", "--role", "grader", "--out",
                                      str(tmp_path / "first.jsonl"), *params])
    assert first.exit_code == 0, first.output
    assert first.output.strip().endswith("grader packets to "
                                         f"{tmp_path / 'first.jsonl'}: every pair")
    assert run(tmp_path).exit_code == 0
    build(text_of=lambda c: "edited" if c["chunk_id"] == "q02-c2" else None)
    out = tmp_path / "owed.jsonl"
    res = CliRunner().invoke(main, ["packets", "export", "--role", "grader", "--out", str(out),
                                    *params])
    assert res.exit_code == 0, res.output
    assert res.output.strip().endswith(": the 1 pairs grader-a still owes (--all for every "
                                       "pair)")
    assert [(p["query_id"], [c["chunk_id"] for b in p["batches"] for c in b])
            for p in ex.read_rows(out)] == [("q02", ["q02-c2"])]
    every = CliRunner().invoke(main, ["packets", "export", "--role", "grader", "--out",
                                      str(tmp_path / "all.jsonl"), "--all", *params])
    assert every.exit_code == 0 and every.output.strip().endswith(": every pair")
    assert sum(len(b) for p in ex.read_rows(tmp_path / "all.jsonl") for b in p["batches"]) == 6


# --- packets of another pool --------------------------------------------------------------

def _built_for(root, **changes):
    """Record what the packets were built for, then change the pool manifest or params."""
    (root / "data/packets/manifest.json").write_text(json.dumps(
        {"pool_version": "p-aaaaaaaaaaaa", "round": 1, "regrade": "all"}))
    params = yaml.safe_load((root / "params.yaml").read_text())
    params["paths"]["pool_manifest"] = "data/pool/manifest.json"
    params["grading"].update(changes)
    (root / "params.yaml").write_text(yaml.safe_dump(params, sort_keys=False))


def test_packets_of_another_pool_version_are_refused_naming_the_command_that_rebuilds_them(
        tmp_path):
    ex.build(tmp_path, queries=2, chunks=6, graders=grader("ok"))
    _built_for(tmp_path)
    (tmp_path / "data/pool").mkdir(parents=True, exist_ok=True)
    (tmp_path / "data/pool/manifest.json").write_text(json.dumps({"pool_version": "p-bbbbbbbbbbbb"}))
    result = run(tmp_path)
    assert result.exit_code == 1
    assert "are out of date: built for pool_version p-aaaaaaaaaaaa (now p-bbbbbbbbbbbb)" in \
        result.output
    assert result.output.rstrip().endswith("Rebuild them first: dvc repro packets")
    assert not grades_file(tmp_path).exists()  # nothing graded from stale packets


def test_packets_of_an_earlier_round_are_refused_and_current_ones_are_graded(tmp_path):
    ex.build(tmp_path, queries=2, chunks=6, graders=grader("ok"))
    _built_for(tmp_path, round=2)
    (tmp_path / "data/pool").mkdir(parents=True, exist_ok=True)
    (tmp_path / "data/pool/manifest.json").write_text(json.dumps({"pool_version": "p-aaaaaaaaaaaa"}))
    result = run(tmp_path)
    assert result.exit_code == 1 and "built for round 1 (now 2)" in result.output
    _built_for(tmp_path, round=1)  # the packets stage rebuilt them for the current round
    assert run(tmp_path).exit_code == 0
