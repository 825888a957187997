"""Query-set drift and refresh: the library on hand-computed logs, and the two commands'
refusals (`relgrade drift`, `relgrade queries refresh`).

The reference log is the worked example of docs/query-sampling.md: counts 12, 6, 5, 3, 3, 2,
2, 2, 1, 1 (37 issued); head alpha, bravo (18), torso charlie, delta, echo (11), tail
foxtrot .. juliet (8).
"""

from __future__ import annotations

import json
import math

import numpy as np
import pandas as pd
import pytest
import yaml
from click.testing import CliRunner
from scipy.spatial.distance import jensenshannon

from relgrade import query_sampling as querylog
from relgrade.cli import main as cli
from relgrade.errors import InputError
from relgrade.query_sampling import drift as drifting
from relgrade.query_sampling import refresh as refreshing
from relgrade.rng import derive_seed

COUNTS = [("alpha", 12), ("bravo", 6), ("charlie", 5), ("delta", 3), ("echo", 3),
          ("foxtrot", 2), ("golf", 2), ("hotel", 2), ("india", 1), ("juliet", 1)]
#: The current log: alpha halved, the tail's three 2s doubled, a new query "kilo" (8).
CURRENT = [("alpha", 6), ("bravo", 6), ("charlie", 5), ("delta", 3), ("echo", 3),
           ("foxtrot", 4), ("golf", 4), ("hotel", 4), ("india", 1), ("juliet", 1), ("kilo", 8)]


def _strata(rows):
    return querylog.strata(pd.DataFrame(rows, columns=["query", "count"]))


def _set(rows):
    """A query set of (query, group, weight)."""
    return pd.DataFrame({"query_id": [querylog.query_id(q) for q, _, _ in rows],
                         "query": [q for q, _, _ in rows], "group": [g for _, g, _ in rows],
                         "weight": [float(w) for _, _, w in rows]})


ONE_EACH = _set([("alpha", "head", 18), ("charlie", "torso", 11), ("foxtrot", "tail", 8)])


def test_total_variation_and_jensen_shannon_by_hand_and_against_scipy():
    p, q = [0.5, 0.3, 0.2, 0.0], [0.4, 0.2, 0.3, 0.1]
    assert drifting.total_variation(p, q) == pytest.approx((0.1 + 0.1 + 0.1 + 0.1) / 2)
    assert drifting.jensen_shannon(p, q) == pytest.approx(jensenshannon(p, q, base=2) ** 2)
    assert drifting.jensen_shannon([1, 0], [0, 1]) == 1.0
    assert drifting.total_variation(p, p) == drifting.jensen_shannon(p, p) == 0.0


def test_drift_lays_the_current_traffic_over_the_reference_strata_by_hand():
    result = drifting.drift(ONE_EACH, reference=_strata(COUNTS), current=_strata(CURRENT),
                            rng=np.random.default_rng(3), seed=1, child_seed=3,
                            bootstrap=500)
    # the set: 18, 11, 8 of 37; the current log (45 issued): head alpha + bravo = 12,
    # torso charlie + delta + echo = 11, tail 4 + 4 + 4 + 1 + 1 = 14, new kilo = 8
    p = [18 / 37, 11 / 37, 8 / 37, 0.0]
    q = [12 / 45, 11 / 45, 14 / 45, 8 / 45]
    rows = {r["bucket"]: r for r in result.shares}
    for bucket, a, b, n in zip(drifting.BUCKETS, p, q, (2, 3, 5, 1)):
        assert (rows[bucket]["set"], rows[bucket]["log"], rows[bucket]["log_queries"]) == \
            (pytest.approx(a), pytest.approx(b), n)
        assert rows[bucket]["shift"] == pytest.approx(b - a)
    tv = (abs(12 / 45 - 18 / 37) + abs(11 / 45 - 11 / 37) + abs(14 / 45 - 8 / 37) + 8 / 45) / 2
    assert result.total_variation == pytest.approx(tv)  # 0.2727
    assert result.jensen_shannon == pytest.approx(jensenshannon(p, q, base=2) ** 2)
    assert result.flagged and result.threshold == 0.1
    # ceil(0.2727 * 3) = 1 of 3 queries
    assert (result.slice_queries, result.slice_share) == (1, 1 / 3)
    # the current log cut by the sampler (cuts 22.5, 36): kilo [0, 8), the two 6s [8, 20):
    # head; charlie's 5 covers [20, 25), midpoint 22.5 on the cut: torso; the three 4s
    # [25, 37), midpoint 31: torso; the 3s [37, 43) and 1s: tail. Head queries not in the
    # set: kilo (new) and bravo (head of the reference), most frequent first
    assert [(r["query"], r["count"], r["reference"]) for r in result.new_frequent] == \
        [("kilo", 8, "new"), ("bravo", 6, "head")]
    assert result.new_frequent[0]["query_id"] == querylog.query_id("kilo")
    assert {r["stratum"]: (r["queries"], r["traffic"]) for r in result.log_strata} == \
        {"head": (3, 20), "torso": (4, 17), "tail": (4, 8)}
    assert (result.issued, result.distinct, result.set_size) == (45, 11, 3)


def test_an_unchanged_log_shows_no_drift_and_recommends_no_slice():
    result = drifting.drift(ONE_EACH, reference=_strata(COUNTS), current=_strata(COUNTS),
                            rng=np.random.default_rng(0), seed=0, child_seed=0, bootstrap=200)
    assert result.total_variation == 0.0 and not result.flagged
    assert result.slice_queries == 0
    # a resampled distance is never below 0: near 0 the interval sits above the estimate
    assert 0.0 <= result.interval[0] <= result.interval[1] < 0.2


def test_the_interval_is_seeded_and_agrees_with_resampling_issued_queries_one_by_one():
    args = dict(reference=_strata(COUNTS), current=_strata(CURRENT), seed=1, child_seed=5,
                bootstrap=4000)
    a = drifting.drift(ONE_EACH, rng=np.random.default_rng(5), **args)
    b = drifting.drift(ONE_EACH, rng=np.random.default_rng(5), **args)
    assert a.interval == b.interval
    # independently: the 45 issued queries as labels, resampled with replacement
    labels = np.repeat(np.arange(4), [12, 11, 14, 8])
    p = np.array([18 / 37, 11 / 37, 8 / 37, 0.0])
    rng = np.random.default_rng(99)
    tvs = [0.5 * np.abs(np.bincount(rng.choice(labels, size=45), minlength=4) / 45 - p).sum()
           for _ in range(4000)]
    low, high = np.quantile(tvs, [0.025, 0.975])
    assert a.interval[0] == pytest.approx(low, abs=0.03)
    assert a.interval[1] == pytest.approx(high, abs=0.03)
    assert a.interval[0] < a.total_variation < a.interval[1]


@pytest.mark.parametrize("tv, n, expected", [(0.2, 12, 3), (0.21, 12, 3), (0.1, 12, 0),
                                             (0.099, 12, 0), (0.95, 12, 11), (0.5, 1, 0),
                                             (0.101, 12, 2)])
def test_recommended_slice_is_ceil_of_the_distance_times_the_set(tv, n, expected):
    assert drifting.recommended_slice(tv, n, threshold=0.1) == expected


def test_a_set_without_strata_is_refused():
    with pytest.raises(InputError, match="group, weight"):
        drifting.drift(ONE_EACH[["query_id", "query"]], reference=_strata(COUNTS),
                       current=_strata(CURRENT), rng=np.random.default_rng(0), seed=0,
                       child_seed=0)


@pytest.mark.parametrize("share, n, expected", [(0.25, 12, 3), (0.5, 3, 2), (0.2, 3, 1),
                                                (0.01, 8, 1), (0.99, 8, 7), (1 / 3, 3, 1)])
def test_slice_size_rounds_half_up_and_keeps_one_query_either_side(share, n, expected):
    assert refreshing.slice_size(share, n) == expected


@pytest.mark.parametrize("share", [0, 1, 1.5, -0.2, float("nan")])
def test_a_share_outside_zero_one_is_refused(share):
    with pytest.raises(InputError, match="must be greater than 0 and less than 1"):
        refreshing.slice_size(share, 12)


def test_stratum_weights_of_a_sampler_draw_are_the_samplers_weights():
    counts = _strata(COUNTS * 1 + [(f"x{i}", 1) for i in range(20)])
    for seed in range(20):
        sample = querylog.sample_queries(counts, n=7, rng=np.random.default_rng(seed))
        for s in querylog.STRATA:
            members = counts[counts["stratum"] == s].reset_index(drop=True)
            mine = sample[sample["group"] == s]
            where = [int(np.flatnonzero(members["query"] == q)[0]) for q in mine["query"]]
            got = refreshing.stratum_weights(members["count"], where)
            assert got.tolist() == pytest.approx(mine["weight"].tolist())


def test_refresh_replaces_the_stated_share_and_weights_the_set_against_the_current_log():
    counts = _strata(COUNTS)
    before = querylog.sample_queries(counts, n=6, rng=np.random.default_rng(0))
    current = _strata(CURRENT)
    out = refreshing.refresh(before, current, share=0.5, rng=np.random.default_rng(1))
    table = out.table
    assert (out.slice, out.replaced, out.kept, len(table)) == (3, 3, 3, 6)
    assert set(out.retired) <= set(before["query_id"])
    assert not set(out.added) & set(before["query_id"])
    assert set(table["query_id"]) == (set(before["query_id"]) - set(out.retired)) | set(out.added)
    # groups are the current strata; each stratum's weights add up to its current traffic
    now = dict(zip(current["query"], current["stratum"]))
    assert all(now[q] == g for q, g in zip(table["query"], table["group"]))
    traffic = current.groupby("stratum")["count"].sum()
    for s, w in table.groupby("group")["weight"].sum().items():
        assert w == pytest.approx(traffic[s])
    assert list(table.columns) == querylog.SAMPLE_COLUMNS
    # stratum by stratum: each retired query is replaced by one of its current stratum,
    # as far as the stratum has queries not in the set (the rest come from other strata)
    retired = before.loc[before["query_id"].isin(out.retired), "query"]
    owed = pd.Series([now[q] for q in retired]).value_counts()
    added = table.loc[table["query_id"].isin(out.added), "group"].value_counts()
    new = current.loc[~current["query"].isin(set(before["query"])), "stratum"].value_counts()
    for s in querylog.STRATA:
        assert added.get(s, 0) >= min(owed.get(s, 0), new.get(s, 0))
    # seeded: the same again
    again = refreshing.refresh(before, current, share=0.5, rng=np.random.default_rng(1))
    pd.testing.assert_frame_equal(again.table, table)


def test_queries_gone_from_the_log_are_retired_first():
    before = _set([("alpha", "head", 18), ("charlie", "torso", 11), ("foxtrot", "tail", 4),
                   ("india", "tail", 4)])
    current = _strata([(q, c) for q, c in CURRENT if q != "india"])
    out = refreshing.refresh(before, current, share=0.25, rng=np.random.default_rng(0))
    assert out.retired == out.gone == [querylog.query_id("india")]
    assert out.replaced == 1 and out.kept == 3


# --- the commands ------------------------------------------------------------------------


@pytest.fixture
def experiment(tmp_path, monkeypatch):
    """An experiment (``exp/``) whose query set was drawn from the worked example's log, and
    the current log beside it (``now.tsv``); the commands run in ``tmp_path``."""
    params = {"seed": 11, "paths": {"sample_manifest": "data/queries/sample.json"},
              "queries": {"input": "data/input/queries.sampled.tsv",
                          "groups": ["head", "torso", "tail"], "log": "data/input/log.tsv"},
              "sample": {"n": 3, "allocation": "equal"}}
    exp = tmp_path / "exp"
    (exp / "data/input").mkdir(parents=True)
    (exp / "data/input/log.tsv").write_text(
        "query\tcount\n" + "".join(f"{q}\t{c}\n" for q, c in COUNTS))
    sample = querylog.sample_queries(_strata(COUNTS), n=3, rng=np.random.default_rng(0))
    (exp / "data/input/queries.sampled.tsv").write_text(querylog.queries_tsv(sample))
    (exp / "params.yaml").write_text(yaml.safe_dump(params))
    (tmp_path / "now.tsv").write_text(
        "query\tcount\n" + "".join(f"{q}\t{c}\n" for q, c in CURRENT))
    monkeypatch.chdir(tmp_path)
    return exp


def _files(root):
    return {p.relative_to(root).as_posix(): p.read_bytes() for p in root.rglob("*")
            if p.is_file()}


def test_drift_prints_the_table_and_writes_the_json(experiment):
    res = CliRunner().invoke(cli, ["drift", "--experiment", "exp", "--log", "now.tsv"])
    assert res.exit_code == 0, res.output
    out = json.loads((experiment / "data/queries/drift.json").read_text())
    assert out["flagged"] and out["slice_queries"] == 1
    assert out["log"] == "now.tsv" and out["reference"] == "data/input/log.tsv"
    assert (out["seed"], out["child_seed"]) == (11, derive_seed(11, "queries-drift"))
    assert "new       0.0%  17.8%           +17.8            1" in res.output
    assert "DRIFT: 27.3% of the traffic changed stratum, above drift.max_shift 0.1: refresh " \
           "1 of 3 queries: relgrade queries refresh --experiment exp --log now.tsv " \
           "--share 0.3333" in res.output


@pytest.mark.parametrize("content, name", [("", "empty.txt"), ("\n  \n", "blank.txt"),
                                           ("query\tcount\n", "empty.tsv")])
def test_drift_refuses_a_log_with_no_query_in_one_line(experiment, content, name):
    (experiment.parent / name).write_text(content)
    before = _files(experiment)
    res = CliRunner().invoke(cli, ["drift", "--experiment", "exp", "--log", name])
    assert res.exit_code == 1
    assert res.output == f"Error: {name}: query log is empty. Give a log with at least one query\n"
    assert _files(experiment) == before


@pytest.mark.parametrize("share", ["0", "1", "1.5", "-0.25"])
def test_refresh_refuses_a_share_outside_zero_one_and_writes_nothing(experiment, share):
    before = _files(experiment)
    res = CliRunner().invoke(cli, ["queries", "refresh", "--experiment", "exp", "--log",
                                   "now.tsv", "--share", share])
    assert res.exit_code == 1
    assert res.output == (f"Error: --share must be greater than 0 and less than 1 (found "
                          f"{float(share)!r}). give the share of the query set to replace, "
                          "e.g. 0.25\n")
    assert _files(experiment) == before


def test_refresh_refuses_a_log_with_no_query_and_writes_nothing(experiment):
    (experiment.parent / "empty.txt").write_text("")
    before = _files(experiment)
    res = CliRunner().invoke(cli, ["queries", "refresh", "--experiment", "exp", "--log",
                                   "empty.txt", "--share", "0.3"])
    assert res.exit_code == 1
    assert res.output == "Error: empty.txt: query log is empty. Give a log with at least one query\n"
    assert _files(experiment) == before


def test_refresh_writes_the_params_section_the_previous_set_and_the_log(experiment):
    (experiment / "params.yaml").write_text(
        "# the experiment\n" + (experiment / "params.yaml").read_text().replace(
            "  log: data/input/log.tsv\n", "  log: data/input/log.tsv   # last quarter\n"))
    res = CliRunner().invoke(cli, ["queries", "refresh", "--experiment", "exp", "--log",
                                   "now.tsv", "--share", "0.34"])
    assert res.exit_code == 0, res.output
    params = yaml.safe_load((experiment / "params.yaml").read_text())
    assert params["queries"]["log"] == "data/input/now.tsv"
    assert params["sample"]["refresh"] == {"share": 0.34,
                                           "previous": "data/input/queries.previous.tsv"}
    text = (experiment / "params.yaml").read_text()
    # the user's comments stay, the one on the changed line included
    assert text.startswith("# the experiment\n")
    assert "  log: data/input/now.tsv   # last quarter\n" in text, text
    assert (experiment / "data/input/now.tsv").read_text() == \
        (experiment.parent / "now.tsv").read_text()
    assert (experiment / "data/input/queries.previous.tsv").read_text() == \
        (experiment / "data/input/queries.sampled.tsv").read_text()
    assert "refresh: 1 of 3 queries replaced from now.tsv (share 0.34); 2 kept" in res.output
    # the stage draws the same refresh the command announced
    from relgrade.experiment.files import Experiment
    from relgrade.pipeline.stages import sample as stage

    stage.run(Experiment.load("exp/params.yaml"))
    manifest = json.loads((experiment / "data/queries/sample.json").read_text())
    assert f"  retired: {', '.join(manifest['refresh']['retired'])}" in res.output
    assert manifest["refresh"]["replaced"] == 1 and math.isclose(manifest["weight_sum"], 45)


def test_refresh_again_with_the_same_log_writes_nothing_and_says_unchanged(experiment):
    args = ["queries", "refresh", "--experiment", "exp", "--log", "now.tsv", "--share", "0.34"]
    first = CliRunner().invoke(cli, args)
    assert first.exit_code == 0, first.output
    assert ("Wrote exp/data/input/now.tsv, exp/data/input/queries.previous.tsv (the set before "
            "the refresh), exp/params.yaml (queries.log and sample.refresh)\n") in first.output
    assert "Unchanged" not in first.output
    before = {p: (experiment / p).stat().st_mtime_ns for p in _files(experiment)}
    again = CliRunner().invoke(cli, args)
    assert again.exit_code == 0, again.output
    assert "Wrote" not in again.output
    assert ("Unchanged (nothing written): exp/data/input/now.tsv, "
            "exp/data/input/queries.previous.tsv, exp/params.yaml\n") in again.output
    assert {p: (experiment / p).stat().st_mtime_ns for p in _files(experiment)} == before


@pytest.mark.parametrize("seed", range(5))
def test_each_retired_query_is_replaced_from_its_current_stratum(seed):
    # ONE_EACH in the current log: alpha head, charlie torso, foxtrot torso (its 4 now);
    # every stratum has at least two queries outside the set (head kilo, bravo; torso golf,
    # hotel; tail delta, echo, india, juliet), so each replacement comes from its stratum
    current = _strata(CURRENT)
    now = dict(zip(current["query"], current["stratum"]))
    out = refreshing.refresh(ONE_EACH, current, share=0.5, rng=np.random.default_rng(seed))
    retired = ONE_EACH.loc[ONE_EACH["query_id"].isin(out.retired), "query"]
    added = out.table.loc[out.table["query_id"].isin(out.added), "group"]
    assert out.replaced == 2
    assert sorted(now[q] for q in retired) == sorted(added)
