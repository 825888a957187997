"""The experiment on disk: one place spells every path, the grader-file layout and the key check."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pandas as pd
import pytest

from relgrade.errors import InputError, ProtocolError
from relgrade.experiment.files import Experiment
from relgrade.io.files import atomic_dir


def _experiment(root: Path, **paths) -> Experiment:
    return Experiment.from_mapping({"paths": {"grades_in": "data/grades", "key": "k/key.jsonl",
                                              "record": "k/record.json", **paths},
                                    "grading": {"round": 2}}, root=root)


def test_paths_are_under_the_root_and_an_undeclared_one_is_named(tmp_path):
    ex = _experiment(tmp_path)
    assert ex.path("key") == tmp_path / "k/key.jsonl"
    with pytest.raises(InputError) as e:
        ex.path("pool")
    assert str(e.value) == (f"{tmp_path / 'params.yaml'}: paths.pool: params `paths` has no "
                            "entry `pool`. Add `pool:` under `paths`")


def test_a_graders_files_for_a_round_follow_one_layout(tmp_path):
    f = _experiment(tmp_path).grader_files("grader-a")
    g = tmp_path / "data/grades/grader-a"
    assert (f.grader, f.round) == ("grader-a", 2)  # params grading.round
    assert (f.grades, f.meta, f.samples, f.consistency) == (
        g / "round-2.jsonl", g / "round-2.meta.json", g / "samples/round-2.jsonl",
        g / "round-2.consistency.json")
    assert _experiment(tmp_path).grader_files("x", round=1).grades == \
        tmp_path / "data/grades/x/round-1.jsonl"


def test_the_round_scan_keeps_graders_with_a_file_for_that_round_only(tmp_path):
    ex = _experiment(tmp_path)
    for name, rnd in (("b", 2), ("a", 2), ("c", 1), (".hidden", 2)):
        folder = tmp_path / "data/grades" / name
        folder.mkdir(parents=True)
        (folder / f"round-{rnd}.jsonl").write_text("")
    assert list(ex.grader_round_files()) == ["a", "b"]
    assert list(ex.grader_round_files(round=1)) == ["c"]


def test_consistency_is_read_when_present(tmp_path):
    ex = _experiment(tmp_path)
    assert ex.consistency("a") is None
    f = ex.grader_files("a").consistency
    f.parent.mkdir(parents=True)
    f.write_text(json.dumps({"grader": "a", "samples": 3, "pairs": 10, "fleiss_kappa": 0.5,
                             "unanimous_share": 0.7, "round": 2}))
    assert ex.consistency("a") == {"samples": 3, "pairs": 10, "fleiss_kappa": 0.5,
                                   "unanimous_share": 0.7}


def _freeze(root: Path, text: bytes, recorded: str | None = None) -> str:
    (root / "k").mkdir(exist_ok=True)
    (root / "k/key.jsonl").write_bytes(text)
    sha = hashlib.sha256(text).hexdigest()
    (root / "k/record.json").write_text(json.dumps({"key_sha256": recorded or sha,
                                                     "pool_version": "p-1"}))
    return sha


def test_the_key_is_read_with_its_record_when_its_hash_matches(tmp_path):
    sha = _freeze(tmp_path, b'{"query_id":"q1","chunk_id":"a","grade":2}\n')
    key, record = _experiment(tmp_path).read_key()
    assert key.to_dict("records") == [{"query_id": "q1", "chunk_id": "a", "grade": 2}]
    assert record == {"key_sha256": sha, "pool_version": "p-1"}


def test_a_key_changed_after_it_was_frozen_is_refused_with_one_message(tmp_path):
    sha = _freeze(tmp_path, b'{"query_id":"q1","chunk_id":"a","grade":1}\n', recorded="0" * 64)
    with pytest.raises(ProtocolError) as e:
        _experiment(tmp_path).read_key()
    assert str(e.value) == (
        f"{tmp_path / 'k/key.jsonl'}: the key's sha256 {sha} is not the {'0' * 64} of its "
        f"record {tmp_path / 'k/record.json'}: the key stage was interrupted between its "
        "writes, or a file was edited or swapped by hand. Rerun the key stage (`dvc repro "
        "key`) to write the three files again")


def test_an_empty_key_keeps_its_columns(tmp_path):
    _freeze(tmp_path, b"")
    key, _ = _experiment(tmp_path).read_key()
    assert list(key.columns) == ["query_id", "chunk_id", "grade"] and key.empty


def test_atomic_dir_swaps_a_complete_folder_in(tmp_path):
    out = tmp_path / "bundle"
    out.mkdir()
    (out / "old.txt").write_text("old")
    with atomic_dir(out) as tmp:
        (tmp / "new.txt").write_text("new")
        assert not (out / "new.txt").exists()  # nothing visible before the swap
    assert [p.name for p in out.iterdir()] == ["new.txt"]
    assert [p.name for p in tmp_path.iterdir()] == ["bundle"]  # no leftovers


def test_atomic_dir_leaves_the_old_folder_untouched_on_failure(tmp_path):
    out = tmp_path / "bundle"
    out.mkdir()
    (out / "old.txt").write_text("old")
    with pytest.raises(RuntimeError), atomic_dir(out) as tmp:
        (tmp / "half.txt").write_text("half")
        raise RuntimeError("failed while writing")
    assert [p.name for p in out.iterdir()] == ["old.txt"]
    assert (out / "old.txt").read_text() == "old"
    assert [p.name for p in tmp_path.iterdir()] == ["bundle"]


def test_atomic_dir_creates_a_missing_folder_and_its_parent(tmp_path):
    out = tmp_path / "a" / "b"
    with atomic_dir(out) as tmp:
        pd.DataFrame({"x": [1]}).to_csv(tmp / "x.csv", index=False)
    assert (out / "x.csv").read_text() == "x\n1\n"


def test_compare_inputs_hand_the_noise_band_the_auditors_grades_alone(tmp_path):
    from relgrade.evaluation.noise import auditor_key

    (tmp_path / "m").mkdir()
    for arm in ("a1", "a2"):
        pd.DataFrame({"query_id": ["q1", "q2"], "measure": ["nDCG@10"] * 2,
                      "value": [0.5, 0.25]}).to_parquet(tmp_path / "m" / f"{arm}.parquet")
    whole = pd.DataFrame({
        "query_id": ["q1", "q1", "q2", "q1", "q2"], "chunk_id": ["c1", "c2", "c1", "c1", "c1"],
        "grader": ["grader-a", "grader-a", "grader-a", "auditor-b", "auditor-b"],
        "role": ["grader"] * 3 + ["auditor"] * 2, "round": [1] * 5, "grade": [2, 0, 1, 3, 0],
        "reason": ["r"] * 5, "sequence": [0, 1, 2, 0, 1]})
    (tmp_path / "g").mkdir()
    whole.to_parquet(tmp_path / "g/grades.parquet")
    (tmp_path / "audit.jsonl").write_text('{"query_id": "q1"}\n')
    ex = Experiment.from_mapping({
        "paths": {"per_query": "m", "grades": "g/grades.parquet", "audit": "audit.jsonl",
                  "key": "k/key.jsonl", "record": "k/record.json"},
        "arms": {a: {"kind": "file", "source": f"{a}.trec", "depth": 10} for a in ("a1", "a2")},
        "seed": 7, "metrics": {"cutoffs": [10], "baseline": "a1"},
        "grading": {"round": 1, "key_grader": "grader-a", "auditor": "auditor-b"}},
        root=tmp_path)
    kept = ex.compare_inputs(full=False)["grades"]
    # the auditor's two rows (of both queries: the band limits them to the audit itself),
    # the five columns the band reads
    assert kept.to_dict("list") == {"query_id": ["q1", "q2"], "chunk_id": ["c1", "c1"],
                                    "grader": ["auditor-b", "auditor-b"], "round": [1, 1],
                                    "grade": [3, 0]}
    # the band's key is the one the whole table gives: q1/c1 takes the auditor's 3
    key = pd.DataFrame({"query_id": ["q1", "q1", "q2"], "chunk_id": ["c1", "c2", "c1"],
                        "grade": [2, 0, 1]})
    args = dict(key=key, audit_queries=["q1"], auditor="auditor-b", round=1)
    from_kept, info_kept = auditor_key(grades=kept, **args)
    from_whole, info_whole = auditor_key(grades=whole, **args)
    assert from_kept["grade"].tolist() == from_whole["grade"].tolist() == [3, 0, 1]
    assert info_kept == info_whole == {"queries": 1, "pairs": 2, "replaced": 1, "kept": 1,
                                       "changed": 1}
