"""The judgment bank's rule: which grades are current for a pool, and the pending work."""

from __future__ import annotations

import hashlib

import pandas as pd
import pytest

from relgrade.errors import InputError
from relgrade.protocol import bank
from relgrade.schema import PENDING

CHUNKS = pd.DataFrame({"chunk_id": ["a", "b", "c", "d"],
                       "header": ["x.py › f", "x.py › g", "docs › Intro", "docs › Why"],
                       "text": ["def f(): pass", "def g(): pass", "Hello", "Because"],
                       "source": ["x.py", "x.py", "docs/i.rst", "docs/w.rst"]})
INTENTS = pd.DataFrame({"query_id": ["q1", "q2"], "intent": ["find f", "why this"]})
RUBRIC = "r" * 64


def _bank(rows):
    """Rows (grader, query_id, chunk_id) graded on today's corpus, intents and rubric."""
    content, intents = bank.content_sha256(CHUNKS), bank.intent_sha256(INTENTS)
    return pd.DataFrame([{"grader": g, "query_id": q, "chunk_id": c, "round": 1, "grade": 1,
                          "content_sha256": content[c], "intent_sha256": intents[q],
                          "rubric_sha256": RUBRIC} for g, q, c in rows])


def _pending(pool_pairs, b, chunks=CHUNKS, intents=INTENTS, audit_ids=("q2",)):
    pool = pd.DataFrame(pool_pairs, columns=["query_id", "chunk_id"])
    return bank.pending_work(pool, b, key_grader="grader-a", auditor="auditor-b",
                             audit_ids=audit_ids, content=bank.content_sha256(chunks),
                             intents=bank.intent_sha256(intents), rubric_sha256=RUBRIC)


def test_content_hash_is_sha256_of_header_and_text_in_canonical_json():
    expected = hashlib.sha256('{"header":"x.py › f","text":"def f(): pass"}'.encode()).hexdigest()
    assert bank.content_sha256(CHUNKS)["a"] == expected


def test_content_hash_ignores_what_a_grader_never_sees():
    moved = CHUNKS.assign(source="elsewhere.py")
    assert bank.content_sha256(moved).equals(bank.content_sha256(CHUNKS))


def test_adding_an_arm_makes_only_the_new_pairs_pending():
    graded = _bank([("grader-a", "q1", "a"), ("grader-a", "q2", "c"), ("auditor-b", "q2", "c")])
    # The new arm brings (q1, b) and (q2, d) into the pool.
    p = _pending([("q1", "a"), ("q1", "b"), ("q2", "c"), ("q2", "d")], graded)
    assert p.values.tolist() == [["grader-a", "q1", "b", "new"],
                                 ["grader-a", "q2", "d", "new"],
                                 ["auditor-b", "q2", "d", "audit"]]


def test_an_edited_chunk_is_stale_for_every_grader_who_graded_it():
    graded = _bank([("grader-a", "q2", "c"), ("auditor-b", "q2", "c"), ("grader-a", "q1", "a")])
    edited = CHUNKS.assign(text=CHUNKS["text"].where(CHUNKS["chunk_id"] != "c", "Blank page"))
    p = _pending([("q1", "a"), ("q2", "c")], graded, chunks=edited)
    assert p.values.tolist() == [["grader-a", "q2", "c", "stale"],
                                 ["auditor-b", "q2", "c", "stale"]]


def test_an_edited_intent_makes_only_its_query_stale():
    graded = _bank([("grader-a", "q1", "a"), ("grader-a", "q2", "c"), ("auditor-b", "q2", "c")])
    edited = INTENTS.assign(intent=["find f, the function", "why this"])
    p = _pending([("q1", "a"), ("q2", "c")], graded, intents=edited)
    assert p.values.tolist() == [["grader-a", "q1", "a", "stale"]]


def test_a_pair_that_leaves_the_pool_and_returns_unchanged_is_current_again():
    graded = _bank([("grader-a", "q1", "a"), ("grader-a", "q1", "b")])
    assert _pending([("q1", "a")], graded, audit_ids=()).empty          # b left: not pending
    assert _pending([("q1", "a"), ("q1", "b")], graded, audit_ids=()).empty   # b back: reused


def test_currency_names_what_moved_and_a_removed_chunk_is_gone():
    graded = _bank([("grader-a", "q1", "a"), ("grader-a", "q1", "b"), ("grader-a", "q2", "c")])
    graded.loc[1, "rubric_sha256"] = "old-rubric"
    status = bank.currency(graded, content=bank.content_sha256(CHUNKS[CHUNKS.chunk_id != "c"]),
                           intents=bank.intent_sha256(INTENTS), rubric_sha256=RUBRIC)
    assert status.tolist() == ["current", "rubric", "chunk gone"]


def test_current_grades_keep_the_latest_round_per_grader_and_pair():
    graded = pd.concat([_bank([("grader-a", "q1", "a")]),
                        _bank([("grader-a", "q1", "a")]).assign(round=2, grade=2)],
                       ignore_index=True)
    cur = bank.current_grades(graded, content=bank.content_sha256(CHUNKS),
                              intents=bank.intent_sha256(INTENTS), rubric_sha256=RUBRIC)
    assert cur[["round", "grade"]].values.tolist() == [[2, 2]]


def test_pending_counts_give_zeros_for_a_grader_who_owes_nothing():
    p = pd.DataFrame([("grader-a", "q1", "b", "new"), ("grader-a", "q2", "c", "stale")],
                     columns=PENDING)
    assert bank.pending_counts(p, ["grader-a", "auditor-b"]) == {
        "grader-a": {"pending_new": 1, "pending_stale": 1, "pending_audit": 0,
                     "pending_regrade": 0},
        "auditor-b": {"pending_new": 0, "pending_stale": 0, "pending_audit": 0,
                      "pending_regrade": 0}}


def test_pending_message_names_counts_audit_queries_and_the_command():
    p = pd.DataFrame([("grader-a", "q1", "b", "new")] * 38 + [("grader-a", "q1", "c", "stale")] * 3
                     + [("auditor-b", "kw02", "x", "audit")] * 4 + [("auditor-b", "qu05", "y", "audit")] * 3,
                     columns=PENDING)
    assert bank.pending_message(p) == (
        "grading: 41 pairs need grader-a (38 new, 3 stale), 7 need auditor-b (audit queries "
        "kw02, qu05); run `relgrade grade run --grader grader-a` or `relgrade serve`")


def test_a_bank_without_made_on_columns_is_refused():
    with pytest.raises(InputError, match="lacks column"):
        bank.currency(pd.DataFrame({"query_id": ["q1"], "chunk_id": ["a"]}),
                      content=pd.Series(dtype=object), intents=pd.Series(dtype=object),
                      rubric_sha256=RUBRIC)


def test_currency_is_the_same_with_made_on_columns_as_strings_or_categoricals():
    # four grades: current; content edited (chunk b); intent edited (q2); chunk c removed
    graded = _bank([("grader-a", "q1", "a"), ("grader-a", "q1", "b"), ("grader-a", "q2", "a"),
                    ("grader-a", "q2", "c")])
    graded.loc[1, "content_sha256"] = "0" * 64
    graded.loc[2, "intent_sha256"] = "1" * 64
    content = bank.content_sha256(CHUNKS[CHUNKS.chunk_id != "c"])
    intents = bank.intent_sha256(INTENTS)
    want = ["current", "content", "intent", "chunk gone"]
    as_str = graded.astype({k: "str" for k in ("content_sha256", "intent_sha256")})
    as_cat = graded.astype({k: "category" for k in ("content_sha256", "intent_sha256")})
    for table in (graded, as_str, as_cat):
        assert bank.currency(table, content=content, intents=intents,
                             rubric_sha256=RUBRIC).tolist() == want


def test_currency_counts_a_missing_hash_now_as_moved():
    graded = _bank([("grader-a", "q1", "a"), ("grader-a", "q2", "a")])
    intents = bank.intent_sha256(INTENTS)
    intents["q2"] = None  # no intent hash now for q2: its grade cannot be current
    status = bank.currency(graded, content=bank.content_sha256(CHUNKS), intents=intents,
                           rubric_sha256=RUBRIC)
    assert status.tolist() == ["current", "intent"]


def test_pair_membership_compares_ids_as_strings_and_ignores_unknown_ids():
    left = pd.DataFrame({"query_id": [1, 1, 2, 3], "chunk_id": ["a", "b", "a", "a"]})
    right = pd.DataFrame({"query_id": pd.Categorical(["1", "2"]), "chunk_id": ["b", "a"]})
    assert bank.pair_member(left, right).tolist() == [False, True, True, False]
    assert bank.pair_member(left, right.iloc[:0]).tolist() == [False] * 4


def test_current_grades_keep_only_the_columns_asked_for_besides_the_pair_keys():
    cur = bank.current_grades(_bank([("grader-a", "q1", "a")]),
                              content=bank.content_sha256(CHUNKS),
                              intents=bank.intent_sha256(INTENTS), rubric_sha256=RUBRIC,
                              columns=["grade"])
    assert list(cur.columns) == ["grader", "query_id", "chunk_id", "round", "grade"]
