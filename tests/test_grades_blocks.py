"""The grades stage a block of whole queries at a time: the same bytes as the whole path, and
every refusal worded by the whole path, as before."""

from __future__ import annotations

import json

import pyarrow as pa
import pytest

from relgrade.canonical import canonical_json
from relgrade.experiment.files import Experiment
from relgrade.pipeline import judgments_blocks
from relgrade.pipeline.stages import grades as stage
from relgrade.protocol import bank_blocks
from tests.test_grades import _row, _stage_dir, _stage_grades


def _canonical(root, p, grader):
    """A grader's file rewritten in canonical JSON, as relgrade writes grade rows (each
    row's hash in the sidecar is then the line's, and the bank is read as columns)."""
    path = root / p["grades_in"] / grader / "round-1.jsonl"
    rows = [json.loads(x) for x in path.read_text().splitlines()]
    path.write_text("".join(canonical_json(r) + "\n" for r in rows))


def _graded(root, p, *, a=None, b=None):
    """The five-pair experiment with both graders' files (in query order unless given)."""
    _stage_grades(root, p, "grader-a", a or [
        _row("q1", "c1", 1), _row("q1", "c2", 1), _row("q1", "c3", 2), _row("q1", "c4", 2),
        _row("q2", "c4", 2), _row("q2", "c5", 0)])
    _stage_grades(root, p, "auditor-b", b or [_row("q2", "c4", 1), _row("q2", "c5", 0)])
    for grader in ("grader-a", "auditor-b"):
        _canonical(root, p, grader)


def _outputs(root, p):
    return [(root / p[k]).read_bytes() if (root / p[k]).exists() else None
            for k in ("grades", "grades_manifest")]


def _run_both(root, p, monkeypatch):
    """The stage by blocks (two pool rows read at a time: q1, then q2) and by the whole
    path: each way's outputs (or its error), and whether the block path answered."""
    monkeypatch.chdir(root)
    answered = []
    real = judgments_blocks.grades_by_blocks

    def small(ex, out, **kw):
        got = real(ex, out, **kw, rows=2)
        answered.append(got is not None)
        return got

    results = []
    for blocks in (True, False):
        for k in ("grades", "grades_manifest"):
            (root / p[k]).unlink(missing_ok=True)
        monkeypatch.setattr(judgments_blocks, "grades_by_blocks", small)
        monkeypatch.setattr(judgments_blocks, "eligible",
                            (lambda ex: True) if blocks else (lambda ex: False))
        try:
            stage.run(Experiment.load(root / "params.yaml"))
            results.append(_outputs(root, p))
        except Exception as e:  # noqa: BLE001 - each way's refusal, compared
            results.append((type(e).__name__, str(e), _outputs(root, p)))
    return results, answered


def test_the_stage_by_blocks_writes_the_bytes_of_the_whole_path(tmp_path, monkeypatch):
    _, p = _stage_dir(tmp_path)
    _graded(tmp_path, p)
    (by_blocks, whole), answered = _run_both(tmp_path, p, monkeypatch)
    assert answered == [True]
    assert by_blocks == whole and whole[0] is not None
    manifest = json.loads(whole[1])
    a = manifest["graders"]["grader-a"]
    # (q1, c4) is not in the pool: kept in the bank, unused
    assert (a["rows"], a["queries"], a["bank_rows"], a["unused"]) == (5, 2, 6, 1)
    assert manifest["pool_pairs"] == 5
    assert manifest["judging"]["grader-a"] == {"spent": 6, "pending": 0}


def test_a_file_out_of_query_order_goes_to_the_whole_path_with_the_same_bytes(
        tmp_path, monkeypatch):
    _, p = _stage_dir(tmp_path)
    _graded(tmp_path, p, a=[
        _row("q2", "c4", 2), _row("q1", "c1", 1), _row("q1", "c2", 1), _row("q1", "c3", 2),
        _row("q2", "c5", 0)])
    (by_blocks, whole), answered = _run_both(tmp_path, p, monkeypatch)
    assert answered == [False]
    assert by_blocks == whole and whole[0] is not None


def _first_grade_stale(tmp_path, p) -> None:
    """grader-a's first grade made on other text: stale, so its pair is owed again."""
    path = tmp_path / p["grades_in"] / "grader-a/round-1.bank.jsonl"
    lines = path.read_text().splitlines()
    first = json.loads(lines[0])
    first["content_sha256"] = "0" * 64
    path.write_text("\n".join([json.dumps(first), *lines[1:]]) + "\n")


def test_a_stale_grade_stops_the_stage_with_the_whole_paths_words(tmp_path, monkeypatch):
    _, p = _stage_dir(tmp_path)
    _graded(tmp_path, p)
    _first_grade_stale(tmp_path, p)
    (by_blocks, whole), answered = _run_both(tmp_path, p, monkeypatch)
    # (q1, c1) is owed again: the stage stops, worded by the whole path both ways
    assert answered == [False]
    assert by_blocks == whole and "1 pair needs grader-a (1 stale)" in whole[1]


@pytest.mark.parametrize("bad, message", [
    (_row("q2", "c5", 3), "grade outside the scale 0-2 (found 3)"),
    ({"query_id": "q2", "chunk_id": "c5", "grade": 0, "reason": "x"}, "keys out of order"),
])
def test_a_bad_row_is_refused_with_the_whole_paths_words_and_nothing_written(
        tmp_path, monkeypatch, bad, message):
    _, p = _stage_dir(tmp_path)
    _graded(tmp_path, p)
    path = tmp_path / p["grades_in"] / "auditor-b/round-1.jsonl"
    path.write_text(path.read_text() + json.dumps(bad) + "\n")
    (by_blocks, whole), answered = _run_both(tmp_path, p, monkeypatch)
    assert answered == [False]
    assert by_blocks == whole
    assert whole[0] == "InputError" and message in whole[1] and ":3: auditor-b" in whole[1]
    assert whole[2] == [None, None]


def test_a_missing_bank_line_is_refused_with_the_whole_paths_words(tmp_path, monkeypatch):
    _, p = _stage_dir(tmp_path)
    _graded(tmp_path, p)
    path = tmp_path / p["grades_in"] / "grader-a/round-1.bank.jsonl"
    path.write_text("".join(path.read_text().splitlines(keepends=True)[:-1]))
    (by_blocks, whole), answered = _run_both(tmp_path, p, monkeypatch)
    assert answered == [False]
    assert by_blocks == whole and whole[0] == "InputError" and whole[2] == [None, None]


def _blocks(*queries):
    """RoundBlocks-like blocks: one block per tuple of query ids, chunk c, grade 1."""
    out = []
    for qs in queries:
        n = len(qs)
        rows = pa.table({"query_id": list(qs), "chunk_id": [f"c{i}" for i in range(n)],
                         "reason": ["r"] * n, "grade": pa.array([1] * n, pa.int64()),
                         "line_sha256": ["x"] * n, "keys_in_order": [True] * n})
        lines = pa.table({"query_id": list(qs), "chunk_id": [f"c{i}" for i in range(n)],
                          "content_sha256": ["h"] * n, "intent_sha256": ["i"] * n,
                          "rubric_version": ["v"] * n, "rubric_sha256": ["r"] * n,
                          "graded_at": ["t"] * n, "row_sha256": pa.nulls(n, pa.string()),
                          "imported_format": pa.nulls(n, pa.string())})
        out.append((rows, lines))
    return out


def _cursor(blocks, monkeypatch):
    monkeypatch.setattr(bank_blocks, "block_breaks", lambda rows, lines, **kw: False)
    return bank_blocks.QueryCursor(blocks, spec={"role": "grader", "kind": "model"},
                                   scale=[0, 1, 2], max_reason_words=15)


def test_the_cursor_cuts_a_round_at_query_boundaries_across_its_blocks(monkeypatch):
    cursor = _cursor(_blocks(("a", "a", "b"), ("b", "c"), ("d",)), monkeypatch)
    rows, lines, first = cursor.upto("b")
    assert rows.column("query_id").to_pylist() == ["a", "a", "b", "b"] and first == 0
    assert lines.num_rows == 4
    rows, _, first = cursor.upto("c")
    assert rows.column("query_id").to_pylist() == ["c"] and first == 4
    rows, _, first = cursor.upto(None)
    assert rows.column("query_id").to_pylist() == ["d"] and first == 5
    assert not cursor.broken and cursor.rows == 6


def test_the_cursor_breaks_on_a_query_that_sorts_before_the_one_above_it(monkeypatch):
    cursor = _cursor(_blocks(("a", "c"), ("b",)), monkeypatch)
    assert cursor.upto("a") is not None  # the second block is not read yet
    assert cursor.upto(None) is None and cursor.broken


def test_out_of_order_compares_ids_by_code_point_as_python_does():
    # "Z" < "a" < "é" < "😀" in Python's order and in UTF-8 bytes
    assert not bank_blocks.out_of_order(pa.array(["Z", "a", "é", "😀"]), None)
    assert bank_blocks.out_of_order(pa.array(["a"]), "é")


def test_manifest_entries_of_two_blocks_add_their_counts_and_join_their_missing_pairs():
    total = bank_blocks.sum_entries({}, {"role": "auditor", "rows": 2, "queries": 1,
                                         "pairs_missing": 1, "missing": {"q1": ["c2"]},
                                         "bank_rows": 4, "unused": 2})
    total = bank_blocks.sum_entries(total, {"role": "auditor", "rows": 3, "queries": 2,
                                            "pairs_missing": 2, "missing": {"q2": ["c1", "c3"]},
                                            "bank_rows": 3, "unused": 0})
    assert total == {"role": "auditor", "rows": 5, "queries": 3, "pairs_missing": 3,
                     "missing": {"q1": ["c2"], "q2": ["c1", "c3"]}, "bank_rows": 7,
                     "unused": 2}
