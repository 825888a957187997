"""Coarse properties of the known-truth simulation (benchmarks/sim_ppi.py) on 40 replicates:
the prediction-powered intervals cover far more often than the model-only ones, are never
much wider than the human-only ones, and the audit sees the affinity arm."""

from __future__ import annotations

import gc
import importlib.util
import sys
from pathlib import Path

import pytest

SIM = Path(__file__).resolve().parents[1] / "benchmarks" / "sim_ppi.py"


@pytest.fixture(scope="module")
def summary():
    spec = importlib.util.spec_from_file_location("sim_ppi", SIM)
    sim = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = sim        # dataclasses look their module up while executing it
    try:
        spec.loader.exec_module(sim)
    finally:
        del sys.modules[spec.name]
    # as the script does: statsmodels' Holm runs gc.collect() on every family, most of the
    # time of 40 replicates, and no number depends on it
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(gc, "collect", lambda generation=2: 0)
        return sim.run(sim.Setting(), replicates=40, seed=20261201, budget=False)


def test_ppi_covers_far_more_often_than_the_model_only_interval(summary):
    for kind in ("jackknife", "regression"):
        for label in ("arm", "diff"):
            ppi = summary[f"{label} coverage {kind} ppi++ (mean)"]
            naive = summary[f"{label} coverage {kind} model-only (mean)"]
            assert ppi >= 0.85 and naive <= 0.5 and ppi - naive >= 0.4


def test_the_regression_interval_is_wider_than_the_plug_in_one_it_corrects(summary):
    # it counts the tuning of lambda on the sample: never narrower than ppi-python's
    for label in ("arm", "diff"):
        assert (summary[f"{label} width ppi++/human-only regression mean"]
                > summary[f"{label} width ppi++/human-only normal mean"])
        assert (summary[f"{label} coverage regression ppi++ (mean)"]
                >= summary[f"{label} coverage normal ppi++ (mean)"])


def test_ppi_interval_is_narrower_than_human_only_on_average(summary):
    assert summary["arm width ppi++/human-only normal max"] <= 1.0 + 1e-9
    assert summary["arm width ppi++/human-only t max"] <= 1.0 + 1e-9
    assert summary["arm width ppi++/human-only regression mean"] < 0.95


def test_the_jackknife_interval_is_never_wider_than_human_only_and_narrower_on_average(summary):
    for label in ("arm", "diff"):
        assert summary[f"{label} width ppi++/human-only jackknife max"] <= 1.0 + 1e-12
        assert summary[f"{label} width ppi++/human-only jackknife share > 1"] == 0.0
        # one lambda for all rows carries less noise than one per row: narrower than
        # the regression interval on average
        assert (summary[f"{label} width ppi++/human-only jackknife mean"]
                < summary[f"{label} width ppi++/human-only regression mean"])


def test_holm_on_ppi_rarely_separates_the_equal_arms_unlike_model_only(summary):
    for kind in ("jackknife", "regression"):
        assert summary[f"false significance a3 vs a4 after Holm, {kind} ppi++"] <= 0.1
        assert summary[f"false significance a3 vs a4 after Holm, {kind} model-only"] >= 0.5


def test_audit_flags_the_affinity_arm(summary):
    assert summary["audit flags family affinity of a3"] >= 0.8


@pytest.fixture(scope="module")
def favoured():
    spec = importlib.util.spec_from_file_location("sim_ppi", SIM)
    sim = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = sim
    try:
        spec.loader.exec_module(sim)
    finally:
        del sys.modules[spec.name]
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(gc, "collect", lambda generation=2: 0)
        return sim.run(sim.Setting(favoured=1.0), replicates=40, seed=20261201, budget=False)


def test_a_judge_favoured_equal_pair_falls_back_towards_human_only(favoured):
    # the model sees a8 ahead of its truly equal twin on every replicate; PPI++ with the
    # difference's own lambda (small: the model barely tracks people on this pair) does not
    assert favoured["favoured pair a8/a9: mean R2 model vs people"] < 0.15
    assert favoured["favoured pair a8/a9: significant after Holm, jackknife model-only"] >= 0.9
    assert favoured["favoured pair a8/a9: significant after Holm, jackknife ppi++"] <= 0.1
    assert favoured["favoured pair a8/a9: interval covers 0, jackknife ppi++"] >= 0.85
    assert favoured["favoured pair a8/a9: mean lambda, jackknife ppi++"] < 0.3
    assert favoured["diff width ppi++/human-only jackknife max"] <= 1.0 + 1e-12
