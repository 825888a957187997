"""The robustness battery's statistics: flip rates, variance components, a widened interval.

Three functions over long tables of a judge's answers (see docs/judges.md, "The robustness
battery"):

* :func:`flip_rate`: per probe, the share of pairs whose grade changes and the mean signed
  shift, with a percentile interval from a bootstrap over queries (the audit's unit);
* :func:`variance_components`: the pair x prompt x sample decomposition of the grades
  under the paraphrases, by the ANOVA (expected mean squares) estimator of a balanced
  two-way crossed random-effects design with replication;
* :func:`paraphrase_widened`: a prediction-powered estimate's interval with the paraphrase
  component's variance of the mean of the model's predictions added.
"""

from __future__ import annotations

from typing import Mapping

import numpy as np
import pandas as pd

from relgrade.errors import InputError

#: The columns of an answers table.
ANSWERS = ("query_id", "chunk_id", "base", "grade")

#: The columns of a decomposition table.
CELLS = ("query_id", "chunk_id", "prompt", "sample", "grade")


def _require(table: pd.DataFrame, columns, what: str) -> None:
    missing = [c for c in columns if c not in table.columns]
    if missing:
        raise InputError(f"{what} lacks columns", found=", ".join(missing))
    if table.empty:
        raise InputError(f"{what} has no row: no pair was answered")


def flip_rate(answers: pd.DataFrame, *, rng: np.random.Generator, resamples: int = 1000,
              level: float = 0.95) -> dict:
    """The share of pairs whose grade changes under a probe, and the mean signed shift.

    Parameters
    ----------
    answers : pandas.DataFrame
        One row per answer under the probe: ``query_id``, ``chunk_id`` (str), ``base`` (int,
        the pair's grade of record), ``grade`` (int, the grade under the probe). A pair may
        have several rows (several paraphrases, several samples).
    rng : numpy.random.Generator
        Draws the bootstrap's query resamples.
    resamples : int, default 1000
        Bootstrap resamples, >= 1.
    level : float, default 0.95
        The intervals' level.

    Returns
    -------
    dict
        ``flip_rate`` and ``shift`` (floats), each with ``low``/``high`` (floats, None with
        one query) under ``flip_interval`` and ``shift_interval``; ``pairs``, ``queries``,
        ``answers`` (int); ``flipped_pairs`` (int, pairs with at least one changed grade).

    Raises
    ------
    InputError
        A column is missing or the table is empty.

    Notes
    -----
    Per pair ``i``, ``f_i`` is the share of its answers that differ from ``base`` and ``d_i``
    the mean of ``grade - base``; the flip rate is the mean of ``f_i`` over pairs, the
    shift the mean of ``d_i`` (each pair weighs the same). The interval resamples queries
    with replacement (the cluster bootstrap, Davison & Hinkley 1997, sec. 3.8), each
    resample's rate being the ratio of its queries' summed ``f_i`` to their pairs, and takes
    the ``(1 - level) / 2`` and ``(1 + level) / 2`` quantiles (numpy's linear rule).
    """
    _require(answers, ANSWERS, "the probe's answers")
    a = answers.assign(flip=(answers["grade"] != answers["base"]).astype(float),
                       diff=(answers["grade"] - answers["base"]).astype(float))
    pairs = a.groupby(["query_id", "chunk_id"], sort=True).agg(
        flip=("flip", "mean"), diff=("diff", "mean"))
    per_q = pairs.groupby(level="query_id", sort=True).agg(
        flip=("flip", "sum"), diff=("diff", "sum"), n=("flip", "size"))
    n_pairs = int(len(pairs))
    out = {"flip_rate": float(pairs["flip"].mean()), "shift": float(pairs["diff"].mean()),
           "pairs": n_pairs, "queries": int(len(per_q)), "answers": int(len(a)),
           "flipped_pairs": int((pairs["flip"] > 0).sum())}
    if len(per_q) < 2:
        out["flip_interval"] = {"low": None, "high": None}
        out["shift_interval"] = {"low": None, "high": None}
        return out
    q = len(per_q)
    counts = rng.multinomial(q, np.full(q, 1.0 / q), size=int(resamples)).astype(float)
    n = counts @ per_q["n"].to_numpy(float)
    tails = [(1 - level) / 2, (1 + level) / 2]
    for name, col in (("flip_interval", "flip"), ("shift_interval", "diff")):
        stat = (counts @ per_q[col].to_numpy(float)) / n
        low, high = np.quantile(stat, tails)
        out[name] = {"low": float(low), "high": float(high)}
    return out


def variance_components(cells: pd.DataFrame) -> dict:
    """The pair x prompt x sample decomposition of a judge's grades under paraphrases.

    Parameters
    ----------
    cells : pandas.DataFrame
        One row per answer: ``query_id``, ``chunk_id`` (str), ``prompt`` (the paraphrase's
        number), ``sample`` (int), ``grade`` (int or float). Pairs lacking an answer for some
        prompt and sample are left out, so the design is balanced (the count is returned).

    Returns
    -------
    dict
        ``pair``, ``prompt``, ``pair_x_prompt``, ``residual`` (floats, grade², each clipped at
        0; ``pair_x_prompt`` holds the interaction and the residual together and
        ``residual`` is None with one sample), the same unclipped under ``raw``, the mean
        squares under ``mean_squares``, and ``pairs``, ``prompts``, ``samples``,
        ``incomplete_pairs`` (int).

    Raises
    ------
    InputError
        A column is missing, or fewer than 2 pairs or 2 prompts remain.

    Notes
    -----
    The model is ``y_iks = mu + a_i + b_k + (ab)_ik + e_iks`` with pairs ``i`` (``A`` of
    them), prompts ``k`` (``B``), samples ``s`` (``n``), all effects random. With the
    balanced sums of squares and ``MS = SS / df``, the expected mean squares give the
    ANOVA estimators (Searle, Casella & McCulloch 1992, *Variance Components*, sec. 4.6;
    the p x i x r design of generalizability theory, Brennan 2001)::

        residual      = MS_E                              (n > 1)
        pair_x_prompt = (MS_AB - MS_E) / n                (n > 1; MS_AB when n = 1)
        prompt        = (MS_B - MS_AB) / (A n)
        pair          = (MS_A - MS_AB) / (B n)

    ``prompt`` is the paraphrase component: the variance of a prompt's mean grade over the
    pairs, the part of a reworded template's effect that moves every pair together. The
    estimators are unbiased; a negative estimate is reported as 0 (its raw value kept).
    """
    _require(cells, CELLS, "the paraphrase answers")
    t = cells[list(CELLS)].copy()
    t["pair"] = list(zip(t["query_id"].astype(str), t["chunk_id"].astype(str)))
    prompts = sorted(t["prompt"].unique())
    samples = sorted(t["sample"].unique())
    full = len(prompts) * len(samples)
    per_pair = t.groupby("pair")[["prompt", "sample"]].apply(
        lambda g: len(set(zip(g["prompt"], g["sample"]))))
    dup = t.duplicated(["pair", "prompt", "sample"]).any()
    if dup:
        raise InputError("the paraphrase answers hold two answers for one pair, prompt and "
                         "sample")
    keep = per_pair[per_pair == full].index
    t = t[t["pair"].isin(set(keep))]
    A, B, n = len(keep), len(prompts), len(samples)
    if A < 2 or B < 2:
        raise InputError("the variance decomposition needs at least 2 pairs answered under "
                         "at least 2 paraphrases", found=f"{A} pairs, {B} paraphrases")
    y = t.sort_values(["pair", "prompt", "sample"])["grade"].to_numpy(float).reshape(A, B, n)
    m = y.mean()
    cell = y.mean(axis=2)
    mi, mk = cell.mean(axis=1), cell.mean(axis=0)
    ss_a = B * n * ((mi - m) ** 2).sum()
    ss_b = A * n * ((mk - m) ** 2).sum()
    ss_ab = n * ((cell - mi[:, None] - mk[None, :] + m) ** 2).sum()
    ss_e = ((y - cell[:, :, None]) ** 2).sum()
    ms_a, ms_b = ss_a / (A - 1), ss_b / (B - 1)
    ms_ab = ss_ab / ((A - 1) * (B - 1))
    ms_e = ss_e / (A * B * (n - 1)) if n > 1 else None
    raw = {"pair": (ms_a - ms_ab) / (B * n), "prompt": (ms_b - ms_ab) / (A * n),
           "pair_x_prompt": (ms_ab - ms_e) / n if n > 1 else ms_ab,
           "residual": ms_e}
    out = {k: None if v is None else max(0.0, float(v)) for k, v in raw.items()}
    out["raw"] = {k: None if v is None else float(v) for k, v in raw.items()}
    out["mean_squares"] = {"pair": float(ms_a), "prompt": float(ms_b),
                           "pair_x_prompt": float(ms_ab),
                           "residual": None if ms_e is None else float(ms_e)}
    out.update(pairs=A, prompts=B, samples=n, incomplete_pairs=int(len(per_pair) - A))
    return out


def prompt_variance_of_mean(components: Mapping, n_pairs: int) -> float:
    """The variance of the mean of a judge's grades over ``n_pairs`` pairs that comes from
    which paraphrase of the prompt it was asked with: ``prompt + pair_x_prompt / n_pairs``
    (grade², from :func:`variance_components`).

    Examples
    --------
    >>> prompt_variance_of_mean({"prompt": 0.04, "pair_x_prompt": 0.2}, 100)
    0.042
    """
    if n_pairs < 1:
        raise InputError("the mean of model predictions needs at least one pair",
                         found=str(n_pairs))
    return float(components["prompt"]) + float(components["pair_x_prompt"]) / n_pairs


def paraphrase_widened(estimate: float, se: float, *, lam: float, prompt_variance: float,
                       draws: int = 1, level: float = 0.95) -> dict:
    """A prediction-powered estimate's interval widened by the paraphrase component.

    Parameters
    ----------
    estimate, se : float
        The PPI++ estimate of a mean and its standard error (same units as the grades the
        components were measured on).
    lam : float
        The estimate's weight of the model term, in [0, 1].
    prompt_variance : float
        :func:`prompt_variance_of_mean` of the model's predictions over the pairs behind
        the model term (grade², >= 0).
    draws : {1, 2}, default 1
        Independent prompt draws behind the model's predictions: 1 when one judge identity
        graded every pair, the human sample's included; 2 when the sample's pairs were
        graded under another identity than the rest (then the prompt effect no longer
        cancels between ``mean(F)`` and ``mean(Yhat)``).
    level : float, default 0.95

    Returns
    -------
    dict
        ``estimate``, ``se`` (widened), ``low``, ``high``, ``added_variance`` (floats).

    Notes
    -----
    The model term ``lam * mean(F)`` rests on one prompt; another paraphrase would have
    moved it by a draw of variance ``lam^2 * prompt_variance``; with two identities, the
    difference of two draws, ``2 * lam^2 * prompt_variance``. Treating the draws as
    independent of the sampling error, the widened standard error is
    ``sqrt(se^2 + draws * lam^2 * prompt_variance)`` and the interval is
    ``estimate -/+ z_{(1 + level) / 2} * se_w``. With one identity the prompt's main effect
    enters ``mean(F)`` and ``mean(Yhat)`` alike and cancels: PPI++ is then valid for the
    prompt it was given, and the widening is a conservative margin for the prompt's
    choice (benchmarks/sim_probe.py measures both cases).

    Examples
    --------
    >>> r = paraphrase_widened(0.5, 0.03, lam=0.5, prompt_variance=0.0064)
    >>> round(r["se"], 4), round(r["added_variance"], 4)
    (0.05, 0.0016)
    """
    if not 0 <= lam <= 1 or prompt_variance < 0 or se < 0 or draws not in (1, 2):
        raise InputError("a widened interval needs lambda in [0, 1], variances >= 0 and 1 or "
                         "2 prompt draws", found=f"lambda {lam}, se {se}, prompt variance "
                         f"{prompt_variance}, draws {draws}")
    added = draws * lam ** 2 * prompt_variance
    se_w = float(np.sqrt(se ** 2 + added))
    import scipy.stats as sps

    z = float(sps.norm.ppf((1 + level) / 2))
    return {"estimate": float(estimate), "se": se_w, "low": float(estimate - z * se_w),
            "high": float(estimate + z * se_w), "added_variance": float(added)}
