"""The metrics stage against a bypassed void rule: a damaged ledger, a key and record swapped
by hand, and a post-hoc key scored beside the frozen one."""

from __future__ import annotations

import hashlib
import json

import pandas as pd
import pytest

from relgrade.errors import ProtocolError
from relgrade.experiment.files import Experiment
from tests.test_metrics import _stage_experiment, _stage_main

POOL = "p-000000000001"
# The key of _stage_experiment with q2's chunk c graded 2 instead of 1.
OTHER = (b'{"query_id":"q1","chunk_id":"a","grade":2}\n'
         b'{"query_id":"q1","chunk_id":"b","grade":0}\n'
         b'{"query_id":"q2","chunk_id":"c","grade":2}\n')
OTHER_SHA = hashlib.sha256(OTHER).hexdigest()


def _entry(sha):
    return {"pool_version": POOL, "rubric_version": "v1", "round": 1, "key_sha256": sha,
            "used_at": "2026-01-01T00:00:00+00:00"}


@pytest.fixture
def stage(tmp_path, monkeypatch):
    params, sha = _stage_experiment(tmp_path)
    params["paths"] |= {"key_post_hoc": str(tmp_path / "post-hoc-key"),
                        "metrics_post_hoc": str(tmp_path / "post-hoc")}
    monkeypatch.setattr("sys.argv", ["stages/metrics.py", "bm25"])
    main = _stage_main()
    return tmp_path, params, sha, lambda: main(Experiment.from_mapping(params))


def _record(sha, post_hoc=False):
    return {"key_sha256": sha, "pool_version": POOL, "rubric_version": "v1", "round": 1,
            "post_hoc": post_hoc}


@pytest.mark.parametrize("damage", ["deleted", "emptied", "edited"])
def test_a_damaged_ledger_while_another_arm_was_scored_is_refused(stage, damage):
    root, params, sha, run = stage
    (root / "m").mkdir()
    (root / "m" / "tfidf.json").write_text(json.dumps(
        {"arm": "tfidf", "key_sha256": sha, "pool_version": POOL, "post_hoc": False}))
    ledger = root / "ledger.jsonl"
    if damage == "emptied":
        ledger.write_text("")
    elif damage == "edited":
        ledger.write_text(json.dumps(_entry("e" * 64)) + "\n")
    with pytest.raises(ProtocolError) as e:
        run()
    assert str(e.value).startswith(f"ledger: {ledger} has no entry for key {sha} on pool {POOL}, "
                                   f"which {(root / 'm' / 'tfidf.json').as_posix()} shows")
    assert not (root / "m" / "bm25.json").exists() and not (root / "pq").exists()


def test_a_key_and_record_swapped_by_hand_give_no_metrics(stage):
    root, params, sha, run = stage
    (root / "ledger.jsonl").write_text(json.dumps(_entry(sha)) + "\n")
    (root / "key.jsonl").write_bytes(OTHER)
    (root / "record.json").write_text(json.dumps(_record(OTHER_SHA)))
    with pytest.raises(ProtocolError, match=f"^void: key {sha} was already used"):
        run()
    assert not (root / "m").exists()
    assert (root / "ledger.jsonl").read_text() == json.dumps(_entry(sha)) + "\n"


def test_a_post_hoc_record_in_the_frozen_place_is_scored_labelled_post_hoc(stage):
    root, params, sha, run = stage
    (root / "ledger.jsonl").write_text(json.dumps(_entry(sha)) + "\n")
    (root / "key.jsonl").write_bytes(OTHER)
    (root / "record.json").write_text(json.dumps(_record(OTHER_SHA, post_hoc=True)))
    run()
    assert json.loads((root / "m" / "bm25.json").read_text())["post_hoc"] is True


def test_a_post_hoc_key_beside_the_frozen_one_is_scored_beside_its_metrics(stage):
    root, params, sha, run = stage
    run()
    frozen = (root / "m" / "bm25.json").read_bytes()
    assert (root / "post-hoc" / "bm25" / "README.md").read_text() == (
        f"No post-hoc key beside the frozen key {sha}: bm25's only metrics are "
        f"{(root / 'm' / 'bm25.json').as_posix()}.\n")
    folder = root / "post-hoc-key"
    folder.mkdir()
    (folder / "key.jsonl").write_bytes(OTHER)
    (folder / "record.json").write_text(json.dumps(_record(OTHER_SHA, post_hoc=True)))
    run()
    assert (root / "m" / "bm25.json").read_bytes() == frozen
    out = json.loads((root / "post-hoc" / "bm25" / "metrics.json").read_text())
    # the folder's README.md (in git) survives, now naming the post-hoc key
    assert sorted(p.name for p in (root / "post-hoc" / "bm25").iterdir()) == [
        "README.md", "metrics.json", "per_query.parquet"]
    assert (root / "post-hoc" / "bm25" / "README.md").read_text() == (
        f"bm25's metrics under the post-hoc key {OTHER_SHA} (labelled post-hoc) beside its "
        f"frozen-key metrics in {(root / 'm' / 'bm25.json').as_posix()}.\n")
    # q1 as before (RR 1/2); q2 is still missing from the run: R@10 = (1/1 + 0) / 2
    assert (out["arm"], out["key_sha256"], out["post_hoc"], out["RR@10"], out["R@10"]) == (
        "bm25", OTHER_SHA, True, 0.25, 0.5)
    table = pd.read_parquet(root / "post-hoc" / "bm25" / "per_query.parquet")
    assert table[table["measure"] == "RR@10"]["value"].tolist() == [0.5, 0.0]
    ledger = [json.loads(line) for line in (root / "ledger.jsonl").read_text().splitlines()]
    assert [e["key_sha256"] for e in ledger] == [sha, OTHER_SHA]
