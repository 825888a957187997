"""LLM triage: which pairs people grade, inclusion probabilities, the key merge rule, the
model's miss rate on its 0s and its interval, and the params that refuse a broken design."""

import math

import numpy as np
import pandas as pd
import pytest
from statsmodels.stats.proportion import proportion_confint

from relgrade.errors import InputError
from relgrade.experiment.params import parse_params
from relgrade.protocol import triage
from relgrade.schema import TRIAGE_KEY, TRIAGE_QUEUE


def _model(grades, query="q1"):
    return pd.DataFrame({"query_id": [query] * len(grades),
                         "chunk_id": [f"c{i}" for i in range(len(grades))],
                         "grade": grades})


# --- who grades what ---------------------------------------------------------------------


def test_every_model_relevant_pair_goes_to_people_with_probability_one():
    # model grades: 2 relevant (c0: 2, c3: 1), 7 zeros; zero_sample 0.3 -> ceil(2.1) = 3 zeros
    q = triage.select_for_people(_model([2, 0, 0, 1, 0, 0, 0, 0, 0]), relevant_min=1,
                                 zero_sample=0.3, seed=11)
    assert list(q.columns) == TRIAGE_QUEUE
    rel = q[q["stratum"] == "relevant"]
    assert rel["chunk_id"].tolist() == ["c0", "c3"]
    assert rel["selected"].all() and (rel["inclusion_probability"] == 1.0).all()
    zero = q[q["stratum"] == "zero"]
    assert len(zero) == 7 and int(zero["selected"].sum()) == 3
    # every zero, sampled or not, had probability 3/7 of being chosen
    assert np.allclose(zero["inclusion_probability"], 3 / 7)


@pytest.mark.parametrize("n_zero,share,n_sampled", [
    (10, 0.1, 1), (10, 0.25, 3), (7, 0.3, 3), (3, 1.0, 3), (1, 0.01, 1), (40, 0.5, 20)])
def test_the_sample_of_zeros_is_ceil_share_times_zeros(n_zero, share, n_sampled):
    q = triage.select_for_people(_model([0] * n_zero + [3]), relevant_min=1,
                                 zero_sample=share, seed=3)
    zero = q[q["stratum"] == "zero"]
    assert int(zero["selected"].sum()) == n_sampled
    assert np.allclose(zero["inclusion_probability"], n_sampled / n_zero)


def test_relevant_min_two_makes_a_model_one_a_zero():
    q = triage.select_for_people(_model([1, 2, 1]), relevant_min=2, zero_sample=0.5, seed=0)
    assert q.set_index("chunk_id")["stratum"].to_dict() == {
        "c0": "zero", "c1": "relevant", "c2": "zero"}
    assert int(q["selected"].sum()) == 2          # c1 plus ceil(0.5 * 2) = 1 zero


def test_the_draw_is_seeded_and_depends_only_on_the_set_of_zeros():
    model = pd.concat([_model([0] * 12, "q1"), _model([0, 1, 0, 0], "q2")], ignore_index=True)
    a = triage.select_for_people(model, relevant_min=1, zero_sample=0.25, seed=5)
    shuffled = model.sample(frac=1.0, random_state=1)
    b = triage.select_for_people(shuffled, relevant_min=1, zero_sample=0.25, seed=5)
    pd.testing.assert_frame_equal(a, b)
    draws = {tuple(triage.select_for_people(model, relevant_min=1, zero_sample=0.25,
                                            seed=s)["selected"]) for s in range(6)}
    assert len(draws) > 1                          # the seed matters
    other_round = triage.select_for_people(model, relevant_min=1, zero_sample=0.25, seed=5,
                                           round=2)
    assert int(other_round["selected"].sum()) == int(a["selected"].sum())


def test_each_zero_is_sampled_at_its_recorded_inclusion_probability():
    # over 4000 seeds, each of 8 zeros is chosen in about 3/8 of the draws (ceil(0.3 * 8) = 3)
    hits = np.zeros(8)
    for s in range(4000):
        chosen, p = triage.draw_zeros(8, zero_sample=0.3, seed=s)
        assert p == 3 / 8 and len(chosen) == 3
        hits[chosen] += 1
    # binomial sd at p = 3/8, n = 4000 is 0.00765: 4 sd
    assert np.all(np.abs(hits / 4000 - 3 / 8) < 0.031)


def test_the_queue_selects_the_drawn_zeros_in_pair_order():
    model = pd.DataFrame({"query_id": ["q2", "q1", "q1", "q2", "q1"],
                          "chunk_id": ["a", "b", "a", "b", "c"], "grade": [0, 0, 3, 0, 0]})
    q = triage.select_for_people(model, relevant_min=1, zero_sample=0.5, seed=9)
    # zeros in (query_id, chunk_id) order: q1/b, q1/c, q2/a, q2/b
    chosen, p = triage.draw_zeros(4, zero_sample=0.5, seed=9)
    zeros = [("q1", "b"), ("q1", "c"), ("q2", "a"), ("q2", "b")]
    expect = {zeros[i] for i in chosen} | {("q1", "a")}
    got = {(r.query_id, r.chunk_id) for r in q.itertuples() if r.selected}
    assert got == expect and p == 0.5


def test_a_model_without_zeros_or_without_relevant_pairs():
    all_rel = triage.select_for_people(_model([1, 2]), relevant_min=1, zero_sample=0.5, seed=1)
    assert all_rel["selected"].all()
    all_zero = triage.select_for_people(_model([0, 0]), relevant_min=1, zero_sample=1.0, seed=1)
    assert all_zero["selected"].all() and (all_zero["inclusion_probability"] == 1.0).all()


# --- bad input ---------------------------------------------------------------------------


@pytest.mark.parametrize("value", [0, 0.0, -0.1, 1.5, float("nan"), True, "0.2"])
def test_zero_sample_outside_zero_one_is_refused(value):
    with pytest.raises(InputError) as e:
        triage.select_for_people(_model([0, 1]), relevant_min=1, zero_sample=value, seed=1)
    assert str(e.value).startswith("triage.zero_sample: must be a number in (0, 1] (found ")


def test_a_model_grading_a_pair_twice_is_refused():
    model = pd.concat([_model([0, 1]), _model([2])], ignore_index=True)
    with pytest.raises(InputError, match="q1/c0: pair graded twice in the triage grader's"):
        triage.select_for_people(model, relevant_min=1, zero_sample=0.5, seed=1)


def _queue():
    # c0 relevant (2), c1 relevant (1), c2..c5 zeros; zero_sample 0.5 -> 2 of 4 sampled
    return triage.select_for_people(_model([2, 1, 0, 0, 0, 0]), relevant_min=1,
                                    zero_sample=0.5, seed=7)


def test_a_persons_grade_for_a_pair_not_in_their_queue_is_refused():
    q = _queue()
    unsampled = q[~q["selected"]]["chunk_id"].iloc[0]
    people = pd.DataFrame({"query_id": ["q1"], "chunk_id": [unsampled], "grade": [1]})
    with pytest.raises(InputError) as e:
        triage.check_people_grades(people, q, grader="ann", path="data/grades/ann/round-1.jsonl")
    assert str(e.value) == (
        f"data/grades/ann/round-1.jsonl: q1/{unsampled}: grade for a pair not in the triage "
        "queue of ann (found 1 such pair). People grade the pairs the model graded relevant "
        "and the sampled 0s only; remove the others or rebuild the packets")
    stranger = pd.DataFrame({"query_id": ["q9"], "chunk_id": ["c0"], "grade": [0]})
    with pytest.raises(InputError, match="q9/c0: grade for a pair not in the triage queue"):
        triage.check_people_grades(stranger, q, grader="ann")


# --- the key -----------------------------------------------------------------------------


def _people_for(q, grades):
    chosen = q[q["selected"]]
    return pd.DataFrame({"query_id": chosen["query_id"], "chunk_id": chosen["chunk_id"],
                         "grade": [grades[c] for c in chosen["chunk_id"]]})


def test_the_key_takes_peoples_grades_and_the_models_zeros_elsewhere():
    q = _queue()
    sampled = q[(q["stratum"] == "zero") & q["selected"]]["chunk_id"].tolist()
    assert len(sampled) == 2
    # people: c0 -> 1 (model said 2), c1 -> 0 (model said 1), first sampled 0 -> 3
    truth = {"c0": 1, "c1": 0, sampled[0]: 3, sampled[1]: 0}
    key = triage.merge_key(q, _people_for(q, truth), model_grader="llm", people_grader="ann")
    assert list(key.columns) == TRIAGE_KEY
    expected = {c: (truth[c], "people", "ann") if c in truth else (0, "model", "llm")
                for c in ["c0", "c1", "c2", "c3", "c4", "c5"]}
    got = {r.chunk_id: (r.grade, r.source, r.grader) for r in key.itertuples()}
    assert got == expected
    assert key["chunk_id"].tolist() == sorted(expected)


def test_the_key_waits_for_the_people_queue():
    q = _queue()
    people = _people_for(q, {c: 1 for c in q["chunk_id"]}).iloc[1:]
    with pytest.raises(InputError, match=r"q1/c0: triage pair not graded by ann \(found 1 pair "
                                         r"owed\)"):
        triage.merge_key(q, people, model_grader="llm", people_grader="ann")
    assert triage.owed_pairs(q, people).to_dict("records") == [
        {"query_id": "q1", "chunk_id": "c0"}]


# --- the miss rate -----------------------------------------------------------------------


def test_wilson_interval_by_hand_and_against_statsmodels():
    # k = 2, n = 8, z = 1.959964: centre (0.25 + z^2/16) / (1 + z^2/8) = 0.331102,
    # half z / (1 + z^2/8) * sqrt(0.25 * 0.75 / 8 + z^2 / 256) = 0.259624
    low, high = triage.wilson_interval(2, 8)
    assert low == pytest.approx(0.331102 - 0.259624, abs=2e-6)
    assert high == pytest.approx(0.331102 + 0.259624, abs=2e-6)
    for k, n, level in [(0, 5, 0.95), (5, 5, 0.95), (3, 40, 0.9), (17, 101, 0.99)]:
        ref = proportion_confint(k, n, alpha=1 - level, method="wilson")
        assert triage.wilson_interval(k, n, level=level) == pytest.approx(ref, abs=1e-12)


def test_wilson_interval_refuses_an_empty_sample():
    with pytest.raises(InputError, match="sampled >= 1"):
        triage.wilson_interval(0, 0)


def test_the_miss_rate_is_the_share_of_sampled_zeros_people_graded_relevant():
    # 10 zeros, zero_sample 0.5 -> 5 sampled; people grade 2 of them relevant -> 2/5
    q = triage.select_for_people(_model([0] * 10 + [2]), relevant_min=1, zero_sample=0.5,
                                 seed=2)
    sampled = q[(q["stratum"] == "zero") & q["selected"]]["chunk_id"].tolist()
    grades = {c: 0 for c in q["chunk_id"]} | {sampled[0]: 1, sampled[3]: 2}
    rate = triage.miss_rate(q, _people_for(q, grades), relevant_min=1)
    assert (rate.model_relevant, rate.model_zeros, rate.sampled, rate.missed,
            rate.unsampled) == (1, 10, 5, 2, 5)
    assert rate.estimate == 0.4
    assert (rate.low, rate.high) == pytest.approx(proportion_confint(2, 5, method="wilson"))
    assert rate.hidden_low == pytest.approx(5 * rate.low)
    assert "0.400" in rate.line() and "5 unsampled 0s model-judged" in rate.line()


def test_the_miss_rate_is_undefined_when_no_zero_was_graded():
    q = triage.select_for_people(_model([1, 2]), relevant_min=1, zero_sample=0.5, seed=1)
    rate = triage.miss_rate(q, _people_for(q, {"c0": 1, "c1": 1}), relevant_min=1)
    assert rate.estimate is None and rate.low is None and "undefined" in rate.line()


def _simulate(seed, *, n_pairs=300, zero_share=0.6, true_miss=0.12, false_alarm=0.1):
    """A seeded simulated model grader against a known truth: the model grades a share
    ``zero_share`` of pairs 0, and each of its 0s hides a relevant pair with probability
    ``true_miss`` (the known miss rate on 0s); ``false_alarm`` of its relevant grades are 0s
    in truth."""
    rng = np.random.default_rng(seed)
    model_zero = rng.random(n_pairs) < zero_share
    truth = np.where(model_zero, (rng.random(n_pairs) < true_miss) * rng.integers(1, 4, n_pairs),
                     np.where(rng.random(n_pairs) < false_alarm, 0,
                              rng.integers(1, 4, n_pairs)))
    model = np.where(model_zero, 0, rng.integers(1, 4, n_pairs))
    ids = [f"c{i:03d}" for i in range(n_pairs)]
    frame = pd.DataFrame({"query_id": "q", "chunk_id": ids, "grade": model})
    return frame, dict(zip(ids, truth.tolist()))


def test_the_miss_rate_interval_covers_the_simulated_models_true_rate_in_90_percent_of_seeds():
    covered = 0
    for seed in range(200):
        model, truth = _simulate(seed)
        q = triage.select_for_people(model, relevant_min=1, zero_sample=0.4, seed=seed)
        rate = triage.miss_rate(q, _people_for(q, truth), relevant_min=1, level=0.95)
        covered += rate.low <= 0.12 <= rate.high
    assert covered / 200 >= 0.90


def test_the_design_record_holds_the_counts_and_the_note():
    q = _queue()
    rate = triage.miss_rate(q, _people_for(q, {c: 0 for c in q["chunk_id"]}), relevant_min=1)
    rec = triage.design_record(model_grader="llm", people_grader="ann", zero_sample=0.5,
                               seed=7, round=1, rate=rate)
    assert rec["counts"] == {"model_relevant": 2, "model_zeros": 4, "sampled_zeros": 2,
                             "unsampled_zeros": 2}
    assert rec["miss_rate"]["estimate"] == 0.0 and rec["note"] == triage.MODEL_JUDGED_NOTE
    assert math.isclose(rec["miss_rate"]["high"], proportion_confint(0, 2, method="wilson")[1])


# --- params ------------------------------------------------------------------------------


def _params(**change):
    raw = {"paths": {}, "seed": 1, "grading": {"mode": "triage", "key_grader": "ann"},
           "graders": {"llm": {"role": "triage", "kind": "model"},
                       "ann": {"role": "grader", "kind": "human"}},
           "triage": {"zero_sample": 0.25}}
    for k, v in change.items():
        if v is None:
            raw.pop(k)
        else:
            raw[k] = v
    return raw


def test_triage_params_name_the_triage_grader():
    p = parse_params(_params())
    assert p.grading.mode == "triage" and p.triage_grader_name() == "llm"
    assert p.triage.zero_sample == 0.25 and p.triage.level == 0.95
    assert parse_params({"paths": {}}).grading.mode == "single"


@pytest.mark.parametrize("value", [0, 1.01, -1])
def test_triage_zero_sample_outside_zero_one_is_refused_in_params(value):
    with pytest.raises(InputError) as e:
        parse_params(_params(triage={"zero_sample": value}), source="exp/params.yaml")
    assert str(e.value) == (f"exp/params.yaml: triage.zero_sample: must be a number in "
                            f"(0, 1] (found {value})")


def test_triage_mode_without_a_triage_grader_is_refused():
    no_grader = _params(graders={"ann": {"role": "grader", "kind": "human"}})
    with pytest.raises(InputError) as e:
        parse_params(no_grader, source="exp/params.yaml")
    assert str(e.value) == ("exp/params.yaml: grading.mode is triage but no grader has role "
                            "triage: declare the model grader under graders with role: triage")
    wrong_role = _params(triage={"zero_sample": 0.25, "grader": "ann"})
    with pytest.raises(InputError, match="triage.grader ann must be a grader with role triage "
                                         r"\(found role grader\)"):
        parse_params(wrong_role)
    with pytest.raises(InputError, match="no `triage` section"):
        parse_params(_params(triage=None))
    two = _params(graders={"a": {"role": "triage", "kind": "model"},
                           "b": {"role": "triage", "kind": "model"},
                           "ann": {"role": "grader", "kind": "human"}})
    with pytest.raises(InputError, match=r"several graders have role triage \(a, b\)"):
        parse_params(two)


# --- the queue file, pending work and the report -------------------------------------------


def test_a_queue_read_back_as_text_gets_its_dtypes_and_a_bad_row_is_named():
    q = _queue()
    text = q.astype(str)
    back = triage.typed_queue(text, path="data/private/triage-queue.tsv")
    pd.testing.assert_frame_equal(back, q)
    bad = text.copy()
    bad.loc[2, "selected"] = "yes"
    with pytest.raises(InputError) as e:
        triage.typed_queue(bad, path="data/private/triage-queue.tsv")
    assert str(e.value).startswith("data/private/triage-queue.tsv:4: triage queue row is not")


def test_pending_work_in_triage_mode_owes_the_pool_to_the_model_and_the_queue_to_people():
    from relgrade.protocol.bank import pending_work

    pool = pd.DataFrame({"query_id": ["q", "q", "q", "r"], "chunk_id": ["a", "b", "c", "d"]})
    # the model graded a and b; people's queue is a and d; r is audited
    bank = pd.DataFrame({"query_id": ["q", "q"], "chunk_id": ["a", "b"],
                         "grader": ["llm", "llm"], "content_sha256": ["A", "B"],
                         "intent_sha256": ["i", "i"], "rubric_sha256": ["r", "r"]})
    queue = pd.DataFrame({"query_id": ["q", "r"], "chunk_id": ["a", "d"]})
    owed = pending_work(pool, bank, key_grader="ann", auditor="bob", audit_ids=["r"],
                        content=pd.Series({"a": "A", "b": "B", "c": "C", "d": "D"}),
                        intents=pd.Series({"q": "i", "r": "i"}), rubric_sha256="r",
                        triage_grader="llm", key_pairs=queue)
    assert owed.values.tolist() == [["ann", "q", "a", "new"], ["ann", "r", "d", "new"],
                                    ["llm", "q", "c", "new"], ["bob", "r", "d", "audit"],
                                    ["llm", "r", "d", "new"]]


def test_the_decision_report_puts_the_miss_rate_and_note_after_the_verdicts_only_in_triage():
    from relgrade.evaluation import decision
    from tests.test_decision import P, report

    plain = decision.to_markdown(decision.build_decision(report(), primary=P))
    assert "Triage key" not in plain and "miss rate" not in plain
    q = _queue()
    sampled = q[(q["stratum"] == "zero") & q["selected"]]["chunk_id"].tolist()
    rate = triage.miss_rate(q, _people_for(q, {c: 0 for c in q["chunk_id"]} | {sampled[0]: 1}),
                            relevant_min=1)
    design = triage.design_record(model_grader="llm", people_grader="ann", zero_sample=0.5,
                                  seed=7, round=1, rate=rate)
    # 1 of 2 sampled 0s missed: Wilson 95% (0.0945, 0.9055) as statsmodels gives it
    lo, hi = proportion_confint(1, 2, method="wilson")
    md = decision.to_markdown(decision.build_decision(report() | {"triage": design},
                                                      primary=P))
    line = (f"- Model miss rate on its 0s: 0.500 (95% Wilson interval {lo:.3f} to {hi:.3f}): "
            "1 of 2 sampled 0s graded relevant by people; 2 unsampled 0s are model-judged.")
    assert line in md and f"- {triage.MODEL_JUDGED_NOTE}" in md
    assert md.index("## Verdicts") < md.index(line) < md.index("## Judged@k")
    html = decision.to_html(decision.build_decision(report() | {"triage": design}, primary=P))
    assert '<p id="triage">Triage key:</p>' in html


def test_triage_refuses_the_model_as_key_grader_and_a_partial_regrade():
    with pytest.raises(InputError, match="grading.key_grader llm is the triage grader"):
        parse_params(_params(grading={"mode": "triage", "key_grader": "llm"}))
    with pytest.raises(InputError, match="grading.regrade relevant cannot be combined with "
                                         "grading.mode triage"):
        parse_params(_params(grading={"mode": "triage", "key_grader": "ann",
                                      "regrade": "relevant"}))
