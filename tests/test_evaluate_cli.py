"""``relgrade evaluate``: the table, --json, --per-query, tie and missing-query policies,
qrels formats and errors, with exact numbers."""

from __future__ import annotations

import json

import numpy as np
from click.testing import CliRunner

from relgrade.cli import main

QRELS = "q1 0 a 1\nq2 0 b 1\nq2 0 c 1\nq3 0 e 2\n"
RUN = "q1 Q0 a 1 2 x\nq1 Q0 x 2 1 x\nq2 Q0 y 1 2 x\nq2 Q0 b 2 1 x\n"
Q2_NDCG = (1 / np.log2(3)) / (1 + 1 / np.log2(3))


def _files(tmp_path, qrels=QRELS, **runs):
    (tmp_path / "key.qrels").write_text(qrels)
    for name, text in (runs or {"bm25": RUN}).items():
        (tmp_path / f"{name}.trec").write_text(text)
    return tmp_path


def _invoke(tmp_path, *args):
    return CliRunner().invoke(main, ["evaluate", str(tmp_path / "key.qrels"), *args])


def test_default_table_has_one_row_per_run_and_full_precision(tmp_path):
    _files(tmp_path, bm25=RUN, dense="q1 Q0 x 1 2 d\nq1 Q0 a 2 1 d\n")
    result = _invoke(tmp_path, str(tmp_path / "bm25.trec"), str(tmp_path / "dense.trec"))
    assert result.exit_code == 0, result.output
    lines = result.output.splitlines()
    assert lines[0].split() == ["run", "nDCG(dcg='exp-log2')@10", "R@10", "RR@10", "Judged@10"]
    ndcg_bm25 = float((1 + Q2_NDCG + 0) / 3)
    assert lines[1].split() == ["bm25", repr(ndcg_bm25), repr((1 + 0.5 + 0) / 3),
                                repr((1 + 0.5 + 0) / 3), repr((0.5 + 0.5 + 0) / 3)]
    ndcg_dense = float((1 / np.log2(3)) / 3)
    assert lines[2].split() == ["dense", repr(ndcg_dense), repr(1 / 3), repr(0.5 / 3),
                                repr(0.5 / 3)]
    assert "Note: run bm25 answers 2 of 3 queries; the other 1 score 0." in lines
    assert "Note: run dense answers 1 of 3 queries; the other 2 score 0." in lines


def test_json_output_carries_means_and_policies(tmp_path):
    _files(tmp_path)
    result = _invoke(tmp_path, str(tmp_path / "bm25.trec"), "--json", "-m", "RR@10",
                     "-m", "nDCG(dcg='exp-log2')@10")
    assert result.exit_code == 0, result.output
    doc = json.loads(result.output)
    assert doc["measures"] == ["RR@10", "nDCG(dcg='exp-log2')@10"]
    assert doc["queries"] == 3 and doc["ties"] == "score" and doc["missing"] == "zero"
    assert doc["runs"] == {"bm25": {"RR@10": 0.5,
                                    "nDCG(dcg='exp-log2')@10": (1 + Q2_NDCG) / 3}}
    assert doc["excluded"] == {}


def test_per_query_lists_each_query_value(tmp_path):
    _files(tmp_path)
    result = _invoke(tmp_path, str(tmp_path / "bm25.trec"), "--per-query", "-m", "RR")
    assert result.exit_code == 0, result.output
    lines = [ln.split() for ln in result.output.splitlines()]
    assert lines[:4] == [["run", "query_id", "measure", "value"], ["bm25", "q1", "RR", "1.0"],
                         ["bm25", "q2", "RR", "0.5"], ["bm25", "q3", "RR", "0.0"]]
    doc = json.loads(_invoke(tmp_path, str(tmp_path / "bm25.trec"), "--per-query", "--json",
                             "-m", "RR").output)
    assert doc["per_query"] == [
        {"run": "bm25", "query_id": "q1", "measure": "RR", "value": 1.0},
        {"run": "bm25", "query_id": "q2", "measure": "RR", "value": 0.5},
        {"run": "bm25", "query_id": "q3", "measure": "RR", "value": 0.0}]


def test_ties_and_missing_policies(tmp_path):
    _files(tmp_path, qrels="q1 0 d3 1\nq2 0 d10 1\nq3 0 z 1\n",
           tied="q1 Q0 d1 1 1.0 t\nq1 Q0 d2 2 1.0 t\nq1 Q0 d3 3 1.0 t\n"
                "q2 Q0 d9 1 0.5 t\nq2 Q0 d10 2 0.5 t\n")
    run = str(tmp_path / "tied.trec")

    def rr(*args):
        return json.loads(_invoke(tmp_path, run, "--json", "-m", "RR", *args).output)[
            "runs"]["tied"]["RR"]

    assert rr() == (1 + 0.5 + 0) / 3
    assert rr("--missing", "skip") == (1 + 0.5) / 2
    assert rr("--missing", "skip", "--ties", "rank") == (1 / 3 + 1 / 2) / 2


def test_numeric_ids_and_jsonl_key(tmp_path):
    (tmp_path / "key.jsonl").write_text(
        '{"query_id":"9","chunk_id":"1","grade":2}\n{"query_id":"10","chunk_id":"2","grade":1}\n')
    (tmp_path / "r.trec").write_text("9 Q0 2 1 5 t\n9 Q0 1 2 4 t\n10 Q0 2 1 1 t\n")
    result = CliRunner().invoke(main, ["evaluate", str(tmp_path / "key.jsonl"),
                                       str(tmp_path / "r.trec"), "--json", "-m", "RR",
                                       "-m", "RR(rel=2)", "--per-query"])
    assert result.exit_code == 0, result.output
    doc = json.loads(result.output)
    assert doc["runs"]["r"] == {"RR": (0.5 + 1.0) / 2, "RR(rel=2)": 0.5}
    assert [(r["query_id"], r["measure"]) for r in doc["per_query"]] == [
        ("10", "RR"), ("9", "RR"), ("9", "RR(rel=2)")]
    assert doc["excluded"] == {"RR(rel=2)": ["10"]}


def test_queries_with_nothing_relevant_are_counted_in_a_note(tmp_path):
    _files(tmp_path, qrels="q1 0 a 1\nq2 0 b 0\n", r="q1 Q0 a 1 1 t\nq2 Q0 b 1 1 t\n")
    result = _invoke(tmp_path, str(tmp_path / "r.trec"), "-m", "RR@10", "-m", "Judged@10")
    assert result.exit_code == 0, result.output
    assert result.output.splitlines()[1].split() == ["r", "1.0", "1.0"]
    assert ("Note: 1 of 2 queries excluded from RR@10: nothing relevant in the qrels (q2)."
            in result.output)


def test_bad_run_is_an_error_naming_the_file(tmp_path):
    _files(tmp_path, dup="q1 Q0 a 1 2 x\nq1 Q0 a 2 1 x\n")
    result = _invoke(tmp_path, str(tmp_path / "dup.trec"))
    assert result.exit_code == 1
    assert result.output.strip() == (
        f"Error: {tmp_path / 'dup.trec'}:2: query q1, chunk a: a chunk is listed twice for "
        "one query (found lines 1 and 2). List each chunk at most once per query")
    _files(tmp_path, nan="q1 Q0 a 1 nan x\n")
    result = _invoke(tmp_path, str(tmp_path / "nan.trec"))
    assert result.exit_code == 1
    assert result.output.strip() == (f"Error: {tmp_path / 'nan.trec'}:1: score must be a "
                                     "finite number (found 'nan')")


def test_an_empty_run_s_fix_speaks_of_the_command_not_of_arms(tmp_path):
    # outside an experiment there are no arms: the fix names the run and the command
    _files(tmp_path, bm25=RUN, empty="", blank="\n  \n")
    for name in ("empty", "blank"):
        result = _invoke(tmp_path, str(tmp_path / "bm25.trec"), str(tmp_path / f"{name}.trec"))
        assert result.exit_code == 1
        assert result.output.strip() == (
            f"Error: {tmp_path / f'{name}.trec'}: the run is empty. Give the run at least one "
            "ranked chunk, or leave the file out of `relgrade evaluate`")


def test_bad_measure_name_is_an_error(tmp_path):
    _files(tmp_path)
    result = _invoke(tmp_path, str(tmp_path / "bm25.trec"), "-m", "nDGC@10")
    assert result.exit_code == 1
    assert result.output.startswith("Error: nDGC@10: unknown measure (found nDGC). "
                                    "Did you mean nDCG@10?")


def test_a_lower_case_measure_name_suggests_its_canonical_spelling_with_the_cutoff(tmp_path):
    _files(tmp_path)
    result = _invoke(tmp_path, str(tmp_path / "bm25.trec"), "-m", "ndcg@10")
    assert result.exit_code == 1
    assert result.output.startswith("Error: ndcg@10: unknown measure (found ndcg). "
                                    "Did you mean nDCG@10? Known measures: ")


def test_help_names_every_option():
    result = CliRunner().invoke(main, ["evaluate", "--help"])
    assert result.exit_code == 0
    for option in ("--measure", "--per-query", "--json", "--ties", "--missing"):
        assert option in result.output


def test_jsonl_key_without_extension_and_missing_qrels(tmp_path):
    (tmp_path / "key").write_text('\ufeff{"query_id":"q1","chunk_id":"a","grade":1}\n')
    (tmp_path / "r.trec").write_text("q1 Q0 a 1 1 t\n")
    result = CliRunner().invoke(main, ["evaluate", str(tmp_path / "key"),
                                       str(tmp_path / "r.trec"), "--json", "-m", "RR"])
    assert result.exit_code == 0, result.output
    assert json.loads(result.output)["runs"] == {"r": {"RR": 1.0}}
    result = CliRunner().invoke(main, ["evaluate", str(tmp_path / "absent.qrels"),
                                       str(tmp_path / "r.trec")])
    assert result.exit_code == 1
    assert result.output.strip() == f"Error: {tmp_path / 'absent.qrels'}: file not found"


def test_arrow_buffers_come_from_the_system_allocator_during_the_command_only(tmp_path):
    # in a fresh process, where nothing else asks Arrow's system pool for memory: its
    # high-water mark rises while the command reads and scores a run, and the default pool is
    # put back afterwards, also after an error
    import subprocess
    import sys

    _files(tmp_path, bm25=RUN, dup="q1 Q0 a 1 2 x\nq1 Q0 a 2 1 x\n")
    code = (
        "import sys\n"
        "import pyarrow as pa\n"
        "from relgrade.cli import main\n"
        "before = pa.default_memory_pool()\n"
        "print(pa.system_memory_pool().max_memory())\n"
        "for run in sys.argv[2:]:\n"
        "    try:\n"
        "        main(['evaluate', sys.argv[1], run, '--json'], standalone_mode=False)\n"
        "    except Exception as e:\n"
        "        print(type(e).__name__)\n"
        "    print(pa.default_memory_pool().backend_name == before.backend_name,\n"
        "          pa.system_memory_pool().max_memory() > 0)\n")
    out = subprocess.run([sys.executable, "-c", code, str(tmp_path / "key.qrels"),
                          str(tmp_path / "bm25.trec"), str(tmp_path / "dup.trec")],
                         capture_output=True, text=True, check=True).stdout
    lines = out.splitlines()
    assert lines[0] == "0"
    assert json.loads("\n".join(lines[1:-3]))["runs"]["bm25"]["R@10"] == (1 + 0.5 + 0) / 3
    assert lines[-3:] == ["True True", "ClickException", "True True"]
