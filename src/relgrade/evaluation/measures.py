"""Measure names: ir_measures' canonical spelling, parsed into small value objects.

A name is ``NAME``, ``NAME@k`` or ``NAME(param=value, ...)@k``, read with Python's own
``ast`` parser the way ir_measures reads it. ``str(measure)`` gives the canonical spelling,
parameters at their default left out, so the string is the measure's identity and the key
under which its value is stored.

=========  ==================================================  ===============
name       what it is                                          parameters
=========  ==================================================  ===============
``nDCG``   normalised discounted cumulative gain               ``dcg``: ``'log2'`` (default, gain =
                                                               grade, as trec_eval) or ``'exp-log2'``
                                                               (gain 2^g - 1)
``R``      recall: relevant chunks retrieved / relevant        ``rel`` (default 1)
``RR``     reciprocal rank of the first relevant chunk         ``rel``
``P``      precision: relevant chunks in the top k / k         ``rel``
``Judged`` share of the top k that has a grade                 --
=========  ==================================================  ===============

A chunk is relevant when its grade is at least ``rel``. Aliases ``NDCG``, ``MRR``,
``Recall`` and ``Precision`` are accepted and printed under the primary name.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass

from relgrade.errors import InputError

_ALIASES = {"nDCG": "nDCG", "NDCG": "nDCG", "R": "R", "Recall": "R", "RR": "RR", "MRR": "RR",
            "P": "P", "Precision": "P", "Judged": "Judged"}
_PARAMS = {"nDCG": ("dcg",), "R": ("rel",), "RR": ("rel",), "P": ("rel",), "Judged": ()}
DCG_FORMS = ("log2", "exp-log2")
_FIX = ("Use ir_measures' names: nDCG(dcg='exp-log2')@10, nDCG@10, R@10, R(rel=2)@10, "
        "RR@10, P@5, Judged@10")


@dataclass(frozen=True)
class Measure:
    """One evaluation measure.

    Parameters
    ----------
    name : {"nDCG", "R", "RR", "P", "Judged"}
        The measure.
    cutoff : int or None
        Only the top ``cutoff`` chunks of each ranked list count; None: the whole list.
    rel : int
        The lowest grade that counts as relevant (R, RR, P; nDCG reads grades as gains).
    dcg : {"log2", "exp-log2"}
        nDCG's gain: the grade itself (trec_eval's ``ndcg_cut``) or 2^grade - 1
        (Burges et al. 2005); the discount is 1 / log2(rank + 1) in both.
    """

    name: str
    cutoff: int | None = None
    rel: int = 1
    dcg: str = "log2"

    def __str__(self) -> str:
        params = []
        if self.name == "nDCG" and self.dcg != "log2":
            params.append(f"dcg={self.dcg!r}")
        if self.name in ("R", "RR", "P") and self.rel != 1:
            params.append(f"rel={self.rel}")
        text = self.name
        if params:
            text += "(" + ",".join(params) + ")"
        if self.cutoff is not None:
            text += f"@{self.cutoff}"
        return text

    @property
    def needs_relevant(self) -> bool:
        """True when the measure is undefined for a query with nothing relevant graded."""
        return self.name != "Judged"


def _literal(node, text):
    try:
        return ast.literal_eval(node)
    except ValueError:
        raise InputError("measure parameters must be literal values", item=text,
                         fix=_FIX) from None


def parse_measure(name, *, relevant_min: int = 1) -> Measure:
    """Parse an ir_measures-style measure name.

    Parameters
    ----------
    name : str or Measure
        e.g. ``"nDCG(dcg='exp-log2')@10"``, ``"R(rel=2)@10"``, ``"RR"``; a Measure is
        returned as it is.
    relevant_min : int, default 1
        The ``rel`` of R, RR and P when the name does not set it (params
        ``scale.relevant_min``).

    Returns
    -------
    Measure
        ``str()`` of it is the canonical name: parameters at ir_measures' defaults
        (``dcg='log2'``, ``rel=1``) are dropped.

    Raises
    ------
    InputError
        The name does not parse, names an unknown measure or parameter, or has a cutoff
        that is not a positive integer.

    Examples
    --------
    >>> str(parse_measure("NDCG(dcg='exp-log2')@10"))
    "nDCG(dcg='exp-log2')@10"
    >>> str(parse_measure("R@10", relevant_min=2))
    'R(rel=2)@10'
    """
    if isinstance(name, Measure):
        return name
    text = str(name).strip()
    try:
        node = ast.parse(text, mode="eval").body
    except SyntaxError:
        raise InputError("not a measure name", item=text, fix=_FIX) from None
    cutoff = None
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.MatMult):
        cutoff = _literal(node.right, text)
        if isinstance(cutoff, bool) or not isinstance(cutoff, int) or cutoff < 1:
            raise InputError("a measure's cutoff must be a positive integer", item=text,
                             found=repr(cutoff))
        node = node.left
    kwargs = {}
    if isinstance(node, ast.Call):
        if node.args:
            raise InputError("measure parameters are given by name, e.g. R(rel=2)@10",
                             item=text)
        kwargs = {kw.arg: _literal(kw.value, text) for kw in node.keywords}
        node = node.func
    if not isinstance(node, ast.Name) or node.id not in _ALIASES:
        found = node.id if isinstance(node, ast.Name) else None
        raise InputError("unknown measure", item=text, found=found,
                         fix="Known measures: nDCG, R, RR, P, Judged. " + _FIX)
    measure = _ALIASES[node.id]
    allowed = _PARAMS[measure]
    for key in kwargs:
        if key not in allowed:
            raise InputError(f"{measure} takes no parameter `{key}`", item=text,
                             fix=f"{measure} accepts: {', '.join(allowed) or 'no parameters'}")
    dcg = kwargs.get("dcg", "log2")
    if dcg not in DCG_FORMS:
        raise InputError("nDCG's dcg must be 'log2' or 'exp-log2'", item=text,
                         found=repr(dcg))
    rel = kwargs.get("rel", relevant_min)
    if isinstance(rel, bool) or not isinstance(rel, int):
        raise InputError("rel must be an integer grade", item=text, found=repr(rel))
    if measure not in ("R", "RR", "P"):
        rel = 1
    return Measure(name=measure, cutoff=cutoff, rel=int(rel), dcg=dcg)


def protocol_measures(cutoffs, *, relevant_min: int = 1) -> list[Measure]:
    """The measures every arm is scored on, at each cutoff.

    Parameters
    ----------
    cutoffs : iterable of int
        params ``metrics.cutoffs``, e.g. ``[3, 5, 10]``.
    relevant_min : int, default 1
        params ``scale.relevant_min``.

    Returns
    -------
    list of Measure
        For each cutoff k in the order given: ``nDCG(dcg='exp-log2')@k``, ``R@k``, ``RR@k``,
        ``Judged@k`` (R and RR with ``rel=relevant_min``).
    """
    out = []
    for k in cutoffs:
        for name in ("nDCG(dcg='exp-log2')", "R", "RR", "Judged"):
            out.append(parse_measure(f"{name}@{int(k)}", relevant_min=relevant_min))
    return out
