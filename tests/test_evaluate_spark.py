"""``relgrade evaluate --engine spark`` (Spark's local mode): the local engine's output, byte
for byte, on the default experiment's key and on a generated 10,000-query set; bad input
gives the local engine's one ``Error:`` line."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner

from relgrade.cli import main

pytestmark = [pytest.mark.slow,
              # PySpark 4.3 warns about pandas 3 on every conversion; nothing relgrade can fix.
              pytest.mark.filterwarnings("ignore:PySpark does not yet fully support pandas"),
              pytest.mark.filterwarnings("ignore:The copy keyword is deprecated")]

REPO = Path(__file__).resolve().parents[1]
ANCHOR = ("-m", "ndcg_cut.10", "-m", "recall.10", "-m", "recip_rank")


@pytest.fixture(scope="module")
def spark():
    pytest.importorskip("pyspark")
    from relgrade.tables import spark as S

    return S.session("local[2]")


def evaluate(engine: str, qrels, runs, *args):
    args = ["evaluate", str(qrels), *map(str, runs), *args]
    if engine == "spark":
        args += ["--engine", "spark", "--spark-master", "local[2]"]
    result = CliRunner().invoke(main, args)
    return result.exit_code, result.output


def spark_alone(monkeypatch):
    """Make the local engine's readers fail: the output then comes from Spark's rows."""
    def refuse(*args, **kwargs):
        raise AssertionError("the local engine read an input Spark should have read")

    monkeypatch.setattr("relgrade.io.runs.read_run", refuse)
    monkeypatch.setattr("relgrade.io.judgments.read_judgments", refuse)


def write_run(path: Path, query_ids, chunk_ids, scores, tag: str) -> Path:
    """A TREC run, each query's rows in the order given, ranks 1..n per query."""
    lines, rank, last = [], 0, None
    for q, c, s in zip(query_ids, chunk_ids, scores):
        rank = rank + 1 if q == last else 1
        last = q
        lines.append(f"{q} Q0 {c} {rank} {s} {tag}\n")
    path.write_text("".join(lines))
    return path


def test_spark_equals_local_on_the_default_experiments_key(spark, tmp_path, monkeypatch):
    # the committed key; two arms ranking its chunks among others, scores on a 0.1 grid so
    # ties are common, some queries unanswered and one the key lacks
    qrels = REPO / "data" / "key" / "key.qrels"
    fields = [line.split() for line in qrels.read_text().splitlines() if line.strip()]
    by_query: dict[str, list[str]] = {}
    for q, _, c, _ in fields:
        by_query.setdefault(q, []).append(c)
    rng = np.random.default_rng(30)
    every = sorted({c for cs in by_query.values() for c in cs})
    runs = []
    for a, name in enumerate(("sparse", "dense")):
        qs, cs, ss = [], [], []
        for q in list(by_query) + ["zz-not-in-key"]:
            if rng.random() < 0.1:
                continue
            pool = list(dict.fromkeys(by_query.get(q, []) + list(rng.choice(every, 15))))
            # (+ 0.0 writes no negative zero, which Spark leaves to the local engine)
            score = np.sort(np.round(rng.normal(size=len(pool)) + a, 1) + 0.0)[::-1]
            qs += [q] * len(pool)
            cs += list(rng.permutation(pool))
            ss += [f"{s:.1f}" for s in score]
        runs.append(write_run(tmp_path / f"{name}.trec", qs, cs, ss, name))
    cases = (("--json", "--per-query", *ANCHOR, "-m", "map", "-m", "RR(rel=2)"),
             ("--per-query", "--ties", "rank", "--missing", "skip"))
    local = [evaluate("local", qrels, runs, *args) for args in cases]
    assert all(code == 0 for code, _ in local), local
    doc = json.loads(local[0][1])
    assert doc["queries"] == len(by_query) and set(doc["runs"]) == {"sparse", "dense"}
    spark_alone(monkeypatch)
    assert [evaluate("spark", qrels, runs, *args) for args in cases] == local


def test_spark_equals_local_on_a_generated_10k_query_set(spark, tmp_path, monkeypatch):
    # 10,000 queries x 2 runs x depth 20; 5 graded chunks each (grades 0-2) among 40
    # candidates; scores on a coarse grid so ties at the cut are common
    rng = np.random.default_rng(31)
    n, depth = 10_000, 20
    qids = np.array([str(i) for i in range(1, n + 1)])
    cand = rng.integers(0, 10**6, size=(n, 40))
    qrels = tmp_path / "qrels.trec"
    grades = rng.choice(3, p=(0.5, 0.3, 0.2), size=(n, 5))
    qrels.write_text("".join(f"{q} 0 d{c} {g}\n" for q, cs, gs in zip(qids, cand, grades)
                             for c, g in zip(dict.fromkeys(cs[:5]), gs)))
    runs = []
    for a in range(2):
        latent = np.zeros(cand.shape)
        latent[:, :5] = grades
        score = np.round(0.5 * (a + 1) * latent + rng.normal(size=cand.shape), 1) + 0.0
        top = np.argsort(-score, axis=1, kind="stable")[:, :depth]
        keep = rng.random(n) >= 0.01
        q = np.repeat(qids[keep], depth)
        c = np.char.add("d", np.take_along_axis(cand, top, 1)[keep].ravel().astype(str))
        s = np.take_along_axis(score, top, 1)[keep].ravel()
        # one query id picked twice as a candidate would list a chunk twice: drop repeats
        seen, rows = set(), []
        for row in zip(q, c, s):
            if (row[0], row[1]) not in seen:
                seen.add((row[0], row[1]))
                rows.append(row)
        runs.append(write_run(tmp_path / f"arm{a}.trec", *zip(*rows), f"arm{a}"))
    args = ("--json", "--per-query", *ANCHOR, "-m", "nDCG(dcg='exp-log2')@20")
    local = evaluate("local", qrels, runs, *args)
    assert local[0] == 0, local[1]
    assert json.loads(local[1])["queries"] == n
    spark_alone(monkeypatch)
    assert evaluate("spark", qrels, runs, *args) == local


QRELS = "q1 0 a 2\nq1 0 b 0\nq2 0 c 1\n"


@pytest.mark.parametrize("qrels, run, error", [
    (QRELS, "q1 Q0 a 1 2.0 r\nq1 Q0 x 2 1.5 r\nq1 Q0 a 3 1.0 r\n",
     "Error: {run}:3: query q1, chunk a: a chunk is listed twice for one query "
     "(found lines 1 and 3)"),
    (QRELS + "q1 0 a 1\n", "q1 Q0 a 1 2.0 r\n",
     "Error: {qrels}:4: query q1, chunk a: one (query, chunk) pair is graded twice "
     "(found lines 1 and 4)"),
    (QRELS, "q1 Q0 a 1 nan r\n", "Error: {run}:1: score must be a finite number"),
])
def test_bad_input_gives_the_local_engines_error_line(spark, tmp_path, qrels, run, error):
    (tmp_path / "key.qrels").write_text(qrels)
    (tmp_path / "r.trec").write_text(run)
    args = (tmp_path / "key.qrels", [tmp_path / "r.trec"])
    local = evaluate("local", *args)
    assert local[0] == 1
    assert local[1].startswith(error.format(run=tmp_path / "r.trec",
                                            qrels=tmp_path / "key.qrels"))
    assert len(local[1].splitlines()) == 1
    assert evaluate("spark", *args) == local


def test_a_run_spark_leaves_is_scored_by_the_local_engine(spark, tmp_path):
    # fields after the sixth are outside Spark's plain layout: the local engine reads the
    # run and prints its note
    (tmp_path / "key.qrels").write_text(QRELS)
    (tmp_path / "r.trec").write_text("q1 Q0 b 1 2.0 r extra\nq1 Q0 a 2 1.0 r extra\n")
    args = (tmp_path / "key.qrels", [tmp_path / "r.trec"], "-m", "RR")
    local = evaluate("local", *args)
    assert local[0] == 0 and "ignored" in local[1]
    assert evaluate("spark", *args) == local
    # q1: its relevant chunk a at rank 2; q2 unanswered scores 0
    assert local[1].splitlines()[1].split() == ["r", "0.25"]


def test_an_unknown_engine_is_one_error_line(tmp_path):
    (tmp_path / "key.qrels").write_text(QRELS)
    (tmp_path / "r.trec").write_text("q1 Q0 a 1 2.0 r\n")
    result = CliRunner().invoke(main, ["evaluate", str(tmp_path / "key.qrels"),
                                       str(tmp_path / "r.trec"), "--engine", "hadoop"])
    assert result.exit_code == 2
    errors = [line for line in result.output.splitlines() if line.startswith("Error:")]
    assert errors == ["Error: Invalid value for '--engine': 'hadoop' is not one of "
                      "'local', 'spark'. See relgrade evaluate --help"]
