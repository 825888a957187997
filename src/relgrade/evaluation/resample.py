"""One seeded resample plan per query set, shared by every comparison and measure.

A comparison of many arms on many measures resamples the same queries again and again. The
plan draws the resamples once, from params ``seed``: ``B`` bootstrap resamples as
multinomial counts (how often each query is drawn) and ``P`` sign-flip patterns as +-1
signs, and applies them to a whole per-query table at once as matrix products,

* ``C @ X``: row ``b`` holds the resampled sums of every column of ``X`` (shape
  ``(n_queries, k)``) under bootstrap resample ``b``; the resampled mean of a column is that
  sum over ``C @ w`` (traffic weights ``w``) or over ``n``;
* ``S @ X``: row ``p`` holds each column's sum with every query's sign set by pattern ``p``.

Every arm's resampled mean and every paired difference's come out of the same product: the
resample of ``a - b`` is, by definition here, the resample of ``a`` minus that of ``b``, so
45 pairs of 10 arms cost 10 columns, not 45 comparisons' own draws.

Draws
-----
The counts and signs are made in blocks of :func:`block_rows` rows (bounded memory: about
2^22 counts a block), and block ``k`` draws from its own generator,
``relgrade.rng.comparison_rng(seed, "plan", scope, n, "bootstrap" or "sign-flip", k)``:

* bootstrap block: ``rng.integers(0, n, size=(rows, n), dtype=np.int64)`` query indices, one
  resample a row, counted per row (``numpy.bincount``); so a resample's mean from the plan is
  the mean of the values at those indices (:meth:`ResamplePlan.indices` gives them);
* sign-flip block: ``ceil(n / 32)`` words of ``rng.integers(0, 2**32, dtype=np.uint32)`` a
  row; query ``j`` changes sign when bit ``j % 32`` of word ``j // 32`` is set.

Because each block has its own generator and a fixed size (a function of ``n`` only), the
blocks can be made and multiplied in any order by any number of threads and the numbers stay
the same. The products run with the BLAS library held to one thread
(``threadpoolctl``), so no helper threads spin beside the workers, and in float64 (counts are
exact integers in float64 below 2^53).
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

import numpy as np

from relgrade.errors import InputError
from relgrade.rng import comparison_rng

#: Counts (rows x queries) per block: 2^22 float64 counts are 32 MiB, with their int64
#: indices another 32 MiB, per worker.
BLOCK_ELEMENTS = 1 << 22

#: At most this many rows a block (the product's left operand stays a few MiB for small n).
MAX_BLOCK_ROWS = 1024

#: The version of the plan's draws, part of every block's seed; a change of how the plan
#: draws is a new version.
PLAN_VERSION = "plan-v1"


def block_rows(n: int) -> int:
    """Rows per block for ``n`` queries: ``clip(BLOCK_ELEMENTS // n, 1, MAX_BLOCK_ROWS)``."""
    return int(max(1, min(MAX_BLOCK_ROWS, BLOCK_ELEMENTS // max(1, int(n)))))


def _blas_one_thread():
    """A context manager holding BLAS to one thread (threadpoolctl), or a no-op without it."""
    try:
        from threadpoolctl import threadpool_limits
    except ImportError:  # pragma: no cover - threadpoolctl is a dependency
        from contextlib import nullcontext
        return nullcontext()
    return threadpool_limits(limits=1, user_api="blas")


@dataclass(frozen=True)
class ResamplePlan:
    """The bootstrap resamples and sign-flip patterns of ``n`` queries, seeded from params.

    Attributes
    ----------
    seed : int
        The experiment seed (params ``seed``), recorded with the results.
    n : int
        Queries (the rows of every table the plan is applied to, in the caller's order).
    n_resamples : int
        Bootstrap resamples ``B`` (rows of ``C``).
    n_permutations : int
        Sign-flip patterns ``P`` (rows of ``S``).
    scope : str
        What the queries are (``"queries"`` for the comparison's query set,
        ``"segment:<group>"`` for one query group's); part of every block's seed.

    Raises
    ------
    InputError
        A size is not a positive integer.

    Examples
    --------
    >>> plan = ResamplePlan(seed=1, n=4, n_resamples=3, n_permutations=2)
    >>> plan.counts(0).sum(axis=1)  # every resample draws n queries
    array([4., 4., 4.])
    >>> x = np.array([[1.0], [2.0], [3.0], [4.0]])
    >>> idx = plan.indices(0)  # the same resamples, as query indices
    >>> bool((plan.resample_sums(x)[:, 0] == x[idx, 0].sum(axis=1)).all())
    True
    """

    seed: int
    n: int
    n_resamples: int
    n_permutations: int
    scope: str = "queries"

    def __post_init__(self):
        for key in ("n", "n_resamples", "n_permutations"):
            v = getattr(self, key)
            if isinstance(v, bool) or not isinstance(v, (int, np.integer)) or v < 1:
                raise InputError("a resample plan needs positive sizes", item=key,
                                 found=repr(v))

    @property
    def rows(self) -> int:
        """Rows per block (:func:`block_rows` of ``n``)."""
        return block_rows(self.n)

    def _rng(self, kind: str, k: int) -> np.random.Generator:
        return comparison_rng(self.seed, "plan", PLAN_VERSION, self.scope, str(self.n), kind,
                              str(k))

    def _blocks(self, total: int) -> list[tuple[int, int, int]]:
        r = self.rows
        return [(k, s, min(total, s + r)) for k, s in enumerate(range(0, total, r))]

    def indices(self, k: int) -> np.ndarray:
        """The query indices of bootstrap block ``k``.

        Returns
        -------
        numpy.ndarray of shape (rows_k, n), int64
            Row ``i`` is resample ``k * rows + i``: ``n`` query positions drawn with
            replacement. ``rows_k`` is :attr:`rows`, less for the last block.
        """
        start = k * self.rows
        if not 0 <= start < self.n_resamples:
            raise InputError("no such bootstrap block", found=str(k))
        r = min(self.rows, self.n_resamples - start)
        return self._rng("bootstrap", k).integers(0, self.n, size=(r, self.n), dtype=np.int64)

    def counts(self, k: int) -> np.ndarray:
        """Bootstrap block ``k`` as counts.

        Returns
        -------
        numpy.ndarray of shape (rows_k, n), float64
            ``counts[i, j]``: how often query ``j`` is in resample ``k * rows + i``; every
            row sums to ``n``.
        """
        idx = self.indices(k)
        r = idx.shape[0]
        flat = (idx + (np.arange(r, dtype=np.int64) * self.n)[:, None]).ravel()
        return np.bincount(flat, minlength=r * self.n).reshape(r, self.n).astype(np.float64)

    def signs(self, k: int) -> np.ndarray:
        """Sign-flip block ``k``.

        Returns
        -------
        numpy.ndarray of shape (rows_k, n), float64
            +1 or -1 per pattern and query (bit ``j % 32`` of word ``j // 32`` set: -1).
        """
        start = k * self.rows
        if not 0 <= start < self.n_permutations:
            raise InputError("no such sign-flip block", found=str(k))
        r = min(self.rows, self.n_permutations - start)
        words = self._rng("sign-flip", k).integers(0, 2 ** 32, size=(r, -(-self.n // 32)),
                                                   dtype=np.uint32)
        bits = np.unpackbits(words.astype("<u4", copy=False).view(np.uint8), axis=1,
                             count=self.n, bitorder="little")
        return 1.0 - 2.0 * bits

    def _apply(self, kind: str, total: int, x: np.ndarray, workers: int) -> np.ndarray:
        x = np.ascontiguousarray(x, dtype=np.float64)
        if x.ndim != 2 or x.shape[0] != self.n:
            raise InputError("a resample plan applies to a table of one row per query",
                             found=f"shape {x.shape} for {self.n} queries")
        out = np.empty((total, x.shape[1]))
        make = self.counts if kind == "bootstrap" else self.signs

        def one(block):
            k, start, stop = block
            np.matmul(make(k), x, out=out[start:stop])

        blocks = self._blocks(total)
        with _blas_one_thread():
            if workers <= 1 or len(blocks) == 1:
                for b in blocks:
                    one(b)
            else:
                with ThreadPoolExecutor(max_workers=int(workers)) as ex:
                    list(ex.map(one, blocks))
        return out

    def resample_sums(self, x, *, workers: int = 1) -> np.ndarray:
        """``C @ x``: each column's sum under every bootstrap resample.

        Parameters
        ----------
        x : array-like of shape (n, k), float
            One row per query, one column per quantity (arm values, weights, squares ...).
        workers : int, default 1
            Threads the blocks are spread over; the result is the same for any value.

        Returns
        -------
        numpy.ndarray of shape (n_resamples, k), float64

        Raises
        ------
        InputError
            ``x`` does not have one row per query.
        """
        return self._apply("bootstrap", self.n_resamples, x, workers)

    def flip_sums(self, x, *, workers: int = 1) -> np.ndarray:
        """``S @ x``: each column's sum with the signs of every sign-flip pattern.

        Parameters and errors as :meth:`resample_sums`; returns shape (n_permutations, k).
        """
        return self._apply("sign-flip", self.n_permutations, x, workers)

    def to_dict(self) -> dict:
        """What a report records of the plan (JSON-ready)."""
        return {"version": PLAN_VERSION, "seed": int(self.seed), "scope": self.scope,
                "n": int(self.n), "n_resamples": int(self.n_resamples),
                "n_permutations": int(self.n_permutations), "block_rows": self.rows}
