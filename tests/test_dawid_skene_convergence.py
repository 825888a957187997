"""Dawid-Skene stops where EM has converged: the rule is on the parameters, not the likelihood.

The data: 40 pairs, 4 raters of accuracy 0.4-0.8, true grades drawn 0.4/0.3/0.3 (seed 29).
On it a likelihood rule (stop when the mean log-likelihood per grade rises by less than
1e-6, relgrade's old rule; crowd-kit's default is the same rule at 1e-5) stops with priors a
few hundredths from EM's fixed point and reports convergence.
"""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest
from click.testing import CliRunner

from relgrade.cli import main
from relgrade.raters.aggregate import MAX_ITER, TOL, dawid_skene

S = [0, 1, 2]


def slow_em_grades() -> pd.DataFrame:
    rng = np.random.default_rng(29)
    truth = rng.choice(3, size=40, p=[0.4, 0.3, 0.3])
    rows = []
    for i, t in enumerate(truth):
        for r in range(4):
            acc = rng.uniform(0.4, 0.8)
            g = t if rng.random() < acc else rng.integers(0, 3)
            rows.append(("q", f"c{i:03d}", f"r{r}", int(g)))
    return pd.DataFrame(rows, columns=["query_id", "chunk_id", "grader", "grade"])


def _crowdkit_errors(confusion: pd.DataFrame) -> pd.DataFrame:
    # relgrade: rows (grader, true grade), columns given grade; crowd-kit: rows (worker,
    # given label), columns true label
    long = confusion.stack().rename("p").reset_index()
    err = long.pivot_table(index=["grader", "grade"], columns="true_grade", values="p")
    err.index.names = ["worker", "label"]
    err.columns.name = None
    return err


def test_dawid_skene_default_stops_at_the_fixed_point_crowdkit_confirms():
    crowdkit = pytest.importorskip("crowdkit.aggregation")
    grades = slow_em_grades()
    ours = dawid_skene(grades, scale=S)
    assert ours.converged and ours.iterations < MAX_ITER
    data = grades.rename(columns={"chunk_id": "task", "grader": "worker", "grade": "label"})[
        ["task", "worker", "label"]]
    # crowd-kit's EM started from our confusion matrices moves nowhere in 30 iterations
    ref = crowdkit.DawidSkene(n_iter=30, tol=-np.inf, initial_error_strategy="assign").fit(
        data, initial_error=_crowdkit_errors(ours.confusion))
    np.testing.assert_allclose(ours.priors.to_numpy(), ref.priors_.sort_index()[S].to_numpy(),
                               atol=1e-5)
    # and EM run far longer with no stopping rule ends where the default stopped
    far = dawid_skene(grades, scale=S, tol=0.0, max_iter=20_000)
    np.testing.assert_allclose(ours.priors.to_numpy(), far.priors.to_numpy(), atol=1e-3)


def test_a_likelihood_stopping_rule_stops_far_from_the_fixed_point_on_the_same_data():
    crowdkit = pytest.importorskip("crowdkit.aggregation")
    grades = slow_em_grades()
    data = grades.rename(columns={"chunk_id": "task", "grader": "worker", "grade": "label"})[
        ["task", "worker", "label"]]
    by_likelihood = crowdkit.DawidSkene().fit(data)        # tol 1e-5 on the mean ELBO
    far = dawid_skene(grades, scale=S, tol=0.0, max_iter=20_000)
    gap = np.abs(by_likelihood.priors_.sort_index()[S].to_numpy() - far.priors.to_numpy())
    assert gap.max() > 0.03


def test_dawid_skene_reports_no_convergence_when_max_iter_comes_first():
    result = dawid_skene(slow_em_grades(), scale=S, max_iter=5)
    assert (result.iterations, result.converged) == (5, False)
    assert TOL == 1e-7


def test_aggregate_cli_takes_tol_and_max_iter_and_reports_them(tmp_path):
    grades = slow_em_grades()
    path = tmp_path / "grades.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in grades.to_dict("records")))
    runner = CliRunner()
    out = runner.invoke(main, ["aggregate", "--grades", str(path), "--method", "dawid-skene",
                               "--max-iter", "5", "--tol", "0"])
    assert out.exit_code == 0, out.output
    assert "stopped at --max-iter 5 without converging to tol 0" in out.output
    doc = json.loads(runner.invoke(main, ["aggregate", "--grades", str(path), "--method",
                                          "dawid-skene", "--json"]).output)
    ds = doc["dawid_skene"]
    assert ds["converged"] and ds["tol"] == 1e-7 and ds["max_iter"] == 2000
    far = dawid_skene(grades, scale=S, tol=0.0, max_iter=20_000)
    np.testing.assert_allclose([ds["priors"][str(g)] for g in S], far.priors.to_numpy(),
                               atol=1e-3)
