"""The intent table: one intent per query, canonical hash, flagged alternatives, review record,
the freeze, and packets refusing an unreviewed or changed table."""

from __future__ import annotations

import hashlib
import importlib
import json
from pathlib import Path

import pandas as pd
import pytest
import yaml
from click.testing import CliRunner

from relgrade.cli import main as cli
from relgrade.errors import InputError, PendingWork, ProtocolError
from relgrade.experiment.files import Experiment
from relgrade.protocol import intents as I

REPO = Path(__file__).resolve().parents[1]

QUERIES = pd.DataFrame({"query_id": ["kw01", "qu01"],
                        "query": ["cache eviction", "Where is the HTTP timeout set?"],
                        "group": ["keyword", "question"], "weight": [1.0, 1.0]})


def table(rows):
    return pd.DataFrame(rows, columns=["query_id", "query", "intent"])


GOOD = [("qu01", "Where is the HTTP timeout set?", "Where is the default HTTP timeout configured?"),
        ("kw01", "cache eviction", "Where is the cache eviction policy defined?")]


def test_valid_table_is_sorted_with_one_intent_per_query():
    out = I.validate_intents(table(GOOD), queries=QUERIES, path="intents.tsv")
    assert out["query_id"].tolist() == ["kw01", "qu01"]
    assert out.columns.tolist() == ["query_id", "query", "intent"]


def test_query_without_intent_is_named():
    with pytest.raises(InputError) as e:
        I.validate_intents(table(GOOD[:1]), queries=QUERIES, path="intents.tsv")
    assert str(e.value) == "intents.tsv: kw01: 1 query has no intent. Add one intent line for each"


def test_two_intents_for_one_query_name_both_lines():
    rows = GOOD + [("kw01", "cache eviction", "How does the cache evict entries?")]
    with pytest.raises(InputError) as e:
        I.validate_intents(table(rows), queries=QUERIES, path="intents.tsv", lines=[2, 3, 5])
    assert str(e.value) == ("intents.tsv:5: kw01: two intents for one query (the first on "
                            "line 3). Keep exactly one intent line per query")


def test_query_text_must_match_the_query_set():
    rows = [GOOD[0], ("kw01", "cache evictions", "Where is the cache eviction policy defined?")]
    with pytest.raises(InputError, match=r"intents.tsv:3: kw01: query text differs"):
        I.validate_intents(table(rows), queries=QUERIES, path="intents.tsv", lines=[2, 3])


def test_empty_intent_and_unknown_query_are_refused():
    with pytest.raises(InputError, match="qu01: intent is empty"):
        I.validate_intents(table([GOOD[1], ("qu01", GOOD[0][1], "   ")]), queries=QUERIES)
    with pytest.raises(InputError, match="zz99: intent for a query that is not in the query set"):
        I.validate_intents(table(GOOD + [("zz99", "x", "y")]), queries=QUERIES)


def test_sha256_is_over_sorted_canonical_rows():
    out = I.validate_intents(table(GOOD), queries=QUERIES)
    expected = ('{"query_id":"kw01","query":"cache eviction","intent":"Where is the cache '
                'eviction policy defined?"}\n'
                '{"query_id":"qu01","query":"Where is the HTTP timeout set?","intent":"Where '
                'is the default HTTP timeout configured?"}\n')
    assert I.intents_sha256(out) == hashlib.sha256(expected.encode()).hexdigest()
    assert I.intents_sha256(out.iloc[::-1]) == I.intents_sha256(out)


@pytest.mark.parametrize("intent, why", [
    ("Where is the cache or the session store configured?", "or"),
    ("Either the loader or the parser: where are paths resolved?", "either"),
    ("Which options and/or flags does the CLI accept?", "and/or"),
    ("How does the read/write lock work?", "/"),
])
def test_alternative_readings_are_flagged(intent, why):
    t = table([("q1", "x", intent)])
    flagged = I.flag_alternatives(t)
    assert flagged.to_dict(orient="records") == [{"query_id": "q1", "intent": intent, "why": why}]


@pytest.mark.parametrize("intent", [
    "Where is the error handler defined in src/click/core.py?",
    "How does the client negotiate HTTP/2?",
    "Why does the orchestrator retry forever?",
])
def test_single_readings_are_not_flagged(intent):
    assert I.flag_alternatives(table([("q1", "x", intent)])).empty


def test_review_then_freeze_gives_the_manifest():
    out = I.validate_intents(table(GOOD), queries=QUERIES)
    record = I.review_record(out, reviewer="auditor-b", reviewed_at="2026-01-02T03:04:05Z")
    assert list(record) == ["reviewer", "table_sha256", "reviewed_at", "flagged"]
    assert I.check_review(out, record) == {"sha256": I.intents_sha256(out),
                                           "reviewer": "auditor-b",
                                           "reviewed_at": "2026-01-02T03:04:05Z", "flagged": []}


def test_missing_review_is_pending_work_with_the_fix():
    out = I.validate_intents(table(GOOD), queries=QUERIES)
    with pytest.raises(PendingWork, match="not reviewed yet.*relgrade intents review --reviewer "
                                          "NAME"):
        I.check_review(out, None, path="review.json")


def test_the_record_init_writes_is_no_review_yet_and_pending_work():
    out = I.validate_intents(table(GOOD), queries=QUERIES)
    with pytest.raises(PendingWork, match=r"^review.json: the intent table is not reviewed yet; "
                                          r"intents are frozen only after review\. run `x`$"):
        I.check_review(out, dict(I.UNREVIEWED), path="review.json", fix="run `x`")


def test_table_changed_after_review_is_refused():
    out = I.validate_intents(table(GOOD), queries=QUERIES)
    record = I.review_record(out, reviewer="auditor-b", reviewed_at="t")
    changed = out.assign(intent=out["intent"].str.replace("policy", "rule"))
    with pytest.raises(ProtocolError, match="changed after it was reviewed"):
        I.check_review(changed, record, path="review.json")


def test_empty_reviewer_is_refused():
    out = I.validate_intents(table(GOOD), queries=QUERIES)
    with pytest.raises(InputError, match="reviewer name is empty"):
        I.review_record(out, reviewer=" ", reviewed_at="t")
    record = I.review_record(out, reviewer="a", reviewed_at="t") | {"reviewer": ""}
    with pytest.raises(ProtocolError, match="names no reviewer"):
        I.check_review(out, record)


def test_check_frozen_refuses_unreviewed_or_mismatched_tables():
    out = I.validate_intents(table(GOOD), queries=QUERIES)
    sha = I.intents_sha256(out)
    assert I.check_frozen(out, {"sha256": sha, "reviewer": "a"}) == sha
    with pytest.raises(ProtocolError, match="not frozen and reviewed"):
        I.check_frozen(out, None)
    with pytest.raises(ProtocolError, match="not frozen and reviewed"):
        I.check_frozen(out, {"sha256": sha, "reviewer": ""})
    with pytest.raises(ProtocolError, match="differs from the reviewed one"):
        I.check_frozen(out, {"sha256": "0" * 64, "reviewer": "a"})


# --- the CLI, the intents stage and the packets stage --------------------------------

def load_stage(name):
    module = importlib.import_module(f"relgrade.pipeline.stages.{name}")
    return module


PARAMS = {
    "seed": 5,
    "paths": {"queries": "data/queries.parquet", "intents": "data/intents.parquet",
              "intents_manifest": "data/intents.json", "pool": "data/pool.parquet",
              "chunks": "data/chunks.parquet", "audit": "data/audit.jsonl",
              "packets": "data/packets", "orders": "data/orders.parquet"},
    "queries": {"input": "in/queries.tsv", "groups": ["keyword", "question"]},
    "intents": {"input": "in/intents.tsv", "review": "in/review.json"},
    "grading": {"round": 1, "batch_size": 5, "rubric_version": "v1"},
}


def experiment(root: Path, intents_rows=GOOD) -> dict:
    (root / "in").mkdir()
    (root / "data").mkdir()
    (root / "params.yaml").write_text(yaml.safe_dump(PARAMS))
    (root / "in/queries.tsv").write_text(
        "query_id\tquery\tgroup\n" + "".join(f"{q}\t{t}\t{g}\n" for q, t, g, _ in
                                             QUERIES.itertuples(index=False)))
    (root / "in/intents.tsv").write_text(
        "query_id\tquery\tintent\n" + "".join(f"{q}\t{t}\t{i}\n" for q, t, i in intents_rows))
    QUERIES.to_parquet(root / PARAMS["paths"]["queries"])
    pd.DataFrame({"query_id": ["kw01", "qu01"], "chunk_id": ["c1", "c2"],
                  "inclusion_prob": [1.0, 1.0]}).to_parquet(root / PARAMS["paths"]["pool"])
    pd.DataFrame({"chunk_id": ["c1", "c2"], "header": ["h1", "h2"], "text": ["t1", "t2"],
                  "source": ["s", "s"]}).to_parquet(root / PARAMS["paths"]["chunks"])
    (root / PARAMS["paths"]["audit"]).write_text('{"query_id":"kw01","group":"keyword",'
                                                 '"unique_share":1.0,"reason":"r"}\n')
    return PARAMS


def test_review_command_writes_the_record_and_prints_flagged(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    rows = [GOOD[0], ("kw01", "cache eviction", "Is it the LRU or the TTL eviction policy?")]
    experiment(tmp_path, rows)
    res = CliRunner().invoke(cli, ["intents", "review", "--reviewer", "auditor-b"])
    assert res.exit_code == 0, res.output
    assert "flagged kw01 ('or'" in res.output
    record = json.loads((tmp_path / "in/review.json").read_text())
    assert record["reviewer"] == "auditor-b" and record["flagged"] == ["kw01"]
    expected = I.validate_intents(table(rows), queries=QUERIES)
    assert record["table_sha256"] == I.intents_sha256(expected)


def test_review_command_fails_with_the_error_and_writes_nothing(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    experiment(tmp_path, GOOD[:1])
    res = CliRunner().invoke(cli, ["intents", "review", "--reviewer", "auditor-b"])
    assert res.exit_code == 1
    assert "Error: in/intents.tsv: kw01: 1 query has no intent" in res.output
    assert not (tmp_path / "in/review.json").exists()


def test_intents_stage_freezes_only_a_reviewed_table(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    params = experiment(tmp_path)
    stage = load_stage("intents")
    with pytest.raises(PendingWork, match="not reviewed yet"):
        stage.run(Experiment.from_mapping(params))
    assert not (tmp_path / "data/intents.json").exists()
    assert CliRunner().invoke(cli, ["intents", "review", "--reviewer", "auditor-b"]).exit_code == 0
    stage.run(Experiment.from_mapping(params))
    manifest = json.loads((tmp_path / "data/intents.json").read_text())
    frozen = pd.read_parquet(tmp_path / "data/intents.parquet")
    assert manifest["sha256"] == I.intents_sha256(frozen)
    assert manifest["reviewer"] == "auditor-b"
    assert list(manifest) == ["sha256", "reviewer", "reviewed_at", "flagged"]


def test_intents_stage_refuses_a_table_edited_after_review(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    params = experiment(tmp_path)
    CliRunner().invoke(cli, ["intents", "review", "--reviewer", "auditor-b"])
    text = (tmp_path / "in/intents.tsv").read_text().replace("policy", "rule")
    (tmp_path / "in/intents.tsv").write_text(text)
    with pytest.raises(ProtocolError, match="changed after it was reviewed"):
        load_stage("intents").run(Experiment.from_mapping(params))


def test_packets_refuse_when_the_frozen_table_does_not_match_its_review(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    params = experiment(tmp_path)
    packets_stage = load_stage("packets")
    # no intents manifest at all: not frozen
    with pytest.raises(ProtocolError, match="not frozen and reviewed"):
        packets_stage.run(Experiment.from_mapping(params))
    CliRunner().invoke(cli, ["intents", "review", "--reviewer", "auditor-b"])
    load_stage("intents").run(Experiment.from_mapping(params))
    # the frozen table is edited behind the manifest's back
    frozen = pd.read_parquet(tmp_path / "data/intents.parquet")
    frozen.loc[0, "intent"] = "Something else entirely"
    frozen.to_parquet(tmp_path / "data/intents.parquet")
    with pytest.raises(ProtocolError, match="differs from the reviewed one"):
        packets_stage.run(Experiment.from_mapping(params))
    assert not (tmp_path / "data/packets").exists()
    assert not (tmp_path / "data/orders.parquet").exists()


def test_packets_are_built_once_the_table_is_frozen_and_reviewed(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    params = experiment(tmp_path)
    CliRunner().invoke(cli, ["intents", "review", "--reviewer", "auditor-b"])
    load_stage("intents").run(Experiment.from_mapping(params))
    load_stage("packets").run(Experiment.from_mapping(params))
    assert sorted(p.name for p in (tmp_path / "data/packets/grader").iterdir()) == [
        "kw01.json", "qu01.json"]
    assert [p.name for p in (tmp_path / "data/packets/auditor").iterdir()] == ["kw01.json"]
    packet = json.loads((tmp_path / "data/packets/grader/kw01.json").read_text())
    assert packet["intent"] == GOOD[1][2]
