"""Seed derivation: one experiment seed in params, a documented child seed for every use.

Every random choice in relgrade takes a :class:`numpy.random.Generator`. The generators are
built from child seeds derived from the experiment's ``seed`` (params.yaml) with sha256 over
a documented byte string, never with Python's ``hash()``, which is salted per process. So a
recorded child seed (for example the ``order_seed`` of a display order) lets anyone rebuild
the same draws on any machine, in any process, with any worker count.

The byte string is the canonical JSON (see :func:`relgrade.canonical.canonical_json`) of a
list whose first element names the purpose and version, followed by the experiment seed and
the parts::

    ["relgrade-seed-v1", <seed>, <part>, <part>, ...]

e.g. ``["relgrade-seed-v1",20261130,"order","w012","grader",1]``. JSON quoting keeps the
parts apart, so no two different part lists give the same bytes. The child seed is the
first 8 bytes of the sha256 digest read as a big-endian unsigned integer with the top bit
cleared (``0 <= s < 2**63``), so it fits a signed 64-bit column.
"""

from __future__ import annotations

import hashlib
import numbers

import numpy as np

from relgrade.canonical import canonical_json

#: The first element of every seed byte string; change it only with a new version.
SEED_TAG = "relgrade-seed-v1"


def _check_seed(seed) -> int:
    if isinstance(seed, bool) or not isinstance(seed, numbers.Integral) or seed < 0:
        raise ValueError(f"seed must be a non-negative integer, got {seed!r}")
    return int(seed)


def seed_bytes(seed: int, *parts) -> bytes:
    """The byte string a child seed is hashed from.

    Parameters
    ----------
    seed : int
        The experiment seed (params ``seed``), non-negative.
    *parts : str or int
        What the seed is for, most general first (``"order", query_id, role, round``).

    Returns
    -------
    bytes
        UTF-8 canonical JSON of ``[SEED_TAG, seed, *parts]``.

    Examples
    --------
    >>> seed_bytes(7, "order", "q1", "grader", 1)
    b'["relgrade-seed-v1",7,"order","q1","grader",1]'
    """
    seed = _check_seed(seed)
    for p in parts:
        if isinstance(p, bool) or not isinstance(p, (str, numbers.Integral)):
            raise ValueError(f"seed parts must be strings or integers, got {p!r}")
    items = [SEED_TAG, seed] + [p if isinstance(p, str) else int(p) for p in parts]
    return canonical_json(items).encode("utf-8")


def derive_seed(seed: int, *parts) -> int:
    """A child seed for one purpose, derived from the experiment seed with sha256.

    Parameters
    ----------
    seed : int
        The experiment seed (params ``seed``).
    *parts : str or int
        What the seed is for (see :func:`seed_bytes`).

    Returns
    -------
    int
        ``int.from_bytes(sha256(seed_bytes(seed, *parts))[:8], "big") & (2**63 - 1)``.

    Raises
    ------
    ValueError
        ``seed`` is not a non-negative integer, or a part is neither a string nor an integer.

    Notes
    -----
    The same arguments give the same seed in every process (unlike ``hash()``), and any
    change of a part gives an unrelated seed.

    Examples
    --------
    >>> derive_seed(7, "audit") == derive_seed(7, "audit")
    True
    >>> derive_seed(7, "audit") == derive_seed(8, "audit")
    False
    """
    digest = hashlib.sha256(seed_bytes(seed, *parts)).digest()
    return int.from_bytes(digest[:8], "big") & 0x7FFF_FFFF_FFFF_FFFF


def order_seed(seed: int, query_id: str, role: str, round: int) -> int:  # noqa: A002
    """The seed of one query's display order for one role and grading round.

    Parameters
    ----------
    seed : int
        The experiment seed (params ``seed``).
    query_id : str
        The query.
    role : str
        ``"grader"`` or ``"auditor"``.
    round : int
        The grading round (params ``grading.round``); a new round gives fresh orders.

    Returns
    -------
    int
        ``derive_seed(seed, "order", query_id, role, round)``, in ``[0, 2**63)``.

    Examples
    --------
    >>> order_seed(20261130, "w012", "grader", 1) == order_seed(20261130, "w012", "auditor", 1)
    False
    """
    return derive_seed(seed, "order", str(query_id), str(role), int(round))


def rng_for(seed: int, query_id: str, role: str, round: int) -> np.random.Generator:
    """A Generator for one query's display order: ``default_rng(order_seed(...))``.

    Parameters and the derivation are those of :func:`order_seed`.

    Returns
    -------
    numpy.random.Generator
        A fresh PCG64 generator; equal arguments give generators with equal streams.
    """
    return np.random.default_rng(order_seed(seed, query_id, role, round))


def stage_rng(seed: int, purpose: str) -> np.random.Generator:
    """A Generator for one stage's draws (``"pool"``, ``"audit"``): ``default_rng(derive_seed(seed, purpose))``.

    Giving each stage its own child seed keeps their draws independent: changing how many
    numbers one stage draws never shifts another stage's choices.
    """
    return np.random.default_rng(derive_seed(seed, purpose))


def comparison_rng(seed: int, purpose: str, *parts: str) -> np.random.Generator:
    """A generator for one statistical purpose, independent of call order and worker count.

    Parameters
    ----------
    seed : int
        The experiment seed (params ``seed``), non-negative.
    purpose : str
        What the draws are for, e.g. ``"plan"`` (one block of the shared resample plan of
        :mod:`relgrade.evaluation.resample`), ``"compare"``, ``"segment"``.
    *parts : str
        What sets the purpose apart, e.g. ``("plan-v1", "queries", "36", "bootstrap", "0")``
        or ``("hybrid", "bm25", "nDCG(dcg='exp-log2')@10")``.

    Returns
    -------
    numpy.random.Generator
        ``numpy.random.default_rng(derive_seed(seed, "stats", purpose, *parts))``.

    Notes
    -----
    The child seed is the first 8 bytes (big-endian, top bit cleared) of the sha256 of the
    UTF-8 canonical JSON ``["relgrade-seed-v1", seed, "stats", purpose, *parts]`` (see
    :func:`derive_seed`). JSON quoting keeps the parts apart, so ``("a b", "c")`` and
    ``("a", "b c")`` give different seeds.

    Examples
    --------
    >>> a = comparison_rng(7, "compare", "hybrid", "bm25", "R@10").integers(0, 100, 3)
    >>> b = comparison_rng(7, "compare", "hybrid", "bm25", "R@10").integers(0, 100, 3)
    >>> bool((a == b).all())
    True
    """
    return np.random.default_rng(derive_seed(seed, "stats", purpose, *map(str, parts)))
