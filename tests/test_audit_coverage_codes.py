"""The audit coverage counted over pair codes (`protocol.audit.audit_coverage`): the counts,
coverage and incomplete queries the sets of (query, chunk) pairs give, on random tables with
repeated pairs, other graders and queries outside the audit; and the same counted over
blocks of rows (`audit_coverage_blocks`, the gate stage's bounded read)."""

import numpy as np
import pandas as pd
import pytest

from relgrade.protocol.audit import audit_coverage, audit_coverage_blocks


def _by_sets(pool, grades, audit_ids, key_grader, auditor):
    """The coverage as sets of pairs, written out (the rule in its plainest form)."""
    ids = {str(q) for q in audit_ids}
    wanted = {(str(q), str(c)) for q, c in zip(pool["query_id"], pool["chunk_id"])
              if str(q) in ids}

    def graded_by(name):
        return {(str(q), str(c)) for q, c, g in
                zip(grades["query_id"], grades["chunk_id"], grades["grader"])
                if str(g) == name} & wanted

    by_key, by_auditor = graded_by(key_grader), graded_by(auditor)
    both = by_key & by_auditor
    return {"pairs": len(wanted), "both": len(both),
            "key_grader_missing": len(wanted - by_key),
            "auditor_missing": len(wanted - by_auditor),
            "coverage": len(both) / len(wanted) if wanted else None,
            "queries_incomplete": sorted({q for q, _ in wanted - both})}


@pytest.mark.parametrize("seed", range(8))
def test_coverage_by_codes_is_the_coverage_by_sets(seed):
    rng = np.random.default_rng(seed)
    queries = [f"q{i}" for i in range(6)]
    chunks = [f"c{i}" for i in range(9)]
    n = int(rng.integers(0, 40))
    pool = pd.DataFrame({"query_id": rng.choice(queries, n), "chunk_id": rng.choice(chunks, n)})
    m = int(rng.integers(0, 60))
    grades = pd.DataFrame({"query_id": rng.choice(queries, m), "chunk_id": rng.choice(chunks, m),
                           "grader": rng.choice(["key", "aud", "other"], m)})
    audit = list(rng.choice(queries, int(rng.integers(0, 4)), replace=False))
    got = audit_coverage(pool, grades, audit_ids=audit, key_grader="key", auditor="aud")
    assert got == _by_sets(pool, grades, audit, "key", "aud")


def test_coverage_by_hand_with_a_pair_pooled_twice():
    pool = pd.DataFrame({"query_id": ["q", "q", "q", "r"], "chunk_id": ["a", "a", "b", "c"]})
    grades = pd.DataFrame({"query_id": ["q", "q", "q"], "chunk_id": ["a", "a", "b"],
                           "grader": ["g", "x", "g"]})
    got = audit_coverage(pool, grades, audit_ids=["q", "r"], key_grader="g", auditor="x")
    # pairs q/a, q/b, r/c: both graders only on q/a; the key grader misses r/c
    assert got == {"pairs": 3, "both": 1, "key_grader_missing": 1, "auditor_missing": 2,
                   "coverage": 1 / 3, "queries_incomplete": ["q", "r"]}


def _cut(table, rng):
    """``table`` cut at random places into blocks (some of them empty)."""
    cuts = np.sort(rng.integers(0, len(table) + 1, int(rng.integers(0, 5))))
    edges = [0, *cuts.tolist(), len(table)]
    return [table.iloc[a:b] for a, b in zip(edges, edges[1:])]


@pytest.mark.parametrize("seed", range(8))
def test_coverage_over_blocks_is_the_coverage_of_the_whole_tables(seed):
    rng = np.random.default_rng(100 + seed)
    queries = [f"q{i}" for i in range(6)]
    chunks = [f"c{i}" for i in range(9)]
    n, m = int(rng.integers(0, 40)), int(rng.integers(0, 60))
    pool = pd.DataFrame({"query_id": rng.choice(queries, n), "chunk_id": rng.choice(chunks, n)})
    grades = pd.DataFrame({"query_id": rng.choice(queries, m), "chunk_id": rng.choice(chunks, m),
                           "grader": rng.choice(["key", "aud", "other"], m)})
    audit = list(rng.choice(queries, int(rng.integers(0, 4)), replace=False))
    got = audit_coverage_blocks(_cut(pool, rng), _cut(grades, rng), audit_ids=audit,
                                key_grader="key", auditor="aud")
    assert got == _by_sets(pool, grades, audit, "key", "aud")


def test_coverage_over_blocks_by_hand_a_pair_split_across_blocks():
    pool = [pd.DataFrame({"query_id": ["q", "q"], "chunk_id": ["a", "b"]}),
            pd.DataFrame({"query_id": ["q", "r"], "chunk_id": ["a", "c"]})]
    # the auditor's grade of q/z is of no pooled pair; r/c is graded by the key grader only
    grades = [pd.DataFrame({"query_id": ["q", "r"], "chunk_id": ["a", "c"],
                            "grader": ["g", "g"]}),
              pd.DataFrame({"query_id": ["q", "q", "q"], "chunk_id": ["b", "a", "z"],
                            "grader": ["g", "x", "x"]})]
    got = audit_coverage_blocks(pool, grades, audit_ids=["r", "q"], key_grader="g",
                                auditor="x")
    # pairs q/a, q/b, r/c: both on q/a; the auditor misses q/b and r/c
    assert got == {"pairs": 3, "both": 1, "key_grader_missing": 0, "auditor_missing": 2,
                   "coverage": 1 / 3, "queries_incomplete": ["q", "r"]}


def test_coverage_over_no_block_is_undefined():
    got = audit_coverage_blocks([], [], audit_ids=["q"], key_grader="g", auditor="x")
    assert got == {"pairs": 0, "both": 0, "key_grader_missing": 0, "auditor_missing": 0,
                   "coverage": None, "queries_incomplete": []}


def test_coverage_over_blocks_when_the_key_grader_audits_too():
    pool = [pd.DataFrame({"query_id": ["q", "q"], "chunk_id": ["a", "b"]})]
    grades = [pd.DataFrame({"query_id": ["q"], "chunk_id": ["a"], "grader": ["g"]})]
    got = audit_coverage_blocks(pool, grades, audit_ids=["q"], key_grader="g", auditor="g")
    assert got == {"pairs": 2, "both": 1, "key_grader_missing": 1, "auditor_missing": 1,
                   "coverage": 0.5, "queries_incomplete": ["q"]}
