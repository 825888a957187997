"""The judge's paraphrase component in the units of a per-query metric, and the PPI++
intervals it widens (relgrade.evaluation.ppi_paraphrase, ppi_table's prompt_variance).

Hand-computed on a tiny table: three queries, two arms ranking two chunks each, a judge
asked under two paraphrases; RR@10 is computed by hand for every cell.
"""

from __future__ import annotations

import json
import math

import numpy as np
import pandas as pd
import pytest
from scipy import stats as sps

from relgrade.errors import InputError
from relgrade.evaluation.ppi_paraphrase import metric_prompt_variances, paraphrase_metric_cells
from relgrade.evaluation.ppi_table import ppi_table
from relgrade.evaluation.robustness import paraphrase_widened

RR = "RR@10"

# The model key: q1 and q2 have only c2 relevant, q3 only c1.
KEY = pd.DataFrame({"query_id": ["q1", "q1", "q2", "q2", "q3", "q3"],
                    "chunk_id": ["c1", "c2"] * 3, "grade": [0, 1, 0, 1, 1, 0]})


def run_of(first: str, second: str) -> pd.DataFrame:
    return pd.DataFrame({"query_id": [q for q in ("q1", "q2", "q3") for _ in (0, 1)],
                         "chunk_id": [first, second] * 3, "rank": [1, 2] * 3,
                         "score": [2.0, 1.0] * 3})


RUNS = {"a": run_of("c1", "c2"), "b": run_of("c2", "c1")}

# Paraphrase 1 answers as the key; paraphrase 2 makes c1 relevant on q1 and q2.
ANSWERS = pd.DataFrame(
    [(q, c, 1, 0, g) for q, c, g in KEY.itertuples(index=False)]
    + [(q, c, 2, 0, 1 if c == "c1" else g) for q, c, g in KEY.itertuples(index=False)],
    columns=["query_id", "chunk_id", "prompt", "sample", "grade"])


def cells():
    return paraphrase_metric_cells(KEY, ANSWERS, RUNS, measure=RR, cutoffs=[10],
                                   relevant_min=1, ties="score")


def test_each_querys_metric_under_each_paraphrase_is_the_rr_by_hand():
    t = cells().set_index(["arm", "query_id", "prompt"])["value"]
    # arm a ranks c1 first: RR 1/2 where only c2 is relevant, 1 where c1 is
    assert [t[("a", q, 1)] for q in ("q1", "q2", "q3")] == [0.5, 0.5, 1.0]
    assert [t[("a", q, 2)] for q in ("q1", "q2", "q3")] == [1.0, 1.0, 1.0]
    # arm b ranks c2 first
    assert [t[("b", q, 1)] for q in ("q1", "q2", "q3")] == [1.0, 1.0, 0.5]
    assert [t[("b", q, 2)] for q in ("q1", "q2", "q3")] == [1.0, 1.0, 0.5]


def test_the_paraphrase_component_of_a_tiny_table_in_metric_units_matches_the_hand_computation():
    out = metric_prompt_variances(cells(), arms=["a", "b"], pairs=[("a", "b")], n_queries=10)
    # arm a: cells q1 (0.5, 1), q2 (0.5, 1), q3 (1, 1); grand mean 5/6, prompt means 2/3, 1:
    # MS_prompt = 3 * ((2/3 - 5/6)^2 + (1 - 5/6)^2) = 1/6; interaction residuals -+1/12
    # (q1, q2) and +-1/6 (q3): MS_pxq = (4/144 + 2/36) / 2 = 1/24;
    # prompt = (1/6 - 1/24) / 3 = 1/24, pair x prompt = 1/24 (one sample)
    a = out["arms"]["a"]
    assert a["components"]["prompt"] == pytest.approx(1 / 24)
    assert a["components"]["pair_x_prompt"] == pytest.approx(1 / 24)
    assert a["prompt_variance"] == pytest.approx(1 / 24 + 1 / 24 / 10)  # 11/240
    # arm b does not move: no component
    b = out["arms"]["b"]
    assert b["components"]["prompt"] == 0.0 and b["prompt_variance"] == 0.0
    # a - b: q1 (-0.5, 0), q2 (-0.5, 0), q3 (0.5, 0.5): the same mean squares as arm a
    d = out["differences"][("a", "b")]
    assert d["components"]["prompt"] == pytest.approx(1 / 24)
    assert d["prompt_variance"] == pytest.approx(11 / 240)


def test_an_answer_for_a_pair_outside_the_key_is_refused():
    bad = pd.concat([ANSWERS, pd.DataFrame([("q9", "c1", 1, 0, 2)], columns=ANSWERS.columns)])
    with pytest.raises(InputError, match="names a pair the key does not hold"):
        paraphrase_metric_cells(KEY, bad, RUNS, measure=RR, cutoffs=[10], relevant_min=1,
                                ties="score")


def tables():
    rng = np.random.default_rng(3)
    qs = [f"q{i}" for i in range(12)]
    model = pd.DataFrame(rng.uniform(0, 1, (2, 12)), index=["a", "b"], columns=qs)
    human = (model[qs[:5]] + rng.normal(0, 0.1, (2, 5))).clip(0, 1)
    return model, human


@pytest.mark.parametrize("interval", ["normal", "t", "jackknife"])
def test_ppi_intervals_widen_by_draws_lambda_squared_times_the_prompt_variance(interval):
    model, human = tables()
    plain = ppi_table(model, human, measure="x", interval=interval, pairs=[("a", "b")])
    pv = {"arms": {"a": 0.004, "b": 0.0}, "differences": {("a", "b"): 0.009}}
    wide = ppi_table(model, human, measure="x", interval=interval, pairs=[("a", "b")],
                     prompt_variance=pv, draws=2)
    for old, new, v in ((plain["arms"]["a"]["ppi++"], wide["arms"]["a"]["ppi++"], 0.004),
                        (plain["arms"]["b"]["ppi++"], wide["arms"]["b"]["ppi++"], 0.0),
                        (plain["differences"][0]["ppi++"], wide["differences"][0]["ppi++"],
                         0.009)):
        added = 2 * old["lambda"] ** 2 * v
        assert new["se"] == pytest.approx(math.sqrt(old["se"] ** 2 + added))
        q = sps.norm.ppf(0.975) if interval == "normal" else sps.t.ppf(0.975, old["df"])
        assert new["low"] == pytest.approx(max(-1.0, old["estimate"] - q * new["se"])) \
            or new["clipped"]
        assert new["paraphrase"] == {"prompt_variance": v, "draws": 2,
                                     "added_variance": pytest.approx(added),
                                     "unwidened": {"se": old["se"], "low": old["low"],
                                                   "high": old["high"]}}
        assert new["estimate"] == old["estimate"]
    # the normal kind is exactly paraphrase_widened's interval
    if interval == "normal":
        old = plain["arms"]["a"]["ppi++"]
        w = paraphrase_widened(old["estimate"], old["se"], lam=old["lambda"],
                               prompt_variance=0.004, draws=2)
        assert (wide["arms"]["a"]["ppi++"]["low"], wide["arms"]["a"]["ppi++"]["high"]) == \
            (pytest.approx(w["low"]), pytest.approx(w["high"]))
    # the widened difference's p-value is taken on the widened standard error
    d = wide["differences"][0]["ppi++"]
    assert d["p"] >= plain["differences"][0]["ppi++"]["p"]
    # model-only and human-only are untouched
    assert wide["arms"]["a"]["human-only"] == plain["arms"]["a"]["human-only"]


def test_without_a_prompt_variance_the_table_is_as_before_to_the_byte():
    model, human = tables()
    a = ppi_table(model, human, measure="x", pairs=[("a", "b")])
    b = ppi_table(model, human, measure="x", pairs=[("a", "b")], prompt_variance=None)
    assert json.dumps(a) == json.dumps(b)
    assert "paraphrase" not in a["arms"]["a"]["ppi++"]


def test_the_ppi_stage_reads_the_key_graders_probe_report_and_the_widen_switch_once_they_exist(
        tmp_path):
    import shutil
    from pathlib import Path

    import yaml

    from relgrade.experiment.files import Experiment
    from relgrade.pipeline import registry

    exp = Path(__file__).resolve().parents[1] / "experiments" / "ppi-sim"
    root = tmp_path / "ppi-sim"
    root.mkdir()
    shutil.copy(exp / "params.yaml", root / "params.yaml")
    raw = yaml.safe_load((root / "params.yaml").read_text())
    ppi = next(s for s in registry.stages() if s.name == "ppi")

    def body(raw):
        ex = Experiment.from_mapping(raw, root=root)
        return registry.stage_body(ppi, ex, registry.modes_of(ex), graph=None,
                                   src=tmp_path / "src", root_rel="..")

    plain = body(raw)
    assert not any("judges" in d for d in plain["deps"])
    assert not any("judges" in p for p in plain["params"])
    (root / "judges").mkdir()
    (root / "judges" / "probe-model-m.json").write_text("{}")
    (root / "judges" / "probe-other.json").write_text("{}")  # not the key grader's
    switched = body(raw | {"judges": {"probe": {"widen": False, "max_flip_rate": 0.2}}})
    assert [d for d in switched["deps"] if "judges" in d] == ["judges/probe-model-m.json"]
    assert [p for p in switched["params"] if "judges" in p] == ["judges.probe.widen"]


def test_with_the_switch_off_the_record_keeps_the_components_and_says_nothing_was_widened():
    from relgrade.pipeline.stages.ppi import _paraphrase_record

    comps = {RR: metric_prompt_variances(cells(), arms=["a", "b"], pairs=[("a", "b")],
                                         n_queries=10)}
    source = {"source": "judges/probe-m.json", "sha256": "ab" * 32, "judge": "cd" * 32,
              "used": True, "widen": False, "note": None, "paraphrases": 2,
              "answers": ANSWERS}
    rec = _paraphrase_record(source, comps, 1)
    assert (rec["widen"], rec["widened"], rec["draws"]) == (False, False, 1)
    assert (rec["probed_queries"], rec["probed_pairs"]) == (3, 6)
    a = rec["components"][RR]["arms"]["a"]
    assert a["prompt_variance"] == pytest.approx(11 / 240) and a["prompt"] == pytest.approx(1 / 24)
    d = rec["components"][RR]["differences"][0]
    assert (d["arm_a"], d["arm_b"]) == ("a", "b")
    ignored = _paraphrase_record(source | {"used": False, "note": "ignored: x"}, {}, None)
    assert ignored == {"source": "judges/probe-m.json", "sha256": "ab" * 32,
                       "judge": "cd" * 32, "used": False, "widen": False, "note": "ignored: x",
                       "widened": False}
