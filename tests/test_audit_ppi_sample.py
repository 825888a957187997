"""The locked human sample of ppi mode: not moved by a renamed grader, not replaceable by a
forged lock, not re-drawn with another seed in a later round, and not refused when params
draw the same queries in other words.

Each test builds a ppi experiment of 15 pooled queries by hand (a provenance table, a queries
table, a pool manifest) and runs the audit stage on it.
"""

from __future__ import annotations

import hashlib
import importlib
import json
from pathlib import Path

import pandas as pd
import pytest

from relgrade.errors import InputError
from relgrade.experiment.files import Experiment
from relgrade.protocol.audit import lock_sha256

IDS = [f"q{i:02d}" for i in range(1, 16)]  # 15 pooled queries


def _stage():
    return importlib.import_module("relgrade.pipeline.stages.audit")


def _params(*, seed=0, round=1, fraction=0.2, count=None, key_grader="model-m"):
    return {"seed": seed,
            "grading": {"round": round, "mode": "ppi", "key_grader": key_grader,
                        "auditor": "person-h"},
            "ppi": {"human_fraction": fraction if count is None else None,
                    "human_queries": count},
            "paths": {"provenance": "prov.parquet", "queries": "queries.parquet",
                      "pool_manifest": "pool.json", "audit": "audit.jsonl",
                      "audit_lock": "lock.json", "grades_in": "grades"}}


def _inputs(root: Path, ids=IDS, version="p-000000000001"):
    pd.DataFrame({"query_id": ids, "chunk_id": [f"c-{q}" for q in ids], "arm": "bm25",
                  "source": "depth"}).to_parquet(root / "prov.parquet")
    pd.DataFrame({"query_id": ids, "group": "keyword"}).to_parquet(root / "queries.parquet")
    (root / "pool.json").write_text(json.dumps({"pool_version": version}))


def _run(root: Path, capsys=None, **params):
    _stage().run(Experiment.from_mapping(_params(**params), root=root))
    return capsys.readouterr().out if capsys is not None else None


def _grade(root: Path, grader: str, round=1, what="grades"):
    folder = root / "grades" / grader
    folder.mkdir(parents=True, exist_ok=True)
    row = json.dumps({"query_id": "q01", "chunk_id": "c-q01", "reason": "r", "grade": 1})
    name = {"grades": f"round-{round}.jsonl", "bank": f"round-{round}.bank.jsonl",
            "meta": f"round-{round}.meta.json"}[what]
    (folder / name).write_text(row + "\n" if what != "meta" else "{}\n")


def _said(e, root: Path) -> str:
    """An error's message with the experiment's folder left out of the paths it names."""
    return str(e.value).replace(f"{root}/", "")


def _locked(root: Path) -> list[str]:
    return [q["query_id"] for q in json.loads((root / "lock.json").read_text())["queries"]]


@pytest.mark.parametrize("what", ["grades", "bank", "meta"])
def test_a_grade_of_the_round_under_a_renamed_model_grader_keeps_the_sample_locked(
        tmp_path, what):
    _inputs(tmp_path)
    _run(tmp_path)
    lock = (tmp_path / "lock.json").read_bytes()
    _grade(tmp_path, "model-m", what=what)
    with pytest.raises(InputError) as e:
        _run(tmp_path, seed=7, key_grader="model-n")
    said = _said(e, tmp_path)
    assert said.startswith("lock.json: the human sample is locked: model-m (a grader params "
                           "no longer name) "), said
    assert ("locked with share 0.2; seed 0, stream ppi-sample; params now give share 0.2; "
            "seed 7, stream ppi-sample") in said
    assert (tmp_path / "lock.json").read_bytes() == lock


def test_a_draw_with_no_lock_is_refused_when_a_renamed_grader_has_grades(tmp_path):
    _inputs(tmp_path)
    _grade(tmp_path, "model-m")
    with pytest.raises(InputError) as e:
        _run(tmp_path, key_grader="model-n")
    assert ("the human sample cannot be drawn now: model-m (a grader params no longer name) "
            "has 1 grades of round 1 in grades/model-m/round-1.jsonl, and a sample drawn "
            "after grades of the round are seen") in _said(e, tmp_path)
    assert not (tmp_path / "lock.json").exists()


def test_a_new_ppi_lock_records_the_sha256_of_the_sorted_pooled_query_ids(tmp_path):
    _inputs(tmp_path, ids=list(reversed(IDS)))
    _run(tmp_path)
    lock = json.loads((tmp_path / "lock.json").read_text())
    text = "[" + ",".join(f'"{q}"' for q in IDS) + "]"  # the sorted ids, canonical JSON
    assert lock["pooled_sha256"] == hashlib.sha256(text.encode()).hexdigest()
    assert lock["sha256"] == lock_sha256(lock) and len(lock["queries"]) == 3  # 0.2 x 15


def _forge(root: Path, *, drop_pooled=False):
    lock = json.loads((root / "lock.json").read_text())
    locked = [q["query_id"] for q in lock["queries"]]
    other = next(q for q in IDS if q not in locked)
    lock["queries"][0] = dict(lock["queries"][0], query_id=other)
    lock["queries"].sort(key=lambda q: q["query_id"])
    if drop_pooled:
        del lock["pooled_sha256"]
    lock["sha256"] = lock_sha256(lock)
    (root / "lock.json").write_text(json.dumps(lock))
    return locked[0], other


@pytest.mark.parametrize("drop_pooled", [False, True], ids=["pooled-hash", "old-lock"])
def test_a_forged_lock_whose_hash_was_recomputed_is_refused(tmp_path, drop_pooled):
    _inputs(tmp_path)
    _run(tmp_path)
    _grade(tmp_path, "model-m")
    if drop_pooled:  # an old lock (no pooled_sha256) of another pool of as many queries
        (tmp_path / "pool.json").write_text(json.dumps({"pool_version": "p-000000000002"}))
    dropped, added = _forge(tmp_path, drop_pooled=drop_pooled)
    for check in (lambda: _run(tmp_path),
                  lambda: _stage().refuse_moved_sample(
                      Experiment.from_mapping(_params(), root=tmp_path))):
        with pytest.raises(InputError) as e:
            check()
        said = _said(e, tmp_path)
        assert said.startswith("lock.json: the locked human sample is not the draw its "
                               "recorded design gives (share 0.2; seed 0, stream ppi-sample) "
                               "from the 15 pooled queries"), said
        assert f"lock only: {added}; draw only: {dropped}" in said
        assert "Restore the lock from git (`git checkout -- lock.json`)" in said


def test_a_recorded_pooled_hash_that_is_not_its_pools_is_refused(tmp_path):
    _inputs(tmp_path)
    _run(tmp_path)
    lock = json.loads((tmp_path / "lock.json").read_text())
    lock["pooled_sha256"] = "0" * 64
    lock["sha256"] = lock_sha256(lock)
    (tmp_path / "lock.json").write_text(json.dumps(lock))
    with pytest.raises(InputError) as e:
        _run(tmp_path)
    assert "the lock's pooled_sha256 is not the hash of its pool's query ids" in str(e.value)


def test_queries_added_to_the_pool_leave_the_lock_kept_and_said_unchecked(tmp_path, capsys):
    _inputs(tmp_path)
    _run(tmp_path)
    lock = (tmp_path / "lock.json").read_bytes()
    capsys.readouterr()
    _inputs(tmp_path, ids=IDS + ["q16", "q17"], version="p-000000000002")
    out = _run(tmp_path, capsys)
    assert "3 queries for round 1, locked" in out
    assert "the draw cannot be checked: the pooled queries changed since it was drawn" in out
    assert (tmp_path / "lock.json").read_bytes() == lock


def test_params_that_draw_the_same_sample_in_other_words_are_accepted(tmp_path, capsys):
    _inputs(tmp_path)
    _run(tmp_path)
    lock = (tmp_path / "lock.json").read_bytes()
    _grade(tmp_path, "model-m")
    capsys.readouterr()
    out = _run(tmp_path, capsys, fraction=None, count=3)  # round(0.2 x 15) = 3 either way
    assert ("3 queries for round 1, locked (from pool p-000000000001, lock sha256 "
            f"{json.loads(lock)['sha256'][:12]}); params draw the same sample (count 3; "
            "seed 0, stream ppi-sample; the lock keeps share 0.2; seed 0, stream "
            "ppi-sample)") in out
    assert (tmp_path / "lock.json").read_bytes() == lock
    with pytest.raises(InputError, match="the human sample is locked"):
        _run(tmp_path, fraction=None, count=4)  # another sample: still refused


def test_a_later_round_is_drawn_with_the_recorded_seed_under_its_own_stream(tmp_path,
                                                                           capsys):
    _inputs(tmp_path)
    _run(tmp_path)
    first = _locked(tmp_path)
    _grade(tmp_path, "model-m")
    _grade(tmp_path, "person-h")
    lock = (tmp_path / "lock.json").read_bytes()
    for seed in (1, 2, 3):  # shopping for round 2's sample is refused, nothing written
        with pytest.raises(InputError) as e:
            _run(tmp_path, round=2, seed=seed)
        said = _said(e, tmp_path)
        assert said.startswith("lock.json: round 2's human sample is drawn with the recorded "
                               "seed 0: model-m (the model grader) has 1 grades of round 1 "
                               "in grades/model-m/round-1.jsonl"), said
        assert f"(found seed {seed} in params, recorded seed 0)" in said
        assert "Set seed: 0 back in" in said
        assert (tmp_path / "lock.json").read_bytes() == lock
    capsys.readouterr()
    out = _run(tmp_path, capsys, round=2)
    assert "3 queries for round 2, drawn now" in out
    second = json.loads((tmp_path / "lock.json").read_text())
    assert second["queries"][0]["reason"].endswith("(share 0.2; seed 0, stream "
                                                   "ppi-sample-round-2)")
    expected = _stage().drawn_ids(IDS, fraction=0.2, seed=0, stream="ppi-sample-round-2")
    assert _locked(tmp_path) == expected and len(expected) == 3
    assert first == _stage().drawn_ids(IDS, fraction=0.2, seed=0, stream="ppi-sample")
    # round 2 locked, none of its grades yet: a seed change is still refused
    with pytest.raises(InputError, match="recorded seed 0"):
        _run(tmp_path, round=2, seed=5)
    # a share change before round 2 is graded draws round 2's sample again
    out = _run(tmp_path, capsys, round=2, fraction=0.4)
    assert "6 queries for round 2, drawn now" in out


def test_ppi_sim_committed_lock_is_the_draw_its_design_gives():
    folder = Path(__file__).resolve().parents[1] / "experiments/ppi-sim"
    lock = json.loads((folder / "data/audit/lock.json").read_text())
    assert "pooled_sha256" not in lock and lock["sha256"] == lock_sha256(lock)
    # the model grader graded every pooled pair: its grade file holds the pooled queries
    pooled = sorted({json.loads(x)["query_id"] for x in
                     (folder / "data/grades/model-m/round-1.jsonl").read_text().splitlines()
                     if x.strip()})
    stage = _stage()
    design = stage.parse_design(stage.locked_design(lock))
    assert design == {"fraction": None, "count": 10, "seed": 20261130, "stream": "ppi-sample"}
    assert len(pooled) == 36
    assert stage.drawn_ids(pooled, count=10, seed=20261130, stream="ppi-sample") == \
        sorted(q["query_id"] for q in lock["queries"])


def test_the_pool_stage_refuses_a_renamed_graders_seed_change_with_the_provenance_removed(
        tmp_path):
    # DVC removes the pool stage's outputs (the provenance among them) before it reruns, and
    # the pool stage checks the lock first: the check needs no provenance
    _inputs(tmp_path)
    _run(tmp_path)
    _grade(tmp_path, "model-m")
    (tmp_path / "prov.parquet").unlink()
    ex = Experiment.from_mapping(_params(seed=7, key_grader="model-n"), root=tmp_path)
    with pytest.raises(InputError) as e:
        _stage().refuse_moved_sample(ex)
    assert _said(e, tmp_path).startswith(
        "lock.json: the human sample is locked: model-m (a grader params no longer name) has "
        "1 grades of round 1 in grades/model-m/round-1.jsonl, and params would move the "
        "sample")
    _stage().refuse_moved_sample(Experiment.from_mapping(_params(), root=tmp_path))  # unchanged


def test_a_renamed_graders_grade_file_deleted_since_its_commit_still_counts(tmp_path):
    import subprocess

    def git(*args):
        subprocess.run(["git", "-C", str(tmp_path), "-c", "user.name=t", "-c",
                        "user.email=t@example.org", *args], check=True, capture_output=True)

    _inputs(tmp_path)
    git("init", "-q")
    _grade(tmp_path, "model-m")
    _grade(tmp_path, "person-h", round=2)  # another round's file: not a record of round 1
    git("add", "grades")
    git("commit", "-q", "-m", "grades")
    (tmp_path / "grades/model-m/round-1.jsonl").unlink()
    ex = Experiment.from_mapping(_params(key_grader="model-n"), root=tmp_path)
    grader, words = _stage().round_graded(ex)
    assert grader == "model-m"
    assert words.startswith("has grades of round 1 in grades/model-m/round-1.jsonl as "
                            "committed in ") and words.endswith(" (deleted since)")
    assert _stage().round_graded(ex, skip=("model-m",)) is None
    assert _stage().round_graded(ex, 3) is None
