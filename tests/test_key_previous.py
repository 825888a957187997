"""The key stage keeps the frozen key it replaces for one cycle, in ``paths.key_previous``."""

from __future__ import annotations

import hashlib
import importlib
import json

import pytest

from relgrade.experiment.files import Experiment
from tests.test_key import _grades, _stage_dir
from tests.test_key_stage import KEY, KEY_SHA, _metrics_file, _use


@pytest.fixture(scope="module")
def stage():
    module = importlib.import_module("relgrade.pipeline.stages.key")
    return module.run


@pytest.fixture
def run(stage, capsys):
    """The key stage in this process (no interpreter start-up per run); returns its stdout.
    A refusal raises, as run_stage would turn into exit status 1."""
    def go(root):
        capsys.readouterr()
        stage(Experiment.load(root / "params.yaml"))
        return capsys.readouterr().out
    return go


def _frozen(tmp_path, run):
    """A frozen key used for metrics: key stage run once, one metrics file, the ledger entry."""
    p = _stage_dir(tmp_path)
    run(tmp_path)
    _metrics_file(tmp_path, p)
    (tmp_path / p["ledger"]).write_text(json.dumps(_use()) + "\n")
    return p

# grader-a's q1/b regraded 0 -> 1: the key a deeper pool would freeze
KEY_B = (b'{"query_id":"q1","chunk_id":"a","grade":2}\n'
         b'{"query_id":"q1","chunk_id":"b","grade":1}\n')
KEY_C = (b'{"query_id":"q1","chunk_id":"a","grade":1}\n'
         b'{"query_id":"q1","chunk_id":"b","grade":1}\n')


def _new_pool(root, p, version, b_grade, a_grade=2):
    """A new pool version, and grader-a's grades on it."""
    (root / p["pool_manifest"]).write_text(json.dumps({"pool_version": version}))
    _grades([("q1", "a", "grader-a", a_grade), ("q1", "b", "grader-a", b_grade),
             ("q2", "c", "grader-a", 0), ("q1", "a", "auditor-b", 1)]).to_parquet(
        root / p["grades"], index=False)


def _folder(root, p):
    return sorted(x.name for x in (root / p["key_previous"]).iterdir())


def test_a_key_of_a_new_pool_keeps_the_used_key_it_replaces_byte_for_byte(tmp_path, run):
    p = _frozen(tmp_path, run)
    old = {n: (tmp_path / p[n]).read_bytes() for n in ("key", "qrels", "record", "key_made_on")}
    _new_pool(tmp_path, p, "p-bbbbbbbbbbbb", b_grade=1)
    out = run(tmp_path)
    assert (tmp_path / p["key"]).read_bytes() == KEY_B
    folder = tmp_path / p["key_previous"]
    # the folder's README.md (in git) stays, now saying what it holds
    assert _folder(tmp_path, p) == ["README.md", "key.jsonl", "key.qrels", "made_on.jsonl",
                                    "record.json"]
    old_sha = json.loads(old["record"])["key_sha256"]
    assert (folder / "README.md").read_text() == (
        f"The previous key ({old_sha}): the frozen key that metrics used before the key that "
        "replaced it; kept one cycle for the report's translation.\n")
    assert (folder / "key.jsonl").read_bytes() == old["key"] == KEY
    assert (folder / "key.qrels").read_bytes() == old["qrels"]
    assert (folder / "record.json").read_bytes() == old["record"]
    assert (folder / "made_on.jsonl").read_bytes() == old["key_made_on"]
    assert f"the key it replaced, {KEY_SHA}, kept in" in out
    ex = Experiment.load(tmp_path / "params.yaml")
    prev, record = ex.read_key(previous=True)
    assert record["key_sha256"] == KEY_SHA and record["pool_version"] == "p-0123456789ab"
    assert prev.to_dict("records") == [{"query_id": "q1", "chunk_id": "a", "grade": 2},
                                       {"query_id": "q1", "chunk_id": "b", "grade": 0}]
    # a rerun on the same key keeps the same previous key
    run(tmp_path)
    assert (folder / "key.jsonl").read_bytes() == KEY


def test_the_next_replacement_drops_the_oldest_key(tmp_path, run):
    p = _frozen(tmp_path, run)
    _new_pool(tmp_path, p, "p-bbbbbbbbbbbb", b_grade=1)
    run(tmp_path)
    sha_b = hashlib.sha256(KEY_B).hexdigest()
    # key B used for metrics, then a third pool freezes key C
    (tmp_path / p["metrics"] / "bm25.json").write_text(json.dumps(
        {"arm": "bm25", "key_sha256": sha_b, "pool_version": "p-bbbbbbbbbbbb", "post_hoc": False}))
    (tmp_path / p["ledger"]).write_text(
        json.dumps(_use()) + "\n" + json.dumps(_use(sha_b, pool_version="p-bbbbbbbbbbbb")) + "\n")
    _new_pool(tmp_path, p, "p-cccccccccccc", b_grade=1, a_grade=1)
    out = run(tmp_path)
    assert f"the key it replaced, {sha_b}, kept in" in out
    assert (tmp_path / p["key"]).read_bytes() == KEY_C
    assert (tmp_path / p["key_previous"] / "key.jsonl").read_bytes() == KEY_B
    record = json.loads((tmp_path / p["key_previous"] / "record.json").read_text())
    assert record["key_sha256"] == sha_b and record["pool_version"] == "p-bbbbbbbbbbbb"


def test_a_key_no_metrics_used_is_not_kept_when_replaced(tmp_path, run):
    p = _stage_dir(tmp_path)
    run(tmp_path)  # frozen, never scored: no ledger entry
    note = (f"No previous key: the frozen key ({KEY_SHA}) of pool p-0123456789ab replaced no "
            "key that metrics used.\n")
    assert _folder(tmp_path, p) == ["README.md"]
    assert (tmp_path / p["key_previous"] / "README.md").read_text() == note
    _new_pool(tmp_path, p, "p-bbbbbbbbbbbb", b_grade=1)
    out = run(tmp_path)
    assert (tmp_path / p["key"]).read_bytes() == KEY_B
    assert _folder(tmp_path, p) == ["README.md"]
    assert "kept in" not in out


def test_a_post_hoc_key_leaves_the_previous_folder_alone(tmp_path, run):
    p = _frozen(tmp_path, run)
    note = (tmp_path / p["key_previous"] / "README.md").read_bytes()
    _stage_dir(tmp_path, ledger_rows=[_use()], post_hoc=True)
    _grades([("q1", "a", "grader-a", 2), ("q1", "b", "grader-a", 1),
             ("q2", "c", "grader-a", 0), ("q1", "a", "auditor-b", 1)]).to_parquet(
        tmp_path / p["grades"], index=False)
    out = run(tmp_path)
    assert "(post-hoc)" in out
    assert _folder(tmp_path, p) == ["README.md"]
    assert (tmp_path / p["key_previous"] / "README.md").read_bytes() == note
