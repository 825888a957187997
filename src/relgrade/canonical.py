"""The byte forms relgrade hashes, and the one converter to plain JSON values.

A pool, a query set, a corpus, a key and every child seed are identified by the sha256 of
bytes built here, so these functions are frozen: changing a byte changes every recorded
hash. :func:`json_ready` turns results holding numpy scalars, tuples or NaN into values the
standard :mod:`json` module writes.

This module imports nothing from relgrade.
"""

from __future__ import annotations

import hashlib
import json
import math
from typing import Iterable

import numpy as np


def sha256_bytes(data: bytes) -> str:
    """Hex sha256 of ``data``.

    Parameters
    ----------
    data : bytes
        Any bytes.

    Returns
    -------
    str
        64 lowercase hex characters.

    Examples
    --------
    >>> sha256_bytes(b"")[:16]
    'e3b0c44298fc1c14'
    """
    return hashlib.sha256(data).hexdigest()


def canonical_json(obj) -> str:
    """One-line JSON with no spaces, keys in the order given, non-ASCII kept as UTF-8.

    This is the byte form relgrade hashes: ``json.dumps(obj, separators=(",", ":"),
    ensure_ascii=False)``, encoded as UTF-8.

    Examples
    --------
    >>> canonical_json({"query_id": "q1", "chunk_id": "é", "grade": 2})
    '{"query_id":"q1","chunk_id":"é","grade":2}'
    """
    return json.dumps(obj, separators=(",", ":"), ensure_ascii=False)


def jsonl_bytes(rows: Iterable[dict]) -> bytes:
    """Canonical JSON Lines bytes of ``rows`` (see :func:`canonical_json`), LF-terminated.

    Examples
    --------
    >>> jsonl_bytes([{"a": 1}, {"b": "x"}])
    b'{"a":1}\\n{"b":"x"}\\n'
    """
    return "".join(canonical_json(r) + "\n" for r in rows).encode("utf-8")


def json_ready(obj, *, nan_as_null: bool = False):
    """A copy of ``obj`` that :func:`json.dumps` writes: plain Python values only.

    Dicts keep their key order with every key as ``str``; lists, tuples and numpy arrays
    become lists; numpy scalars become the Python scalar of the same value (``np.int64`` →
    ``int``, ``np.float64`` → ``float``, ``np.bool_`` → ``bool``); anything else is
    returned as it is. The input is not modified.

    Parameters
    ----------
    obj : object
        Nested dicts, lists, tuples, numpy arrays and scalars.
    nan_as_null : bool, default False
        Also turn float NaN (Python or numpy) into ``None`` (JSON ``null``). Off by default,
        so a writer using ``allow_nan=False`` still refuses a NaN it was not meant to get.

    Returns
    -------
    object
        The converted value.

    Examples
    --------
    >>> json_ready({1: (np.int64(2), np.float64(0.5))})
    {'1': [2, 0.5]}
    >>> json_ready([float("nan")], nan_as_null=True)
    [None]
    """
    if isinstance(obj, dict):
        return {str(k): json_ready(v, nan_as_null=nan_as_null) for k, v in obj.items()}
    if isinstance(obj, (list, tuple, np.ndarray)):
        return [json_ready(v, nan_as_null=nan_as_null) for v in obj]
    if isinstance(obj, np.generic):
        obj = obj.item()
    if nan_as_null and isinstance(obj, float) and math.isnan(obj):
        return None
    return obj


def significant_floats(obj, digits: int = 12):
    """A copy of ``obj`` (as :func:`json_ready` gives it) with every finite float rounded to
    ``digits`` significant digits.

    Values computed by floating-point sums whose order varies with memory alignment or
    threads differ in their last bits between runs; written rounded, they are byte for byte
    the same in every run, so a file hashed in ``dvc.lock`` does not change for nothing.

    Parameters
    ----------
    obj : object
        Nested dicts, lists, tuples, numpy arrays and scalars.
    digits : int, default 12
        Significant decimal digits kept (1 to 17).

    Returns
    -------
    object
        The converted value; ints, bools, strings, NaN and infinities unchanged.

    Examples
    --------
    >>> significant_floats({"k": [0.1 + 0.2, 2, 1 / 3]}, 4)
    {'k': [0.3, 2, 0.3333]}
    """
    obj = json_ready(obj)
    if isinstance(obj, dict):
        return {k: significant_floats(v, digits) for k, v in obj.items()}
    if isinstance(obj, list):
        return [significant_floats(v, digits) for v in obj]
    if isinstance(obj, float) and math.isfinite(obj) and obj != 0:
        return float(f"{obj:.{digits}g}")
    return obj
