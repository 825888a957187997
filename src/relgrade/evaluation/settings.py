"""How arms are compared: the settings of a comparison and the pairs it makes.

:class:`Settings` holds the experiment's ``seed`` and its ``metrics`` section (resamples,
levels, baseline, design) as one frozen value, built from the params by
:meth:`relgrade.experiment.params.Params.compare_settings`; :func:`design_pairs` turns the
design into the list of comparisons made.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from relgrade.errors import InputError


@dataclass(frozen=True)
class Settings:
    """How the comparison is run (params ``seed`` and ``metrics``).

    Attributes
    ----------
    seed : int
        Experiment seed.
    n_resamples : int
        Bootstrap resamples (``metrics.bootstrap``).
    n_permutations : int
        Sign-flip patterns of the Monte Carlo randomization test (``metrics.permutations``).
    level : float
        Confidence level (``metrics.level``).
    method : {"auto", "t", "bootstrap-t", "bca", "percentile"}
        Interval method (``metrics.interval``); ``"auto"`` is relgrade's rule (see
        :func:`relgrade.evaluation.stats.difference_interval`).
    alpha : float
        Two-sided significance level applied to Holm-adjusted p-values (``metrics.alpha``).
    power : float
        Power for the query-count estimate (``metrics.power``).
    min_relative_change : float
        Relative change the power estimate targets (``metrics.min_relative_change``).
    baseline : str or None
        Reference arm (``metrics.baseline``).
    pairs : {"baseline", "all"}
        Each arm against the baseline, or every pair (``metrics.pairs``).
    test : {"mean", "sign-flip"}
        The verdict's test, whose p-values Holm adjusts (``metrics.test``): ``"mean"``
        tests that the mean difference is 0 (:func:`relgrade.evaluation.stats.mean_test`);
        ``"sign-flip"`` that every query's difference is symmetric about 0 (the
        randomization test, valid for the mean only under that assumption).
    power_min_nonzero : int
        Non-zero differences (queries off the most common value, for an arm) the spread
        must rest on before a power or queries-needed figure is given
        (``metrics.power_min_nonzero``).
    """

    seed: int
    n_resamples: int = 10_000
    n_permutations: int = 10_000
    level: float = 0.95
    method: str = "auto"
    alpha: float = 0.05
    power: float = 0.8
    min_relative_change: float = 0.02
    baseline: str | None = None
    pairs: str = "baseline"
    test: str = "mean"
    power_min_nonzero: int = 10

    def __post_init__(self):
        def bad(key, rule, value):
            raise InputError(rule, item=f"metrics.{key}", found=repr(value))
        for key in ("n_resamples", "n_permutations"):
            v = getattr(self, key)
            if isinstance(v, bool) or not isinstance(v, (int, np.integer)) or v < 1:
                bad({"n_resamples": "bootstrap", "n_permutations": "permutations"}[key],
                    "must be a positive integer", v)
        for key in ("level", "alpha", "power"):
            v = getattr(self, key)
            if not isinstance(v, (int, float)) or not 0 < v < 1:
                bad(key, "must lie between 0 and 1", v)
        if not isinstance(self.min_relative_change, (int, float)) or self.min_relative_change <= 0:
            bad("min_relative_change", "must be greater than 0", self.min_relative_change)
        if self.method not in ("auto", "t", "bootstrap-t", "bca", "percentile"):
            bad("interval", "must be auto, t, bootstrap-t, bca or percentile", self.method)
        if self.test not in ("mean", "sign-flip"):
            bad("test", "must be mean or sign-flip", self.test)
        v = self.power_min_nonzero
        if isinstance(v, bool) or not isinstance(v, (int, np.integer)) or v < 2:
            bad("power_min_nonzero", "must be an integer of at least 2", v)
        if self.pairs not in ("baseline", "all"):
            bad("pairs", "must be baseline or all", self.pairs)
        if self.pairs == "baseline" and not self.baseline:
            bad("baseline", "must name an arm when metrics.pairs is baseline", self.baseline)

    def to_dict(self) -> dict:
        return {"seed": self.seed, "bootstrap": self.n_resamples,
                "permutations": self.n_permutations, "level": self.level,
                "interval": self.method, "alpha": self.alpha, "power": self.power,
                "min_relative_change": self.min_relative_change, "baseline": self.baseline,
                "pairs": self.pairs, "test": self.test,
                "power_min_nonzero": self.power_min_nonzero}


def design_pairs(arms: Sequence[str], *, baseline: str | None, mode: str) -> list[tuple[str, str]]:
    """The comparisons the experiment makes, as (A, B) pairs read "A against B".

    Parameters
    ----------
    arms : sequence of str
    baseline : str or None
        Reference arm (params ``metrics.baseline``).
    mode : {"baseline", "all"}
        ``"baseline"``: every other arm against the baseline, ``(arm, baseline)``, arms
        sorted; ``"all"``: every pair of sorted arms ``(a, b)`` with ``a < b``.

    Raises
    ------
    InputError
        The baseline is not one of the arms.
    """
    arms = sorted(set(arms))
    if mode == "baseline":
        if baseline not in arms:
            raise InputError("metrics.baseline is not one of the arms",
                             found=repr(baseline), fix=f"use one of {', '.join(arms)}")
        return [(a, baseline) for a in arms if a != baseline]
    return [(a, b) for i, a in enumerate(arms) for b in arms[i + 1:]]
