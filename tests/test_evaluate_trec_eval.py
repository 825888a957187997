"""``relgrade evaluate`` as a trec_eval replacement: trec_eval's names in -m, its output
lines, its conventions (--no-relevant zero, --missing), extra fields on run lines, and the
errors and notes bad input gets."""

from __future__ import annotations

import ast
import json
from pathlib import Path

from click.testing import CliRunner

from relgrade.cli import main

QRELS = "q1 0 a 2\nq1 0 b 0\nq1 0 c 1\nq2 0 d 1\nq3 0 e 0\n"
# q1: a at rank 2, c at rank 3 (x unjudged at 1); q2: d at 1; q3: nothing relevant
RUN = ("q1 Q0 x 1 3.0 t\nq1 Q0 a 2 2.0 t\nq1 Q0 c 3 1.0 t\n"
       "q2 Q0 d 1 5.0 t\nq3 Q0 e 1 1.0 t\n")


def _files(tmp_path: Path, run: str = RUN, qrels: str = QRELS):
    (tmp_path / "key.qrels").write_text(qrels)
    (tmp_path / "sys.trec").write_text(run)
    return [str(tmp_path / "key.qrels"), str(tmp_path / "sys.trec")]


def _invoke(*args):
    return CliRunner().invoke(main, ["evaluate", *args])


def test_trec_eval_output_prints_measure_query_value_lines(tmp_path):
    result = _invoke(*_files(tmp_path), "-m", "map", "-m", "P.1,2", "-m", "num_rel_ret",
                     "--trec-eval-output", "--per-query", "--no-relevant", "zero")
    assert result.exit_code == 0, result.output
    ap1 = (1 / 2 + 2 / 3) / 2
    assert result.stdout.splitlines() == [
        f"map                   \tq1\t{ap1:.4f}",
        "P_1                   \tq1\t0.0000",
        "P_2                   \tq1\t0.5000",
        "num_rel_ret           \tq1\t2",
        "map                   \tq2\t1.0000",
        "P_1                   \tq2\t1.0000",
        "P_2                   \tq2\t0.5000",
        "num_rel_ret           \tq2\t1",
        "map                   \tq3\t0.0000",
        "P_1                   \tq3\t0.0000",
        "P_2                   \tq3\t0.0000",
        "num_rel_ret           \tq3\t0",
        "runid                 \tall\tt",  # the run's tag, as trec_eval prints it
        "num_q                 \tall\t3",
        f"map                   \tall\t{(ap1 + 1 + 0) / 3:.4f}",
        f"P_1                   \tall\t{1 / 3:.4f}",
        f"P_2                   \tall\t{1 / 3:.4f}",
        "num_rel_ret           \tall\t3",  # trec_eval sums the counts
    ]


def _runid(result) -> list[str]:
    return [line.split("\t")[2] for line in result.stdout.splitlines()
            if line.startswith("runid ")]


def test_the_runid_line_is_the_tag_of_the_run_s_last_line_as_trec_eval_prints_it(tmp_path):
    # trec_eval keeps the sixth field of the last line it reads and checks no other line
    run = RUN.replace("q1 Q0 x 1 3.0 t\n", "q1 Q0 x 1 3.0 first\n") \
             .replace("q3 Q0 e 1 1.0 t\n", "q3 Q0 e 1 1.0 last extra fields\n\n  \n")
    files = _files(tmp_path, run=run)
    result = _invoke(*files, "-m", "map", "--trec-eval-output")
    assert result.exit_code == 0, result.output
    assert _runid(result) == ["last"]
    # the table, the JSON and the notes keep naming the run by its file
    assert _invoke(*files, "-m", "map").output.splitlines()[1].split()[0] == "sys"


def test_a_run_without_tags_is_named_by_its_file_on_the_runid_line(tmp_path):
    _files(tmp_path)
    (tmp_path / "other.jsonl").write_text(
        '{"query_id": "q1", "chunk_id": "a", "rank": 1, "score": 2.0}\n')
    result = _invoke(str(tmp_path / "key.qrels"), str(tmp_path / "sys.trec"),
                     str(tmp_path / "other.jsonl"), "-m", "map", "--trec-eval-output")
    assert result.exit_code == 0, result.output
    assert _runid(result) == ["t", "other"]


def test_no_relevant_exclude_is_the_default_and_says_so(tmp_path):
    files = _files(tmp_path)
    excluded = _invoke(*files, "-m", "AP", "--json")
    zero = _invoke(*files, "-m", "AP", "--json", "--no-relevant", "zero")
    ap1 = (1 / 2 + 2 / 3) / 2
    doc = json.loads(excluded.output)
    assert doc["no_relevant"] == "exclude" and doc["excluded"] == {"AP": ["q3"]}
    assert doc["runs"]["sys"]["AP"] == (ap1 + 1) / 2
    assert json.loads(zero.output)["runs"]["sys"]["AP"] == (ap1 + 1 + 0) / 3
    table = _invoke(*files, "-m", "AP")
    assert ("Note: 1 of 3 queries excluded from AP: nothing relevant in the qrels (q3)."
            in table.output.splitlines())


def test_trec_eval_names_head_the_table_in_ir_measures_spelling(tmp_path):
    result = _invoke(*_files(tmp_path), "-m", "P.1,2", "-m", "recip_rank", "-m", "ndcg_cut.5")
    assert result.exit_code == 0, result.output
    assert result.output.splitlines()[0].split() == ["run", "P@1", "P@2", "RR", "nDCG@5"]


def test_extra_fields_on_run_lines_are_ignored_with_one_note(tmp_path):
    run = RUN.replace("q1 Q0 x 1 3.0 t\n", "q1 Q0 x 1 3.0 t more junk\n") \
             .replace("q2 Q0 d 1 5.0 t\n", "q2 Q0 d 1 5.0 t x\n")
    files = _files(tmp_path, run=run)
    plain = _invoke(*files, "-m", "AP")
    assert plain.exit_code == 0, plain.output
    notes = [n for n in plain.output.splitlines() if "fields after the sixth" in n]
    assert notes == [f"Note: {files[1]}: 2 line(s) have fields after the sixth "
                     "(first: line 1); they were ignored."]
    (tmp_path / "clean").mkdir()
    clean = _invoke(*_files(tmp_path / "clean"), "-m", "AP")
    assert plain.output.splitlines()[:2] == clean.output.splitlines()[:2]


def test_a_run_query_absent_from_the_qrels_is_reported(tmp_path):
    result = _invoke(*_files(tmp_path, run=RUN + "q9 Q0 z 1 1.0 t\n"), "-m", "AP")
    assert result.exit_code == 0, result.output
    assert ("Note: run sys answers 1 query that the qrels do not hold (e.g. q9); "
            "they are ignored." in result.output.splitlines())


def test_qrels_without_a_judgment_is_an_error(tmp_path):
    result = _invoke(*_files(tmp_path, qrels="\n"), "-m", "AP")
    assert result.exit_code == 1
    assert result.output.startswith(f"Error: {tmp_path / 'key.qrels'}")
    assert "Traceback" not in result.output


def test_bad_measures_are_errors_with_a_suggestion(tmp_path):
    files = _files(tmp_path)
    for name, message in [
        ("ndcg_cutt.10", "Error: ndcg_cutt.10: unknown measure (found ndcg_cutt). "
                         "Did you mean ndcg_cut.10?"),
        ("P.0", "Error: P.0: a measure's cutoff must be a positive integer (found 0)"),
        ("RBP(p=1.5)", "Error: RBP(p=1.5): RBP's persistence p must be in (0, 1) "
                       "(found 1.5)"),
    ]:
        result = _invoke(*files, "-m", name)
        assert result.exit_code == 1, name
        assert result.output.startswith(message), result.output


def test_json_and_trec_eval_output_exclude_each_other(tmp_path):
    result = _invoke(*_files(tmp_path), "--json", "--trec-eval-output")
    assert result.exit_code == 2
    assert "--json and --trec-eval-output exclude each other" in result.output


def test_the_command_module_imports_no_heavy_library_at_module_level():
    source = Path(__file__).resolve().parents[1] / "src" / "relgrade" / "cli" / "evaluate.py"
    tree = ast.parse(source.read_text())
    top = [n for n in tree.body if isinstance(n, (ast.Import, ast.ImportFrom))]
    names = {a.name for n in top if isinstance(n, ast.Import) for a in n.names}
    names |= {n.module for n in top if isinstance(n, ast.ImportFrom)}
    assert not {n for n in names if n and n.split(".")[0] in ("pandas", "numpy", "scipy",
                                                              "pyarrow")}
    assert not {n for n in names if n and n.startswith(("relgrade.evaluation", "relgrade.io",
                                                        "relgrade.ranking"))}
