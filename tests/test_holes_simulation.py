"""Coarse properties of the new-arm simulation (benchmarks/sim_holes.py) on 40 replicates:
the corrected interval covers where the model-only one does not, and the transport check
refuses a 0.3-grade shift of the model's bias far more often than an equal bias."""

from __future__ import annotations

import gc
import importlib.util
from pathlib import Path

import pytest

SIM = Path(__file__).resolve().parents[1] / "benchmarks" / "sim_holes.py"


@pytest.fixture(scope="module")
def sim():
    spec = importlib.util.spec_from_file_location("sim_holes", SIM)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _run(sim, shift):
    setting = {"n_queries": 200, "n_docs": 60, "fraction": 0.1, "bias_old": 0.5,
               "bias_new": 0.5 + shift, "alpha": 0.05, "tolerance": 0.1}
    # as the script does: statsmodels' Holm runs gc.collect() on every family
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(gc, "collect", lambda generation=2: 0)
        return sim.run(setting, 40, 20261206)


def test_the_corrected_interval_covers_where_model_only_filling_does_not(sim):
    res = _run(sim, 0.0)
    assert res["ppi_coverage"] >= 0.9 and res["model_only_coverage"] <= 0.2
    assert 0.25 < res["hole_rate"] < 0.45
    assert res["holes_human_graded"] == pytest.approx(0.1, abs=0.02)
    assert abs(res["bias_difference_population"]) < 0.02


def test_the_transport_check_refuses_a_shift_and_rarely_an_equal_bias(sim):
    equal, shifted = _run(sim, 0.0), _run(sim, 0.3)
    assert shifted["bias_difference_population"] == pytest.approx(0.3, abs=0.02)
    assert equal["transport_refused"] <= 0.15 and shifted["transport_refused"] >= 0.8
