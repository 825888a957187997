"""Arm and paired-difference resamples read off a shared resample plan.

:class:`Columns` lays out, for one per-query table of arms (shape ``(n_arms, n)``), the
columns a :class:`~relgrade.evaluation.resample.ResamplePlan` multiplies: each arm's values,
and the squares the studentized bootstrap needs (an arm's own, or a pair's difference's),
with traffic weights folded in. Several tables on the same plan (the measures of one query
set) are stacked side by side and multiplied once; :class:`Resampled` then reads any arm's
or pair's resampled means, studentized statistics and sign-flip sums from the product.

The quantities are those of :mod:`relgrade.evaluation.stats`: a resample's (weighted) mean
``sum(c w v) / sum(c w)`` with ``c`` the counts, the studentized sources of
:func:`relgrade.evaluation.stats.studentized_resamples` (unweighted ``[v, v^2]``, weighted
``[v, w v^2, w v, w, 1/w]``), and the sign-flip sum ``sum(s w d)``. A difference's resampled
mean (and the linear sources ``w d``) is the arm's minus the other arm's; only ``d^2`` needs
its own column.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np


@dataclass
class Columns:
    """The product columns of one table of arms.

    Parameters
    ----------
    values : numpy.ndarray of shape (n_arms, n), float64
    weights : numpy.ndarray of shape (n,), float64, or None
    arm_squares : sequence of int
        Arms whose own studentized resamples are needed.
    pair_squares : sequence of (int, int)
        Arm pairs ``(i, j)`` whose difference ``v_i - v_j`` needs studentized resamples.
    """

    values: np.ndarray
    weights: np.ndarray | None
    arm_squares: tuple = ()
    pair_squares: tuple = ()
    offset: dict = field(default_factory=dict, init=False)

    def matrix(self) -> np.ndarray:
        """The columns, shape (n, k), float64 (numerators: each source times the weight)."""
        v, w = self.values, self.weights
        cols = []

        def add(name, col):
            self.offset[name] = len(cols)
            cols.append(col)

        one = np.ones(v.shape[1])
        ww = one if w is None else w
        for i in range(v.shape[0]):
            add(("v", i), ww * v[i])
        if w is not None:
            add(("w",), w)                      # denominator sum(c w); mean_w(1/w) = n / it
            add(("ww",), w * w)                 # numerator of mean_w(w)
            for i in range(v.shape[0]):
                add(("wv", i), w * w * v[i])    # numerator of mean_w(w v)
        for i in self.arm_squares:
            add(("sq", i), ww * ww * v[i] * v[i] if w is not None else v[i] * v[i])
        for i, j in self.pair_squares:
            d = v[i] - v[j]
            add(("dsq", i, j), ww * ww * d * d if w is not None else d * d)
        return np.column_stack(cols)


class Resampled:
    """Resampled means of one table, read from the plan's product.

    Parameters
    ----------
    columns : Columns
        The layout (its :meth:`Columns.matrix` was multiplied).
    sums : numpy.ndarray of shape (B, k), float64
        The table's block of ``plan.resample_sums(...)``.
    flips : numpy.ndarray of shape (P, n_arms), float64, or None
        ``plan.flip_sums`` of the weighted arm values ``w v`` (the first ``n_arms`` columns).
    """

    def __init__(self, columns: Columns, sums: np.ndarray, flips: np.ndarray | None = None):
        self.c = columns
        self.sums = sums
        self.flips = flips
        n = columns.values.shape[1]
        self.n = n
        w = columns.weights
        self.den = float(n) if w is None else sums[:, columns.offset[("w",)]]

    def _col(self, *name) -> np.ndarray:
        return self.sums[:, self.c.offset[name]] / self.den

    def _diff(self, name: str, i: int, j: int) -> np.ndarray:
        # the resampled sums' difference over the denominator: the difference column's
        # resampled mean whenever the sums are exact
        o = self.c.offset
        return (self.sums[:, o[(name, i)]] - self.sums[:, o[(name, j)]]) / self.den

    def arm_means(self, i: int, rows: int | None = None) -> np.ndarray:
        """Resampled (weighted) means of arm ``i``: shape (B,) (the first ``rows``)."""
        return self._col("v", i)[:rows]

    def pair_means(self, i: int, j: int, rows: int | None = None) -> np.ndarray:
        """Resampled means of ``v_i - v_j``: arm ``i``'s resampled sums minus arm ``j``'s,
        over the resample's denominator; shape (B,) (the first ``rows``)."""
        return self._diff("v", i, j)[:rows]

    def _sources(self, mean: np.ndarray, square: np.ndarray, linear_w: np.ndarray | None):
        """The (B, 1 or 5) means :func:`stats._studentized_from` reads."""
        if self.c.weights is None:
            return np.column_stack([mean, square])
        inv = self.n / self.den
        return np.column_stack([mean, square, linear_w, self._col("ww"), inv])

    def studentized(self, estimate: float, mean: np.ndarray, square: np.ndarray,
                    linear_w: np.ndarray | None):
        """(means, t) as :func:`relgrade.evaluation.stats.studentized_resamples` returns
        them for one row of values, from the resampled sources."""
        from relgrade.evaluation.stats import _studentized_from

        mu, se = _studentized_from(self._sources(mean, square, linear_w), 1, self.n,
                                   self.c.weights is not None)
        mu, se = mu[:, 0], se[:, 0]
        with np.errstate(all="ignore"):
            t = (mu - estimate) / se
        t[(se == 0) & (mu == estimate)] = 0.0
        return mu, t

    def arm_studentized(self, i: int, estimate: float):
        """Arm ``i``'s resampled means and studentized statistics, each shape (B,)."""
        lw = None if self.c.weights is None else self._col("wv", i)
        return self.studentized(estimate, self._col("v", i), self._col("sq", i), lw)

    def pair_studentized(self, i: int, j: int, estimate: float):
        """The difference ``v_i - v_j``'s resampled means and studentized statistics."""
        lw = None if self.c.weights is None else self._diff("wv", i, j)
        return self.studentized(estimate, self._diff("v", i, j),
                                self._col("dsq", i, j), lw)

    def flip_sums(self, i: int, j: int) -> np.ndarray:
        """``sum(s w (v_i - v_j))`` under every sign-flip pattern, shape (P,)."""
        return self.flips[:, i] - self.flips[:, j]


def apply(plan, tables: list[Columns], *, flips: bool, workers: int = 1) -> list[Resampled]:
    """Multiply every table's columns with the plan in one product (and the sign flips in
    another), and return one :class:`Resampled` per table, in order.

    Parameters
    ----------
    plan : relgrade.evaluation.resample.ResamplePlan
    tables : list of Columns, each with ``n == plan.n``
    flips : bool
        Also compute the sign-flip sums of every table's weighted arm values.
    workers : int
        Threads (the numbers do not depend on it).
    """
    mats = [t.matrix() for t in tables]
    widths = np.cumsum([0] + [m.shape[1] for m in mats])
    sums = plan.resample_sums(np.hstack(mats), workers=workers)
    flip = None
    if flips:
        arm_cols = [m[:, : t.values.shape[0]] for m, t in zip(mats, tables)]
        fw = np.cumsum([0] + [a.shape[1] for a in arm_cols])
        flip = plan.flip_sums(np.hstack(arm_cols), workers=workers)
    out = []
    for k, t in enumerate(tables):
        f = None if flip is None else flip[:, fw[k]:fw[k + 1]]
        out.append(Resampled(t, sums[:, widths[k]:widths[k + 1]], f))
    return out
