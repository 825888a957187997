"""Repeated sampling of a model grader: one recorded grade from N independent samples.

With ``graders.NAME.samples: N`` every pair is graded N times, each time by a fresh process
that sees only that batch. The grade that is recorded is the samples' majority; the spread of
the samples is the grader's *self-consistency*, reported beside its grades so the agreement
stage can read it next to the grader-auditor agreement.

The tie rule
------------
When two or more grades share the highest count, the recorded grade is the **median of the
tied grades, rounded down** to a grade on the scale. On the 0/1/2 scale: a 0-2 tie records 1,
a 1-2 tie records 1, a 0-1 tie records 0, and a three-way tie records 1. Rounding down keeps
a split decision from inflating the key (an unearned 2 moves nDCG; an unearned 1 moves recall
and MRR), and the median keeps a 0-2 split from deciding either extreme.

The recorded reason is the reason of the sample whose grade is nearest the recorded grade,
ties going to the lower grade and then to the lowest sample number, so every recorded row
carries a reason some sample actually gave.
"""

from __future__ import annotations

from typing import Iterable

import numpy as np
import pandas as pd

from relgrade.errors import InputError
from relgrade.protocol.agreement import fleiss_from_counts
from relgrade.raters.aggregate import TIE_RULE, majority_grade

#: Columns of a samples table.
SAMPLE_COLUMNS = ["query_id", "chunk_id", "sample", "reason", "grade"]


def _pick_reason(samples: list[tuple[int, str, int]], grade: int) -> str:
    """Reason of the sample nearest ``grade`` (lower grade, then lower sample, on ties)."""
    best = min(samples, key=lambda s: (abs(s[2] - grade), s[2], s[0]))
    return best[1]


def aggregate_samples(samples: pd.DataFrame, *, scale: Iterable[int]) -> pd.DataFrame:
    """One grade row per pair from its samples.

    Parameters
    ----------
    samples : pandas.DataFrame of shape (n_rows, 5)
        Columns ``query_id`` (str), ``chunk_id`` (str), ``sample`` (int, 0-based),
        ``reason`` (str), ``grade`` (int); one row per pair and sample. Not modified.
    scale : iterable of int
        The allowed grades.

    Returns
    -------
    pandas.DataFrame of shape (n_pairs, 4)
        Columns ``query_id``, ``chunk_id``, ``reason``, ``grade`` (the grade row's key
        order), one row per pair in order of the pair's first sample row. ``grade`` is
        :func:`relgrade.raters.aggregate.majority_grade` of the pair's samples; ``reason`` follows the rule in the
        module docstring.

    Raises
    ------
    InputError
        A column is missing, or a pair has the same sample number twice.
    """
    missing = [c for c in SAMPLE_COLUMNS if c not in samples.columns]
    if missing:
        raise InputError(f"samples table lacks column(s) {', '.join(missing)}")
    scale = list(scale)
    by_pair: dict[tuple[str, str], list[tuple[int, str, int]]] = {}
    for q, c, s, r, g in samples[SAMPLE_COLUMNS].itertuples(index=False, name=None):
        entry = by_pair.setdefault((str(q), str(c)), [])
        if any(x[0] == int(s) for x in entry):
            raise InputError("a pair has the same sample twice", item=f"pair ({q}, {c})",
                             found=f"sample {int(s)}")
        entry.append((int(s), str(r), int(g)))
    out = []
    for (q, c), entry in by_pair.items():
        grade = majority_grade([x[2] for x in entry], scale)
        out.append((q, c, _pick_reason(entry, grade), grade))
    return pd.DataFrame({
        "query_id": pd.Series([r[0] for r in out], dtype="str"),
        "chunk_id": pd.Series([r[1] for r in out], dtype="str"),
        "reason": pd.Series([r[2] for r in out], dtype="str"),
        "grade": pd.Series([r[3] for r in out], dtype="int64"),
    })


def self_consistency(samples: pd.DataFrame, *, scale: Iterable[int], n_samples: int) -> dict:
    """How well a model grader agrees with itself over repeated samples.

    Parameters
    ----------
    samples : pandas.DataFrame
        The samples table (columns of :data:`SAMPLE_COLUMNS`). Pairs with fewer than
        ``n_samples`` samples (an interrupted run) are left out and counted.
    scale : iterable of int
        The allowed grades (the categories).
    n_samples : int
        Samples per pair (params ``graders.NAME.samples``).

    Returns
    -------
    dict
        ``samples`` (n), ``pairs`` (pairs with all n samples), ``incomplete_pairs``,
        ``fleiss_kappa`` (float or None), ``unanimous_share`` (share of pairs whose samples
        all agree), ``mean_pairwise_agreement`` (Fleiss' :math:`\\bar P`: the chance that
        two samples of a pair agree), ``ties`` (pairs decided by the tie rule),
        ``tie_rule`` and ``notes`` (why a value is None).

    Notes
    -----
    Fleiss' kappa (Fleiss 1971; see :func:`relgrade.protocol.agreement.fleiss_from_counts`)
    treats the n samples of a pair as
    n raters, over the scale's grades as nominal categories.
    """
    values = sorted(int(g) for g in scale)
    index = {g: j for j, g in enumerate(values)}
    grouped: dict[tuple[str, str], list[int]] = {}
    for q, c, g in samples[["query_id", "chunk_id", "grade"]].itertuples(index=False, name=None):
        grouped.setdefault((str(q), str(c)), []).append(int(g))
    complete = {p: gs for p, gs in grouped.items() if len(gs) == n_samples}
    notes = []
    table = np.zeros((len(complete), len(values)), dtype=np.int64)
    ties = 0
    for i, gs in enumerate(complete.values()):
        for g in gs:
            table[i, index[g]] += 1
        top = table[i].max()
        ties += int((table[i] == top).sum() > 1)
    out = {
        "samples": int(n_samples),
        "pairs": len(complete),
        "incomplete_pairs": len(grouped) - len(complete),
        "fleiss_kappa": None,
        "unanimous_share": None,
        "mean_pairwise_agreement": None,
        "ties": ties,
        "tie_rule": TIE_RULE,
        "notes": notes,
    }
    if not complete:
        notes.append("no pair has all its samples yet")
        return out
    out["unanimous_share"] = float((table.max(axis=1) == n_samples).mean())
    if n_samples < 2:
        notes.append("one sample per pair: self-consistency needs samples >= 2")
        return out
    out["mean_pairwise_agreement"] = float(
        (((table ** 2).sum(axis=1) - n_samples) / (n_samples * (n_samples - 1))).mean())
    kappa, _ = fleiss_from_counts(table)
    out["fleiss_kappa"] = kappa
    if kappa is None:
        notes.append("Fleiss' kappa is undefined: every sample gave the same grade, "
                     "so chance agreement is 1")
    return out
