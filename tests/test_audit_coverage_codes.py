"""The audit coverage counted over pair codes (`protocol.audit.audit_coverage`): the counts,
coverage and incomplete queries the sets of (query, chunk) pairs give, on random tables with
repeated pairs, other graders and queries outside the audit."""

import numpy as np
import pandas as pd
import pytest

from relgrade.protocol.audit import audit_coverage


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
