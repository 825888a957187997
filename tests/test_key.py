"""The key: canonical bytes and hash, stable across runs and row orders, drops, gate, record."""

from __future__ import annotations

import hashlib
import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import yaml

from relgrade.errors import InputError, ProtocolError
from relgrade.protocol import key

REPO = Path(__file__).resolve().parents[1]


def _grades(rows):
    """Long grades table from (query_id, chunk_id, grader, grade) tuples, round 1."""
    return pd.DataFrame({
        "query_id": [r[0] for r in rows], "chunk_id": [r[1] for r in rows],
        "grader": [r[2] for r in rows],
        "role": ["auditor" if r[2] == "auditor-b" else "grader" for r in rows],
        "round": [1] * len(rows), "grade": [r[3] for r in rows],
        "reason": ["r"] * len(rows)})


def _pool(pairs):
    return pd.DataFrame({"query_id": [p[0] for p in pairs], "chunk_id": [p[1] for p in pairs],
                         "inclusion_prob": [1.0] * len(pairs)})


def test_canonical_bytes_of_a_three_row_key_written_out_by_hand():
    k = pd.DataFrame({"query_id": ["q2", "q1", "q1"], "chunk_id": ["c1", "c9", "c10"],
                      "grade": [1, 0, 2]})
    expected = (b'{"query_id":"q1","chunk_id":"c10","grade":2}\n'
                b'{"query_id":"q1","chunk_id":"c9","grade":0}\n'
                b'{"query_id":"q2","chunk_id":"c1","grade":1}\n')
    assert key.key_bytes(k) == expected
    assert key.key_sha256(k) == hashlib.sha256(expected).hexdigest()


def test_non_ascii_ids_are_written_as_utf8_and_sorted_by_code_point():
    k = pd.DataFrame({"query_id": ["q1", "q1", "Q1"], "chunk_id": ["é", "z", "a"],
                      "grade": [1, 2, 0]})
    # "Q" (U+0051) < "q" (U+0071); "z" (U+007A) < "é" (U+00E9)
    expected = ('{"query_id":"Q1","chunk_id":"a","grade":0}\n'
                '{"query_id":"q1","chunk_id":"z","grade":2}\n'
                '{"query_id":"q1","chunk_id":"é","grade":1}\n').encode("utf-8")
    assert key.key_bytes(k) == expected


def test_empty_key_is_zero_bytes():
    k = pd.DataFrame({"query_id": [], "chunk_id": [], "grade": []})
    assert key.key_bytes(k) == b""
    assert key.key_sha256(k) == hashlib.sha256(b"").hexdigest()


def _experiment(n_queries=6, per_query=5, seed=3):
    rng = np.random.default_rng(seed)
    rows, pairs = [], []
    for q in range(n_queries):
        for c in range(per_query):
            pairs.append((f"q{q}", f"c{q}-{c}"))
            rows.append((f"q{q}", f"c{q}-{c}", "grader-a", int(rng.integers(0, 3))))
    rows[0] = (rows[0][0], rows[0][1], "grader-a", 2)  # q0 surely has a relevant chunk
    return _grades(rows), _pool(pairs)


def test_same_grades_built_twice_give_the_same_hash():
    grades, pool = _experiment()
    a, _ = key.build_key(grades, key_grader="grader-a", round=1, pool=pool, relevant_min=1)
    b, _ = key.build_key(grades.copy(), key_grader="grader-a", round=1, pool=pool.copy(),
                         relevant_min=1)
    assert key.key_sha256(a) == key.key_sha256(b)


def test_shuffled_input_rows_give_the_same_bytes():
    grades, pool = _experiment()
    a, _ = key.build_key(grades, key_grader="grader-a", round=1, pool=pool, relevant_min=1)
    rng = np.random.default_rng(11)
    for _ in range(3):
        g = grades.iloc[rng.permutation(len(grades))].reset_index(drop=True)
        p = pool.iloc[rng.permutation(len(pool))].reset_index(drop=True)
        b, _ = key.build_key(g, key_grader="grader-a", round=1, pool=p, relevant_min=1)
        assert key.key_bytes(b) == key.key_bytes(a)


def test_key_is_sorted_and_typed():
    grades, pool = _experiment()
    k, _ = key.build_key(grades, key_grader="grader-a", round=1, pool=pool, relevant_min=1)
    pairs = list(zip(k["query_id"], k["chunk_id"]))
    assert pairs == sorted(pairs)
    assert k["grade"].dtype == "int64"
    assert list(k.columns) == ["query_id", "chunk_id", "grade"]


def test_query_with_nothing_relevant_is_dropped_and_listed():
    rows = [("q1", "a", "grader-a", 2), ("q1", "b", "grader-a", 0),
            ("q2", "c", "grader-a", 0), ("q2", "d", "grader-a", 0),
            ("q3", "e", "grader-a", 1)]
    pool = _pool([r[:2] for r in rows])
    k, dropped = key.build_key(_grades(rows), key_grader="grader-a", round=1, pool=pool,
                               relevant_min=1)
    assert dropped == ["q2"]
    assert sorted(set(k["query_id"])) == ["q1", "q3"]
    # with relevant_min 2, q3's best grade (1) is no longer relevant
    _, dropped2 = key.build_key(_grades(rows), key_grader="grader-a", round=1, pool=pool,
                                relevant_min=2)
    assert dropped2 == ["q2", "q3"]


def test_auditor_grades_never_enter_the_key():
    rows = [("q1", "a", "grader-a", 0), ("q1", "a", "auditor-b", 2),
            ("q1", "b", "grader-a", 1), ("q1", "b", "auditor-b", 0),
            ("q1", "x", "auditor-b", 2)]
    pool = _pool([("q1", "a"), ("q1", "b")])
    with pytest.raises(InputError, match="outside the pool"):
        key.build_key(_grades(rows), key_grader="grader-a", round=1, pool=_pool([("q1", "a")]),
                      relevant_min=1)
    k, _ = key.build_key(_grades(rows[:4]), key_grader="grader-a", round=1, pool=pool,
                         relevant_min=1)
    assert k.values.tolist() == [["q1", "a", 0], ["q1", "b", 1]]


def test_only_the_current_round_counts():
    g = _grades([("q1", "a", "grader-a", 0)])
    g2 = g.assign(round=2, grade=2)
    k, _ = key.build_key(pd.concat([g, g2]), key_grader="grader-a", round=2,
                         pool=_pool([("q1", "a")]), relevant_min=1)
    assert k["grade"].tolist() == [2]


def test_pool_pair_without_key_grade_is_refused_with_count_and_queries():
    rows = [("q1", "a", "grader-a", 2), ("q2", "c", "grader-a", 1)]
    pool = _pool([("q1", "a"), ("q1", "b"), ("q2", "c"), ("q3", "d"), ("q3", "e")])
    with pytest.raises(InputError) as e:
        key.build_key(_grades(rows), key_grader="grader-a", round=1, pool=pool, relevant_min=1)
    assert str(e.value) == (
        "grader-a: 3 pool pairs lack a grade from the key grader, in 2 queries: q1 (1), q3 (2). "
        "Grade them (`relgrade grade` grades only the missing pairs) for round 1")


def test_no_key_before_the_gate_passes():
    with pytest.raises(ProtocolError, match="^no key before the gate passes: gate.json does not"):
        key.require_gate(None, source="gate.json")
    with pytest.raises(ProtocolError, match="records passed=false"):
        key.require_gate({"passed": False}, source="gate.json")
    key.require_gate({"passed": True}, source="gate.json")


def test_record_carries_hash_setup_and_drops():
    k = pd.DataFrame({"query_id": ["q1"], "chunk_id": ["a"], "grade": [2]})
    manifest = {"graders": {"grader-a": {"kind": "model", "family": "f", "model": "m",
                                         "role": "grader", "rubric_version": "v1", "round": 1,
                                         "file": "x", "sha256": "s", "rows": 1,
                                         "missing": {}, "pairs_missing": 0}}}
    manifests = {"grades": manifest, "pool": {"pool_version": "p-000000000000"},
                 "corpus": {"sha256": "c"}, "queries": {"sha256": "q"}, "intents": {}}
    rec = key.build_record(k, frozen_at="2026-01-01T00:00:00+00:00", rubric_version="v1",
                           round=1, manifests=manifests, pool_sha256="x",
                           dropped_queries=["q9"], post_hoc=False,
                           deviations=["one auditor only"])
    assert rec["key_sha256"] == hashlib.sha256(
        b'{"query_id":"q1","chunk_id":"a","grade":2}\n').hexdigest()
    assert rec["grader_setup"] == {"grader-a": {"kind": "model", "family": "f", "model": "m",
                                                "role": "grader", "rubric_version": "v1",
                                                "round": 1, "file": "x", "sha256": "s",
                                                "rows": 1}}
    assert rec["dropped_queries"] == ["q9"] and rec["post_hoc"] is False
    assert rec["pool_version"] == "p-000000000000"
    # corpus, queries, intents from their manifests (intents has none), then the pool file,
    # then each grade file's hash by grader
    assert rec["input_sha256"] == {"corpus": "c", "queries": "q", "intents": None, "pool": "x",
                                   "grades": {"grader-a": "s"}}
    assert rec["deviations"] == ["one auditor only"]
    assert list(rec) == ["key_sha256", "frozen_at", "rubric_version", "round", "grader_setup",
                         "pool_version", "input_sha256", "dropped_queries", "post_hoc",
                         "pairs", "queries", "deviations"]


def test_qrels_text_is_trec_layout_in_key_order():
    k = pd.DataFrame({"query_id": ["q2", "q1"], "chunk_id": ["b", "a"], "grade": [0, 2]})
    assert key.qrels_text(k) == "q1 0 a 2\nq2 0 b 0\n"


# --- the stage -----------------------------------------------------------------------------

def _stage_dir(tmp_path, *, gate=True, ledger_rows=None, post_hoc=False):
    params = yaml.safe_load((REPO / "params.yaml").read_text())
    params["grading"]["post_hoc"] = post_hoc
    (tmp_path / "params.yaml").write_text(yaml.safe_dump(params))
    p = params["paths"]

    def put(name, obj):
        path = tmp_path / p[name]
        path.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(obj, pd.DataFrame):
            obj.to_parquet(path, index=False)
        elif isinstance(obj, list):
            path.write_text("".join(json.dumps(r) + "\n" for r in obj))
        else:
            path.write_text(json.dumps(obj))

    put("pool", _pool([("q1", "a"), ("q1", "b"), ("q2", "c")]))
    put("grades", _grades([("q1", "a", "grader-a", 2), ("q1", "b", "grader-a", 0),
                           ("q2", "c", "grader-a", 0), ("q1", "a", "auditor-b", 1)]))
    put("grades_manifest", {"graders": {"grader-a": {"kind": "model", "role": "grader",
                                                     "sha256": "g" * 64, "rows": 3}}})
    put("pool_manifest", {"pool_version": "p-0123456789ab"})
    for name in ("corpus_manifest", "queries_manifest", "intents_manifest"):
        put(name, {"sha256": name[0] * 64})
    # what each key row is made on: the chunks, the intents and the rubric as they are now
    put("chunks", pd.DataFrame({"chunk_id": ["a", "b", "c"], "header": ["h", "h", "h"],
                                "text": ["A", "B", "C"]}))
    put("intents", pd.DataFrame({"query_id": ["q1", "q2"], "intent": ["i1", "i2"]}))
    rubric = tmp_path / params["grading"]["rubric"]
    rubric.parent.mkdir(parents=True, exist_ok=True)
    rubric.write_text("0/1/2\n")
    if gate is not None:
        put("gate", {"passed": gate})
    if ledger_rows is not None:
        put("ledger", ledger_rows)
    return p


def _run_stage(root):
    return subprocess.run([sys.executable, str(REPO / "stages/key.py")], cwd=root,
                          capture_output=True, text=True,
                          env={"PYTHONPATH": str(REPO / "src"), "PATH": "/usr/bin:/bin"})


def test_stage_writes_key_qrels_and_record(tmp_path):
    p = _stage_dir(tmp_path)
    proc = _run_stage(tmp_path)
    assert proc.returncode == 0, proc.stderr
    expected = (b'{"query_id":"q1","chunk_id":"a","grade":2}\n'
                b'{"query_id":"q1","chunk_id":"b","grade":0}\n')
    assert (tmp_path / p["key"]).read_bytes() == expected
    assert (tmp_path / p["qrels"]).read_text() == "q1 0 a 2\nq1 0 b 0\n"
    rec = json.loads((tmp_path / p["record"]).read_text())
    assert rec["key_sha256"] == hashlib.sha256(expected).hexdigest()
    assert rec["dropped_queries"] == ["q2"]
    assert rec["pool_version"] == "p-0123456789ab"
    assert rec["input_sha256"]["intents"] == "i" * 64
    assert rec["input_sha256"]["grades"] == {"grader-a": "g" * 64}
    assert rec["post_hoc"] is False and rec["round"] == 1 and rec["rubric_version"] == "v1"
    assert rec["frozen_at"].endswith("+00:00")
    # every key row beside what its grade was made on, hashed into the record
    sha = lambda b: hashlib.sha256(b).hexdigest()  # noqa: E731
    made_on = (tmp_path / p["key_made_on"]).read_bytes()
    rubric, intent = sha(b"0/1/2\n"), sha(b'{"query_id":"q1","intent":"i1"}')
    assert made_on == b"".join(
        b'{"query_id":"q1","chunk_id":"%s","content_sha256":"%s","intent_sha256":"%s",'
        b'"rubric_sha256":"%s"}\n' % (c.encode(), sha(b'{"header":"h","text":"%s"}' % t).encode(),
                                     intent.encode(), rubric.encode())
        for c, t in (("a", b"A"), ("b", b"B")))
    assert rec["made_on_sha256"] == sha(made_on)


@pytest.mark.parametrize("gate", [None, False])
def test_stage_refuses_before_the_gate_passes_and_writes_nothing(tmp_path, gate):
    p = _stage_dir(tmp_path, gate=gate)
    proc = _run_stage(tmp_path)
    assert proc.returncode == 1
    assert proc.stderr.startswith("Error: no key before the gate passes")
    assert not (tmp_path / p["key"]).exists() and not (tmp_path / p["record"]).exists()


def test_stage_refuses_a_changed_key_after_metrics_and_allows_it_post_hoc(tmp_path):
    used = [{"pool_version": "p-0123456789ab", "rubric_version": "v1", "round": 1,
             "key_sha256": "0" * 64, "used_at": "2026-01-01T00:00:00+00:00"}]
    p = _stage_dir(tmp_path, ledger_rows=used)
    proc = _run_stage(tmp_path)
    assert proc.returncode == 1 and proc.stderr.startswith("Error: void: key " + "0" * 64)
    assert not (tmp_path / p["key"]).exists()
    _stage_dir(tmp_path, ledger_rows=used, post_hoc=True)
    assert _run_stage(tmp_path).returncode == 0
    assert not (tmp_path / p["record"]).exists()  # post-hoc stands beside, never instead
    assert json.loads((tmp_path / p["key_post_hoc"] / "record.json").read_text())["post_hoc"] is True


def _made_on(rows):
    return pd.DataFrame(rows, columns=["query_id", "chunk_id", "content_sha256",
                                       "intent_sha256", "rubric_sha256"])


def test_content_revision_separates_regraded_pairs_from_changed_grades_on_the_same_text():
    old = pd.DataFrame({"query_id": ["q", "q", "q"], "chunk_id": ["a", "b", "c"],
                        "grade": [2, 1, 0]})
    new = pd.DataFrame({"query_id": ["q", "q", "q"], "chunk_id": ["a", "b", "c"],
                        "grade": [0, 2, 0]})
    before = _made_on([("q", "a", "A", "i", "r"), ("q", "b", "B", "i", "r"),
                       ("q", "c", "C", "i", "r")])
    # a's text changed (regraded 2 -> 0); b's grade changed on the same text; c unchanged
    after = _made_on([("q", "a", "A2", "i", "r"), ("q", "b", "B", "i", "r"),
                      ("q", "c", "C", "i", "r")])
    diff = key.content_revision(old, before, new, after)
    assert diff["regraded"] == [{"query_id": "q", "chunk_id": "a", "content_sha256": "A2",
                                 "grade_before": 2, "grade": 0}]
    assert diff["changed"] == [("q", "b")]
    assert diff["added"] == [] and diff["removed"] == []


def test_an_intent_edit_counts_as_changed_evidence_for_every_pair_of_the_query():
    k = pd.DataFrame({"query_id": ["q", "q"], "chunk_id": ["a", "b"], "grade": [1, 0]})
    k2 = k.assign(grade=[0, 1])
    before = _made_on([("q", "a", "A", "i", "r"), ("q", "b", "B", "i", "r")])
    after = _made_on([("q", "a", "A", "i2", "r"), ("q", "b", "B", "i2", "r")])
    diff = key.content_revision(k, before, k2, after)
    assert [(d["chunk_id"], d["grade_before"], d["grade"]) for d in diff["regraded"]] == \
        [("a", 1, 0), ("b", 0, 1)]
    assert diff["changed"] == []


def test_a_human_key_revises_only_when_every_changed_pair_was_regraded_on_new_content():
    # the rule the key stage and the ppi stage share (key.revision_pairs), on a human key:
    # the sample's pairs (q1, a), (q1, b), (q2, c)
    old = pd.DataFrame({"query_id": ["q1", "q1", "q2"], "chunk_id": ["a", "b", "c"],
                        "grade": [2, 0, 1]})
    before = _made_on([("q1", "a", "A", "i1", "r"), ("q1", "b", "B", "i1", "r"),
                       ("q2", "c", "C", "i2", "r")])
    # chunk a's text changed and a was regraded 2 -> 1: a revision
    regraded = old.assign(grade=[1, 0, 1])
    moved = before.assign(content_sha256=["A2", "B", "C"])
    assert key.revision_pairs(key.content_revision(old, before, regraded, moved)) == [
        {"query_id": "q1", "chunk_id": "a", "content_sha256": "A2", "grade_before": 2,
         "grade": 1}]
    # the grade folder deleted and imported again with b flipped, nothing else changed: void
    flipped = old.assign(grade=[2, 2, 1])
    assert key.revision_pairs(key.content_revision(old, before, flipped, before)) is None
    # a's text changed and b flipped on the same text: the flip is not explained, void
    both = old.assign(grade=[1, 2, 1])
    assert key.revision_pairs(key.content_revision(old, before, both, moved)) is None
    # the same grades (a renamed human grader imports them): no change, no revision
    assert key.revision_pairs(key.content_revision(old, before, old, before)) is None


def test_made_on_bytes_refuses_a_key_pair_without_its_made_on_row():
    k = pd.DataFrame({"query_id": ["q"], "chunk_id": ["a"], "grade": [1]})
    with pytest.raises(InputError, match=r"pair \(q, a\)"):
        key.made_on_bytes(k, _made_on([]))


def test_rerunning_the_key_stage_on_the_same_key_keeps_when_it_was_first_frozen(tmp_path):
    p = _stage_dir(tmp_path)
    assert _run_stage(tmp_path).returncode == 0
    rec = json.loads((tmp_path / p["record"]).read_text())
    rec["frozen_at"] = "2026-01-02T03:04:05+00:00"  # as if frozen long ago
    (tmp_path / p["record"]).write_text(json.dumps(rec))
    assert _run_stage(tmp_path).returncode == 0
    again = json.loads((tmp_path / p["record"]).read_text())
    assert again["frozen_at"] == "2026-01-02T03:04:05+00:00"
    assert again["key_sha256"] == rec["key_sha256"]
