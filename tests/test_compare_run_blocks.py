"""The compare stage's runs in query order read a block of queries at a time: the same
(key rows, run rows) blocks and audit rows as from the whole stacked runs."""

from __future__ import annotations

import pandas as pd

from relgrade.experiment import files
from relgrade.io.runs import read_run
from tests.test_metrics_blocks import _random, _write_run


def _arms(tmp_path):
    key, _ = _random(11)
    paths = {}
    for i, arm in enumerate(["beta", "alpha", "gamma"]):
        _, run = _random(20 + i)
        paths[arm] = tmp_path / f"{arm}.trec"
        _write_run(paths[arm], run)
    key_path = tmp_path / "key.jsonl"
    key_path.write_text(key.to_json(orient="records", lines=True))
    return key_path, dict(sorted(paths.items()))


def test_streamed_blocks_and_audit_rows_are_those_of_the_whole_runs(tmp_path, monkeypatch):
    key_path, paths = _arms(tmp_path)
    from relgrade.io import batches

    small = batches.iter_key_batches
    monkeypatch.setattr(batches, "iter_key_batches",
                        lambda path: small(path, block_bytes=400))
    assert files._streamed_runs(paths) == ["alpha", "beta", "gamma"]
    runs = pd.concat([read_run(p).assign(arm=a) for a, p in paths.items()], ignore_index=True)
    whole = list(files._key_run_blocks(key_path, runs)())
    streamed = list(files._key_streamed_blocks(key_path, paths)())
    assert len(whole) == len(streamed) > 5
    for (k1, r1), (k2, r2) in zip(whole, streamed):
        pd.testing.assert_frame_equal(k1, k2)
        pd.testing.assert_frame_equal(r1, r2)
    audit = {"q001", "q007", "q010", "q039"}
    pd.testing.assert_frame_equal(files._streamed_rows_of(paths, audit),
                                  runs[runs["query_id"].astype(str).isin(audit)])


def test_a_run_out_of_query_order_sends_every_run_to_the_whole_reader(tmp_path):
    _, paths = _arms(tmp_path)
    run = read_run(paths["beta"]).sample(frac=1.0, random_state=1)
    _write_run(paths["beta"], run)
    assert files._streamed_runs(paths) is None
