"""``relgrade evaluate`` on Arrow and numpy columns: the process never loads pandas, and the
column path gives what the DataFrame path gives (tables, means, messages)."""

from __future__ import annotations

import json
import subprocess
import sys

import numpy as np
import pandas as pd
import pyarrow as pa
import pytest

from relgrade.errors import InputError
from relgrade.evaluation import metrics
from relgrade.io.judgments import read_judgment_table, read_judgments
from relgrade.io.runs import read_run
from relgrade.io.runcolumns import read_run_columns
from relgrade.ranking import arrow_array, numpy_values, validate_run

QRELS = "q1 0 a 2\nq1 0 b 1\nq2 0 c 1\nq3 0 d 0\n"
# q1: x (2.0), then b and a tied at 1.0 (chunk id descending: b first), so the first
# relevant chunk is b at rank 2; q2: c at rank 1; q9 is not in the qrels
RUN = "q1 Q0 x 1 2.0 t\nq1 Q0 b 2 1.0 t\nq1 Q0 a 3 1.0 t\nq2 Q0 c 1 5 t\nq9 Q0 c 1 5 t\n"


def _evaluate_in_fresh_process(tmp_path, *args: str, scan: bool) -> tuple[dict, bool]:
    (tmp_path / "key.qrels").write_text(QRELS)
    (tmp_path / "r1.trec").write_text(RUN)
    # scan=True: the compiled scan reads the run (it is used only from 256 MiB of runs)
    probe = ("import sys\n"
             "import relgrade.io.trec_scan as scan\n"
             f"scan.SCAN_MIN_BYTES = {0 if scan else 1 << 40}\n"
             "from relgrade.cli import main\n"
             f"sys.argv = ['relgrade', 'evaluate', 'key.qrels', 'r1.trec', *{list(args)!r}]\n"
             "try:\n"
             "    main()\n"
             "except SystemExit as e:\n"
             "    assert not e.code, e.code\n"
             "finally:\n"
             "    print('pandas' in sys.modules, file=sys.stderr)\n")
    done = subprocess.run([sys.executable, "-c", probe], cwd=tmp_path, capture_output=True,
                          text=True)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout), done.stderr.split()[-1] == "True"


@pytest.mark.parametrize("scan", [False, True], ids=["arrow-csv", "compiled-scan"])
def test_relgrade_evaluate_scores_trec_files_without_loading_pandas(tmp_path, scan):
    # pandas costs the process 0.26 CPU-s and some 40 MiB to import; pyarrow imports it on
    # pa.array, pa.scalar and to_numpy, so the whole path must avoid those too
    doc, loaded = _evaluate_in_fresh_process(
        tmp_path, "-m", "recip_rank", "-m", "R@10", "--json", "--per-query", scan=scan)
    assert not loaded
    # q3 has nothing relevant: excluded; RR q1 = 1/2, q2 = 1; R@10 q1 = 2/2, q2 = 1/1
    assert doc["runs"] == {"r1": {"RR": 0.75, "R@10": 1.0}}
    assert [(r["query_id"], r["measure"], r["value"]) for r in doc["per_query"]] == [
        ("q1", "RR", 0.5), ("q2", "RR", 1.0), ("q1", "R@10", 1.0), ("q2", "R@10", 1.0)]
    assert doc["excluded"] == {"RR": ["q3"], "R@10": ["q3"]}


def test_per_query_table_holds_per_query_rows_and_measure_means_their_means(tmp_path):
    (tmp_path / "key.qrels").write_text(QRELS)
    (tmp_path / "r1.trec").write_text(RUN)
    qrels = read_judgment_table(tmp_path / "key.qrels")
    run, codes = read_run_columns(tmp_path / "r1.trec", scan=False)
    assert isinstance(run, pa.Table)
    measures = ["nDCG@10", "RR", "R@2", "Judged@10"]
    table = metrics.per_query_table(qrels=qrels, run=run, measures=measures, codes=codes)
    frame = metrics.per_query(qrels=read_judgments(tmp_path / "key.qrels"),
                              run=read_run(tmp_path / "r1.trec"), measures=measures)
    pd.testing.assert_frame_equal(table.to_pandas().astype({"query_id": "str",
                                                            "measure": "str"}), frame)
    assert metrics.measure_means(table) == metrics.mean(frame).to_dict()
    # RR: (1/2 + 1) / 2, q3 (nothing relevant) left out; Judged@10: q3 unanswered, 0
    assert metrics.measure_means(table)["RR"] == 0.75
    assert metrics.measure_means(table)["Judged@10"] == (2 / 3 + 1 + 0) / 3


@pytest.mark.parametrize("values", [
    np.random.default_rng(7).random(5000) ** 3,                 # numpy's sum per block
    np.r_[np.random.default_rng(8).random(3000), np.nan, 0.25],  # a NaN: the compensated sum
], ids=["blocks", "nan"])
@pytest.mark.parametrize("blocks", [True, False], ids=["measure-blocks", "interleaved"])
def test_measure_means_equal_mean_bit_for_bit(values, blocks):
    names = np.array(["nDCG@10", "R@10", "RR"])
    which = np.repeat(np.arange(3), -(-len(values) // 3))[:len(values)]
    if not blocks:
        which = np.arange(len(values)) % 3
    frame = pd.DataFrame({"query_id": pd.Series([f"q{i}" for i in range(len(values))],
                                                dtype="str"),
                          "measure": pd.Series(names[which], dtype="str"), "value": values})
    table = pa.Table.from_pandas(frame, preserve_index=False)
    got = metrics.measure_means(table)
    want = metrics.mean(frame)
    assert list(got) == list(want.index)
    assert [np.float64(v).tobytes() for v in got.values()] == \
        [np.float64(v).tobytes() for v in want.to_numpy()]


def test_hash_index_finds_each_value_as_a_pandas_index_does():
    rng = np.random.default_rng(3)
    values = rng.integers(0, 2 ** 64, size=2000, dtype=np.uint64)
    values[:4] = [0, 1, 2 ** 64 - 1, 2 ** 63]  # both ends of the range, one top bucket
    asked = np.r_[values[::7], rng.integers(0, 2 ** 64, size=500, dtype=np.uint64),
                  np.uint64(2 ** 64 - 2)]
    index = metrics._HashIndex(values)
    assert index.is_unique
    np.testing.assert_array_equal(index.get_indexer(asked), pd.Index(values).get_indexer(asked))
    assert not metrics._HashIndex(np.r_[values, values[5]]).is_unique
    assert metrics._HashIndex(np.zeros(0, dtype=np.uint64)).get_indexer(values[:3]).tolist() \
        == [-1, -1, -1]


@pytest.mark.parametrize("text, rule", [
    ("q1 0 a 2\n#q 0 b 1\n", "a comment line: no judgment format has comments"),
    ("q1 0 a 2\nq1 0 b 7\n", "grade outside the scale 0,1,2"),
    ("q1 0 a 2\nq1 0 a 1\n", "one (query, chunk) pair is graded twice"),
    ("q1 0 a 2\nq1\u00a0 0 b 1\n", "query_id is empty or holds whitespace"),
    ("", "no judgments in the file"),
])
def test_read_judgment_table_refuses_what_read_judgments_refuses(tmp_path, text, rule):
    path = tmp_path / "key.qrels"
    path.write_text(text)
    with pytest.raises(InputError) as columns:
        read_judgment_table(path, scale=[0, 1, 2])
    with pytest.raises(InputError) as frame:
        read_judgments(path, scale=[0, 1, 2])
    assert rule in str(columns.value)
    assert str(columns.value) == str(frame.value)


@pytest.mark.parametrize("text", [
    "q1 Q0 a 1 2.0 t\nq1 Q0 b 2 1.0 t\nq1 Q0 a 3 0.5 t\n",   # a chunk listed twice
    "q1 Q0 a 1 2.0 t\nq2 Q0 b 1 1.0 t\nq1 Q0 a 2 0.5 t\n",   # the same, the list split
], ids=["adjacent", "split-list"])
def test_validate_run_words_an_arrow_run_as_it_words_a_frame(tmp_path, text):
    path = tmp_path / "r.trec"
    path.write_text(text)
    run, codes = read_run_columns(path, scan=False)
    assert isinstance(run, pa.Table)
    with pytest.raises(InputError) as columns:
        validate_run(run, path=path, codes=codes)
    with pytest.raises(InputError) as frame:
        validate_run(read_run(path), path=path)
    assert "a chunk is listed twice for one query" in str(columns.value)
    assert str(columns.value) == str(frame.value)


def test_numpy_values_unpacks_arrow_booleans_at_any_offset():
    bits = np.array([True, False, True, True, False, False, True, False, True, True, False])
    arr = arrow_array(bits)
    assert numpy_values(arr).tolist() == bits.tolist()
    assert numpy_values(arr.slice(3, 6)).tolist() == bits[3:9].tolist()
    chunked = pa.chunked_array([arr.slice(1, 3), arr.slice(9, 2)])
    assert numpy_values(chunked).tolist() == bits[1:4].tolist() + bits[9:11].tolist()
