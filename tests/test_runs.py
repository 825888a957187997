"""Runs: reading every accepted format, validation errors, and the canonical ranking."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from relgrade.errors import InputError
from relgrade.io.runs import read_run, run_lines
from relgrade.ranking import canonical_ranking, top_k, validate_run


def _run(rows, arm=None):
    df = pd.DataFrame(rows, columns=["query_id", "chunk_id", "rank", "score"])
    if arm is not None:
        df["arm"] = arm
    return df


# --- reading -------------------------------------------------------------------------

def test_trec_jsonl_and_parquet_give_the_same_run(tmp_path):
    (tmp_path / "r.run").write_text("1 Q0 4411 1 2.5 x\n1 Q0 b 2 1 x\n")
    (tmp_path / "r.jsonl").write_text(
        '{"query_id": 1, "chunk_id": 4411, "rank": 1, "score": 2.5}\n'
        '{"query_id": "1", "chunk_id": "b", "rank": 2, "score": 1}\n')
    pd.DataFrame({"query_id": [1, 1], "chunk_id": ["4411", "b"], "rank": [1, 2],
                  "score": [2.5, 1.0]}).to_parquet(tmp_path / "r.parquet")
    trec = read_run(tmp_path / "r.run")
    for other in ("r.jsonl", "r.parquet"):
        got = read_run(tmp_path / other)
        assert got["query_id"].tolist() == ["1", "1"]  # numbers become their text
        assert got["chunk_id"].tolist() == ["4411", "b"]
        pd.testing.assert_frame_equal(got, trec, check_dtype=False)
        assert got["rank"].dtype == np.int64 and got["score"].dtype == np.float64


def test_jsonl_run_errors_name_the_line(tmp_path):
    p = tmp_path / "r.jsonl"
    p.write_text('{"query_id": "q", "chunk_id": "a", "rank": 1, "score": 1}\n'
                 '{"query_id": "q", "chunk_id": "b", "rank": 2, "score": "high"}\n')
    with pytest.raises(InputError) as e:
        read_run(p)
    assert str(e.value) == f"{p}:2: score must be a number (found 'high')"
    p.write_text('{"query_id": "q", "chunk_id": "a", "rank": 1}\n')
    with pytest.raises(InputError, match=r":1: a run row needs the keys .* \(found no score\)"):
        read_run(p)


def test_parquet_run_missing_a_column_is_named(tmp_path):
    pd.DataFrame({"query_id": ["q"], "chunk_id": ["a"], "score": [1.0]}).to_parquet(
        tmp_path / "r.parquet")
    with pytest.raises(InputError, match=r"found no rank"):
        read_run(tmp_path / "r.parquet")


# --- validation ----------------------------------------------------------------------

def test_chunk_listed_twice_names_query_chunk_and_ranks():
    run = _run([("q1", "a", 1, 3.0), ("q1", "b", 2, 2.0), ("q1", "a", 3, 1.0)])
    with pytest.raises(InputError) as e:
        validate_run(run, path="runs/bm25.trec")
    assert str(e.value) == ("runs/bm25.trec: query q1, chunk a: a chunk is listed twice for "
                            "one query (found at ranks 1 and 3). List each chunk at most "
                            "once per query")


def test_same_chunk_for_two_queries_or_two_arms_is_fine():
    validate_run(_run([("q1", "a", 1, 1.0), ("q2", "a", 1, 1.0)]))
    validate_run(_run([("q1", "a", 1, 1.0), ("q1", "a", 1, 1.0)], arm=["x", "y"]))


@pytest.mark.parametrize("bad", [np.nan, np.inf, -np.inf])
def test_non_finite_score_is_rejected_naming_query_and_chunk(bad):
    run = _run([("q1", "a", 1, 1.0), ("q1", "b", 2, bad)])
    with pytest.raises(InputError) as e:
        validate_run(run, path="r.trec")
    assert str(e.value) == f"r.trec: query q1, chunk b: score must be a finite number (found {bad!r})"


def test_unknown_query_and_chunk_ids_are_rejected():
    run = _run([("q1", "a", 1, 1.0), ("q9", "zz", 2, 0.5)])
    with pytest.raises(InputError) as e:
        validate_run(run, path="r.trec", queries=["q1", "q2"])
    assert str(e.value) == ("r.trec: query q9, chunk zz: unknown query id (found 1 row(s) name "
                            "queries that are not in the query set, first q9)")
    with pytest.raises(InputError, match="query q9, chunk zz: unknown chunk id"):
        validate_run(run, queries={"q1", "q9"}, chunks=pd.Series(["a", "b"]))
    validate_run(run, queries=["q1", "q9"], chunks=["a", "zz"])


def test_empty_run_is_rejected():
    with pytest.raises(InputError, match="the run is empty"):
        validate_run(_run([]), path="r.trec")


# --- canonical ranking ---------------------------------------------------------------

def test_ties_follow_trec_eval_score_then_chunk_id_descending():
    run = _run([("q1", "d1", 1, 1.0), ("q1", "d2", 2, 1.0), ("q1", "d3", 3, 1.0),
                ("q2", "d9", 1, 0.5), ("q2", "d10", 2, 0.5)])
    ranked = canonical_ranking(run)
    assert ranked["chunk_id"].tolist() == ["d3", "d2", "d1", "d9", "d10"]
    assert ranked["rank"].tolist() == [1, 2, 3, 1, 2]


def test_ties_by_rank_keep_the_run_order():
    run = _run([("q1", "d1", 1, 1.0), ("q1", "d2", 2, 1.0), ("q1", "d3", 3, 1.0),
                ("q2", "d9", 1, 0.5), ("q2", "d10", 2, 0.5)])
    assert canonical_ranking(run, ties="rank")["chunk_id"].tolist() == [
        "d1", "d2", "d3", "d9", "d10"]


def test_input_rank_is_ignored_under_score_ties():
    run = _run([("q", "a", 1, 0.1), ("q", "b", 2, 0.9)])
    assert canonical_ranking(run)["chunk_id"].tolist() == ["b", "a"]
    assert canonical_ranking(run, ties="rank")["chunk_id"].tolist() == ["a", "b"]


def test_chunk_ids_compare_as_bytes_not_as_numbers():
    # byte order: "10" < "9" and "Z" < "a" < "é"; ties therefore rank é, a, Z, 9, 10
    run = _run([(q, c, 1, 2.0) for q, c in [("q", "10"), ("q", "9"), ("q", "a"), ("q", "Z"),
                                           ("q", "é")]])
    assert canonical_ranking(run)["chunk_id"].tolist() == ["é", "a", "Z", "9", "10"]


def test_queries_sorted_by_id_and_input_not_modified():
    run = _run([("q2", "a", 1, 1.0), ("q10", "b", 1, 1.0), ("q1", "c", 1, 1.0)])
    before = run.copy()
    assert canonical_ranking(run)["query_id"].tolist() == ["q1", "q10", "q2"]
    pd.testing.assert_frame_equal(run, before)


def test_each_arm_ranks_its_own_lists():
    run = _run([("q", "a", 1, 1.0), ("q", "b", 2, 2.0), ("q", "a", 1, 5.0),
                ("q", "c", 2, 0.0)], arm=["x", "x", "y", "y"])
    ranked = canonical_ranking(run)
    assert ranked[["arm", "chunk_id", "rank"]].values.tolist() == [
        ["x", "b", 1], ["x", "a", 2], ["y", "a", 1], ["y", "c", 2]]


def test_top_k_keeps_the_first_k_of_the_canonical_ranking():
    run = _run([("q", c, i + 1, s) for i, (c, s) in
                enumerate([("a", 1.0), ("b", 3.0), ("c", 3.0), ("d", 2.0)])])
    assert top_k(run, 2)["chunk_id"].tolist() == ["c", "b"]
    with pytest.raises(InputError, match="at least 1"):
        top_k(run, 0)


def test_unknown_tie_rule_is_an_input_error():
    with pytest.raises(InputError, match="ties must be"):
        canonical_ranking(_run([("q", "a", 1, 1.0)]), ties="random")


@settings(max_examples=80, deadline=None)
@given(rows=st.lists(st.tuples(st.sampled_from(["1", "2", "10", "q"]),
                               st.text(alphabet="ab9Z0é", min_size=1, max_size=3),
                               st.integers(1, 5),
                               st.sampled_from([0.0, 0.5, 1.0, -2.0, 1e-9])),
                     min_size=1, max_size=40, unique_by=lambda r: (r[0], r[1])),
       ties=st.sampled_from(["score", "rank"]), seed=st.integers(0, 2**32 - 1))
def test_canonical_ranking_equals_a_python_sort_whatever_the_row_order(rows, ties, seed):
    run = _run(rows)
    shuffled = run.sample(frac=1.0, random_state=np.random.default_rng(seed))

    def key(r):  # the rule, written as Python: bytes descending via a negated code point list
        neg = [-ord(ch) for ch in r[1]] + [1]  # shorter string sorts after its extensions
        primary = (-r[3],) if ties == "score" else (r[2], -r[3])
        return (r[0], *primary, neg)

    expected = sorted(rows, key=key)
    got = canonical_ranking(shuffled, ties=ties)
    assert list(zip(got["query_id"], got["chunk_id"])) == [(r[0], r[1]) for r in expected]
    ranks = got.groupby("query_id", sort=False).cumcount() + 1
    assert got["rank"].tolist() == ranks.tolist()


@settings(max_examples=60, deadline=None)
@given(scores=st.lists(st.sampled_from([0.0, 1.0, 2.0]), min_size=1, max_size=30),
       depth=st.integers(1, 6), seed=st.integers(0, 2**32 - 1))
def test_order_limited_to_a_depth_is_exact_down_to_that_depth(scores, depth, seed):
    from relgrade.ranking import canonical_order, ranks_in_sorted

    rng = np.random.default_rng(seed)
    n = len(scores)
    group = rng.integers(0, 3, size=n)
    chunk = np.array([f"c{i}" for i in rng.permutation(n)], dtype=object)
    score = np.array(scores)
    full = canonical_order(group, score, chunk)
    limited = canonical_order(group, score, chunk, depth=depth)
    top_full = full[ranks_in_sorted(group[full]) <= depth]
    top_limited = limited[ranks_in_sorted(group[limited]) <= depth]
    assert top_full.tolist() == top_limited.tolist()
    assert sorted(limited.tolist()) == list(range(n))


def test_ids_that_only_look_alike_through_the_key_separator_are_refused_not_merged():
    run = _run([("q\x1fa", "b", 1, 1.0), ("q", "a\x1fb", 1, 1.0)])
    with pytest.raises(InputError, match="holds the control character U\\+001F"):
        validate_run(run)


# --- id codes ------------------------------------------------------------------------

def test_id_codes_follow_code_point_order_and_give_the_ids_back():
    from relgrade.ranking import id_codes, ids_at

    # "Z" (U+005A) < "a" (U+0061) < "é" (U+00E9) < "𝔞" (U+1D51E): code-point order, which
    # UTF-8 byte order equals; "10" < "9" as text.
    values = pd.Series(["é", "a", "10", "𝔞", "Z", "9", "a"], dtype="str")
    codes, uniques = id_codes(values)
    assert uniques.to_pylist() == ["10", "9", "Z", "a", "é", "𝔞"]
    assert codes.tolist() == [4, 3, 0, 5, 2, 1, 3]
    assert codes.dtype == np.int64
    assert ids_at(uniques, codes).tolist() == values.tolist()


def test_id_codes_read_object_arrays_and_arrow_arrays_alike():
    import pyarrow as pa

    from relgrade.ranking import id_codes

    a = id_codes(np.array(["b", "a", "b"], dtype=object))
    b = id_codes(pa.array(["b", "a", "b"]))
    assert a[0].tolist() == b[0].tolist() == [1, 0, 1]
    assert a[1].to_pylist() == b[1].to_pylist() == ["a", "b"]


def test_id_codes_refuse_a_missing_id():
    from relgrade.ranking import id_codes

    with pytest.raises(InputError, match="an id is missing"):
        id_codes(pd.Series(["a", None], dtype="str"))


def test_sorted_codes_are_id_codes_with_the_ids_as_a_pandas_index():
    from relgrade.ranking import id_codes, sorted_codes

    codes, index = sorted_codes(["q2", "q1", "q2"])
    assert codes.tolist() == id_codes(["q2", "q1", "q2"])[0].tolist() == [1, 0, 1]
    assert index.tolist() == ["q1", "q2"]


def test_codes_in_gives_each_ids_place_in_the_set_and_minus_one_when_absent():
    import pyarrow as pa

    from relgrade.ranking import arrow_ids, codes_in

    values = pa.chunked_array([pa.array(["b", "x"], pa.large_string()),
                               pa.array(["a"], pa.large_string())])
    assert codes_in(values, arrow_ids(["a", "b"])).tolist() == [1, -1, 0]
    assert codes_in(arrow_ids(pd.Series([], dtype="str")), arrow_ids(["a"])).tolist() == []


def test_unknown_chunk_ids_are_named_first_few_distinct_in_file_order():
    # 7 rows with unknown chunks, 6 distinct ids: the error names the first five distinct.
    rows = [("q1", "a", 1, 1.0)] + [("q1", f"x{i}", i + 2, 0.5) for i in range(6)] + [
        ("q2", "x0", 1, 1.0)]
    with pytest.raises(InputError) as e:
        validate_run(_run(rows), path="r.trec", chunks=["a"])
    assert str(e.value) == ("r.trec: query q1, chunk x0: unknown chunk id (found 7 row(s) name "
                            "chunks that are not in the corpus, first x0, x1, x2, x3, x4)")


# --- where a run's rows sit in its file ------------------------------------------------

def test_a_repeated_chunk_in_a_trec_file_names_its_line_and_the_first_ones(tmp_path):
    # a byte-order mark, CRLF ends and two blank lines (one of spaces): rows 0, 1, 2 are
    # lines 1, 3, 5
    path = tmp_path / "bm25.trec"
    path.write_bytes(b"\xef\xbb\xbfq1 Q0 a 1 3 t\r\n\r\nq1 Q0 b 2 2 t\r\n \t \r\n"
                     b"q1 Q0 a 3 1 t\r\n")
    run = read_run(path)
    assert run_lines(path).lines([2, 0, 1]) == [5, 1, 3]
    with pytest.raises(InputError) as e:
        validate_run(run, path=path, lines=run_lines(path))
    assert str(e.value) == (f"{path}:5: query q1, chunk a: a chunk is listed twice for one "
                            "query (found lines 1 and 5). List each chunk at most once per "
                            "query")


def test_a_repeated_chunk_in_a_jsonl_run_names_its_lines(tmp_path):
    path = tmp_path / "r.jsonl"
    path.write_text('{"query_id": "q1", "chunk_id": "a", "rank": 1, "score": 3}\n\n'
                    '{"query_id": "q2", "chunk_id": "a", "rank": 1, "score": 3}\n'
                    '{"query_id": "q1", "chunk_id": "a", "rank": 2, "score": 1}\n')
    with pytest.raises(InputError) as e:
        validate_run(read_run(path), path=path, lines=run_lines(path))
    assert str(e.value).startswith(f"{path}:4: query q1, chunk a: a chunk is listed twice "
                                   "for one query (found lines 1 and 4)")


def test_an_unknown_chunk_or_query_in_a_trec_file_names_the_line_of_its_first_row(tmp_path):
    # a byte-order mark, CRLF ends and a blank line: rows 0, 1, 2, 3 are lines 1, 2, 4, 5;
    # the first unknown chunk (x) is row 2, line 4; the first unknown query (q9) row 3, line 5
    path = tmp_path / "r.trec"
    path.write_bytes(b"\xef\xbb\xbfq1 Q0 a 1 3 t\r\nq1 Q0 b 2 2 t\r\n\r\nq1 Q0 x 3 1 t\r\n"
                     b"q9 Q0 y 1 1 t\r\n")
    with pytest.raises(InputError) as e:
        validate_run(read_run(path), path=path, lines=run_lines(path), chunks=["a", "b"])
    assert str(e.value) == (f"{path}:4: query q1, chunk x: unknown chunk id (found 2 row(s) "
                            "name chunks that are not in the corpus, first x, y)")
    with pytest.raises(InputError) as e:
        validate_run(read_run(path), path=path, lines=run_lines(path), queries=["q1"])
    assert str(e.value) == (f"{path}:5: query q9, chunk y: unknown query id (found 1 row(s) "
                            "name queries that are not in the query set, first q9)")


def test_an_unknown_chunk_in_a_jsonl_run_names_its_line(tmp_path):
    path = tmp_path / "r.jsonl"
    path.write_text('{"query_id": "q1", "chunk_id": "a", "rank": 1, "score": 3}\n\n'
                    '{"query_id": "q1", "chunk_id": "zz", "rank": 2, "score": 1}\n')
    with pytest.raises(InputError) as e:
        validate_run(read_run(path), path=path, lines=run_lines(path), chunks=["a"])
    assert str(e.value).startswith(f"{path}:3: query q1, chunk zz: unknown chunk id")


def test_a_parquet_run_has_no_lines_and_its_repeat_names_the_ranks(tmp_path):
    path = tmp_path / "r.parquet"
    _run([("q1", "a", 1, 3.0), ("q1", "a", 4, 1.0)]).to_parquet(path)
    assert run_lines(path) is None
    with pytest.raises(InputError, match=r"r\.parquet: query q1, chunk a: .*found at ranks "
                                         r"1 and 4"):
        validate_run(read_run(path), path=path, lines=run_lines(path))


def test_lines_of_a_file_that_lost_rows_since_it_was_read_are_refused(tmp_path):
    path = tmp_path / "r.trec"
    path.write_text("q1 Q0 a 1 3 t\n")
    with pytest.raises(InputError, match="the file changed since it was read"):
        run_lines(path).lines([0, 1])
