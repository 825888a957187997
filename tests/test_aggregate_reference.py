"""Majority vote and Dawid-Skene checked against crowd-kit, an independent implementation.

crowd-kit (Toloka) implements Dawid & Skene's EM with pandas joins and group-bys; relgrade's
is vectorised with numpy. Run for the same number of EM iterations from the same start (the
vote shares), the two must give the same posteriors, class priors and confusion matrices.
"""

from __future__ import annotations

import warnings

import numpy as np
import pandas as pd
import pytest
from crowdkit.aggregation import DawidSkene, MajorityVote

from relgrade.raters.aggregate import dawid_skene, majority

S = [0, 1, 2]


def simulated(seed, *, pairs=300, error_rates=(0.2, 0.4, 0.6, 0.8), coverage=0.8):
    """Raters of varied quality; each pair is graded by a random ~80% of them."""
    rng = np.random.default_rng(seed)
    n_raters = len(error_rates)
    truth = rng.integers(0, 3, pairs)
    chunk = np.repeat([f"c{i:04d}" for i in range(pairs)], n_raters)
    grader = np.tile([f"r{j}" for j in range(n_raters)], pairs)
    grade = np.repeat(truth, n_raters)
    wrong = rng.random(pairs * n_raters) < np.tile(error_rates, pairs)
    grade[wrong] = rng.integers(0, 3, int(wrong.sum()))
    keep = rng.random(pairs * n_raters) < coverage
    return pd.DataFrame({"query_id": "q1", "chunk_id": chunk, "grader": grader,
                         "grade": grade})[keep].reset_index(drop=True)


def crowdkit_table(grades):
    return grades.rename(columns={"chunk_id": "task", "grader": "worker", "grade": "label"})[
        ["task", "worker", "label"]]


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_dawid_skene_equals_crowdkit_after_the_same_em_iterations(seed):
    grades = simulated(seed)
    ours = dawid_skene(grades, scale=S, max_iter=40, tol=0.0)
    assert ours.iterations == 40  # tol 0: stops only if the likelihood stops rising
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ref = DawidSkene(n_iter=40, tol=-np.inf).fit(crowdkit_table(grades))
    probas = ref.probas_.sort_index()[S]
    assert probas.index.tolist() == ours.labels["chunk_id"].tolist()
    np.testing.assert_allclose(ours.posteriors.to_numpy(), probas.to_numpy(), atol=1e-9)
    np.testing.assert_allclose(ours.priors.to_numpy(), ref.priors_.sort_index()[S].to_numpy(),
                               atol=1e-12)
    for worker in sorted(grades["grader"].unique()):
        # crowd-kit: rows (worker, grade given), columns true grade; relgrade: the transpose.
        theirs = ref.errors_.loc[worker].sort_index().loc[S, S].to_numpy()
        np.testing.assert_allclose(ours.confusion.loc[worker].to_numpy(), theirs.T, atol=1e-9)
    assert ours.labels["grade"].tolist() == ref.labels_.sort_index().tolist()


def test_dawid_skene_beats_majority_vote_on_raters_of_mixed_quality():
    # Not a property of one implementation: both find more true grades than the vote.
    rng = np.random.default_rng(8)
    truth = pd.Series(rng.integers(0, 3, 2000), index=[f"c{i:04d}" for i in range(2000)])
    rows = []
    for j, err in enumerate((0.1, 0.15, 0.7, 0.85, 0.85)):
        given = truth.to_numpy().copy()
        wrong = rng.random(len(given)) < err
        given[wrong] = rng.integers(0, 3, int(wrong.sum()))
        rows.append(pd.DataFrame({"query_id": "q1", "chunk_id": truth.index, "grader": f"r{j}",
                                  "grade": given}))
    grades = pd.concat(rows, ignore_index=True)
    ds = dawid_skene(grades, scale=S).labels.set_index("chunk_id")["grade"]
    mv = majority(grades, scale=S).set_index("chunk_id")["grade"]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ref = DawidSkene(n_iter=100).fit_predict(crowdkit_table(grades))
    ds_hits, mv_hits = (ds == truth).mean(), (mv == truth).mean()
    assert ds_hits > mv_hits + 0.03
    assert (ds == ref.sort_index()).mean() > 0.99


@pytest.mark.parametrize("seed", [0, 1])
def test_majority_equals_crowdkit_majority_vote_wherever_there_is_no_tie(seed):
    grades = simulated(seed, error_rates=(0.3, 0.5, 0.5, 0.7, 0.2))
    ours = majority(grades, scale=S).set_index("chunk_id")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        shares = MajorityVote().fit_predict_proba(crowdkit_table(grades)).sort_index()
        labels = MajorityVote().fit_predict(crowdkit_table(grades)).sort_index()
    shares = shares.reindex(columns=S, fill_value=0.0).fillna(0.0)
    top = shares.to_numpy().max(axis=1)
    untied = (shares.to_numpy() == top[:, None]).sum(axis=1) == 1
    assert untied.sum() > 100
    assert ours["grade"].to_numpy()[untied].tolist() == labels.to_numpy()[untied].tolist()
    # the recorded grade's share of votes is crowd-kit's probability of that grade
    picked = shares.to_numpy()[np.arange(len(shares)), ours["grade"].to_numpy()]
    np.testing.assert_allclose(ours["agreement"].to_numpy(), picked)


@pytest.mark.filterwarnings("ignore")  # crowd-kit's own pandas deprecation warnings
def test_with_repeats_each_label_counts_as_crowd_kit_counts_it():
    # Dawid & Skene's 1979 patients (tests/test_aggregate_repeats.py), observer 1 rating
    # each patient three times: crowd-kit takes every row as one label
    from tests.test_aggregate_repeats import patients

    grades = patients()
    ours = dawid_skene(grades, scale=[1, 2, 3, 4], repeats=True)
    table = pd.DataFrame({"task": grades["query_id"], "worker": grades["grader"],
                          "label": grades["grade"]})
    ref = DawidSkene(n_iter=20, tol=0.0).fit(table)
    assert np.abs(ref.priors_.reindex([1, 2, 3, 4]).to_numpy()
                  - ours.priors.to_numpy()).max() < 1e-3
