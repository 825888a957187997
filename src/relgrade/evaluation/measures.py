"""Measure names: ir_measures' canonical spelling, parsed into small value objects.

A name is ``NAME``, ``NAME@k`` or ``NAME(param=value, ...)@k``, read with Python's own
``ast`` parser the way ir_measures reads it. ``str(measure)`` gives the canonical spelling,
parameters at their default left out, so the string is the measure's identity and the key
under which its value is stored. trec_eval's names (``map``, ``P.5,10``, ``ndcg_cut.10``,
``recip_rank``, and the printed forms ``P_5``, ``ndcg_cut_10``) are read as aliases by
:func:`parse_measures`.

Every measure is declared once, in :data:`SPECS`: its parameters and their defaults, what
its ``@`` part means (a rank cutoff, a recall level, or nothing), whether it reads the
relevance level ``rel``, and whether it is undefined on a query with nothing relevant.

==============  ====================================================  =====================
name            what it is                                            parameters
==============  ====================================================  =====================
``nDCG``        normalised discounted cumulative gain                 ``dcg``, ``gains``,
                                                                      ``judged_only``
``AP``          average precision (its mean is MAP)                   ``rel``, ``judged_only``
``P``           precision: relevant chunks in the top k / k           ``rel``
``R``           recall: relevant chunks retrieved / relevant          ``rel``
``RR``          reciprocal rank of the first relevant chunk           ``rel``
``Rprec``       precision after R retrieved (R = number relevant)     ``rel``
``Bpref``       binary preference (Buckley & Voorhees 2004)           ``rel``
``Success``     1 when a relevant chunk is in the top k, else 0       ``rel`` (cutoff needed)
``infAP``       inferred AP over a sampled pool (Yilmaz & Aslam 2006) ``rel``
``xinfAP``      inferred AP from inclusion probabilities (Yilmaz,     ``rel``
                Kanoulas & Aslam 2008; sample_eval.pl's infAP)
``infNDCG``     inferred nDCG from inclusion probabilities (idem)     ``dcg``
``ERR``         expected reciprocal rank (Chapelle et al. 2009)       ``max_grade``
``RBP``         rank-biased precision (Moffat & Zobel 2008)           ``p``, ``rel``
``RBPResid``    RBP's residual: what unjudged chunks could add        ``p``
``NumRet``      chunks retrieved (with ``rel``: relevant retrieved)   ``rel``
``NumRel``      relevant chunks in the qrels                          ``rel``
``Judged``      graded share of the top min(k, retrieved) (ir_measures)  --
``Unjudged``    ungraded share of the top k, over k (trec_eval unj)   --
``IPrec``       interpolated precision at a recall level (``@0.5``)   ``rel``
==============  ====================================================  =====================

A chunk is relevant when its grade is at least ``rel``. A negative grade in the qrels marks
a chunk that was pooled but not judged (trec_eval's convention, used by infAP's sampled
pools): it is neither relevant nor judged non-relevant. ``xinfAP`` and ``infNDCG`` need
each judged pair's inclusion probability in the sampled pool (``relgrade evaluate
--inclusion``).
"""

from __future__ import annotations

import ast
import difflib
import re
from dataclasses import dataclass

from relgrade.errors import InputError

#: Each measure: its parameters and their defaults (``rel`` defaults to the relevance level
#: of the call, see :func:`parse_measure`; None: not given), what ``@`` means
#: ("cutoff", "required" cutoff, "recall" level, or None), and whether a query with nothing
#: relevant in the qrels leaves it undefined.
SPECS = {
    "nDCG": {"params": {"dcg": "log2", "gains": None, "judged_only": False},
             "at": "cutoff", "needs_relevant": True},
    "AP": {"params": {"rel": 1, "judged_only": False}, "at": "cutoff", "needs_relevant": True},
    "P": {"params": {"rel": 1}, "at": "cutoff", "needs_relevant": True},
    "R": {"params": {"rel": 1}, "at": "cutoff", "needs_relevant": True},
    "RR": {"params": {"rel": 1}, "at": "cutoff", "needs_relevant": True},
    "Rprec": {"params": {"rel": 1}, "at": None, "needs_relevant": True},
    "Bpref": {"params": {"rel": 1}, "at": None, "needs_relevant": True},
    "Success": {"params": {"rel": 1}, "at": "required", "needs_relevant": True},
    "infAP": {"params": {"rel": 1}, "at": None, "needs_relevant": True},
    "xinfAP": {"params": {"rel": 1}, "at": "cutoff", "needs_relevant": True,
               "inclusion": True},
    "infNDCG": {"params": {"dcg": "log2"}, "at": "cutoff", "needs_relevant": True,
                "inclusion": True},
    "ERR": {"params": {"max_grade": 4}, "at": "cutoff", "needs_relevant": True},
    "RBP": {"params": {"p": 0.8, "rel": None}, "at": "cutoff", "needs_relevant": False},
    "RBPResid": {"params": {"p": 0.8}, "at": None, "needs_relevant": False},
    "NumRet": {"params": {"rel": None}, "at": None, "needs_relevant": False},
    "NumRel": {"params": {"rel": 1}, "at": None, "needs_relevant": False},
    "Judged": {"params": {}, "at": "cutoff", "needs_relevant": False},
    "Unjudged": {"params": {}, "at": "required", "needs_relevant": False},
    "IPrec": {"params": {"rel": 1}, "at": "recall", "needs_relevant": True},
}

#: Measures whose per-query value, and so every mean of them, lies in [0, 1]; the others
#: (counts: NumRet, NumRel; RBP's residual) have no range an interval is clipped to.
UNIT_RANGE = frozenset({"nDCG", "AP", "P", "R", "RR", "Rprec", "Bpref", "Success", "infAP",
                        "xinfAP", "infNDCG", "ERR", "RBP", "Judged", "Unjudged", "IPrec"})

_ALIASES = {name: name for name in SPECS}
_ALIASES.update({"NDCG": "nDCG", "Recall": "R", "MRR": "RR", "Precision": "P", "MAP": "AP",
                 "BPref": "Bpref", "NumRelRet": "NumRet", "infNDCG": "infNDCG",
                 "xinfAP": "xinfAP"})
DCG_FORMS = ("log2", "exp-log2")
_FIX = ("Use ir_measures' names, e.g. nDCG@10, nDCG(dcg='exp-log2')@10, AP, R(rel=2)@100, "
        "P@5, RR@10, Rprec, Bpref, Success@5, RBP(p=0.9), IPrec@0.5, Judged@10, or "
        "trec_eval's: map, P.5,10, ndcg_cut.10, recip_rank")


@dataclass(frozen=True)
class Measure:
    """One evaluation measure.

    Parameters
    ----------
    name : str
        A key of :data:`SPECS` ("nDCG", "AP", "P", "R", "RR", ...).
    cutoff : int, float or None
        A rank cutoff k (only the top k chunks of each ranked list count), the recall level
        of IPrec, or None (the whole list).
    rel : int or None
        The lowest grade that counts as relevant; None for RBP and NumRet means graded
        gain (RBP) or every retrieved chunk (NumRet). Measures that do not read it keep 1.
    dcg : {"log2", "exp-log2"}
        nDCG's gain: the grade itself (trec_eval's ``ndcg`` and ``ndcg_cut``) or 2^grade - 1
        (Burges et al. 2005); the discount is 1 / log2(rank + 1) in both.
    gains : tuple of (int, float) pairs or None
        nDCG's explicit gain of some grades (others keep their grade, as trec_eval's
        ``ndcg.1=3,2=9``); pairs that map a grade to itself are dropped.
    judged_only : bool
        nDCG and AP on the condensed list: ungraded chunks removed before ranking
        (Sakai 2007).
    p : float or None
        RBP's persistence, in (0, 1).
    max_grade : int
        ERR's top grade g_max (the stopping probability of grade g is (2^g - 1) / 2^g_max).
    """

    name: str
    cutoff: int | float | None = None
    rel: int | None = 1
    dcg: str = "log2"
    gains: tuple | None = None
    judged_only: bool = False
    p: float | None = None
    max_grade: int = 4

    def __str__(self) -> str:
        spec = SPECS[self.name]["params"]
        params = []
        if "dcg" in spec and self.dcg != "log2":
            params.append(f"dcg={self.dcg!r}")
        if "gains" in spec and self.gains:
            params.append("gains={" + ",".join(f"{g}:{_num(v)}" for g, v in self.gains) + "}")
        if "judged_only" in spec and self.judged_only:
            params.append("judged_only=True")
        if "max_grade" in spec and self.max_grade != 4:
            params.append(f"max_grade={self.max_grade}")
        if "p" in spec and self.p != spec["p"]:
            params.append(f"p={_num(self.p)}")
        if "rel" in spec and self.rel != spec["rel"]:
            params.append(f"rel={self.rel}")
        text = self.name
        if params:
            text += "(" + ",".join(params) + ")"
        if self.cutoff is not None:
            text += f"@{_num(self.cutoff)}"
        return text

    @property
    def needs_relevant(self) -> bool:
        """True when the measure is undefined for a query with nothing relevant graded."""
        return SPECS[self.name]["needs_relevant"]

    @property
    def needs_inclusion(self) -> bool:
        """True when the measure reads the judged pairs' inclusion probabilities."""
        return SPECS[self.name].get("inclusion", False)

    @property
    def level(self) -> int:
        """The grade a chunk needs to count as relevant for definedness (1 for graded gain)."""
        return self.rel if isinstance(self.rel, int) and "rel" in SPECS[self.name]["params"] \
            else 1


def _num(value) -> str:
    return repr(value) if isinstance(value, float) else str(value)


def _literal(node, text):
    try:
        return ast.literal_eval(node)
    except ValueError:
        raise InputError("measure parameters must be literal values", item=text,
                         fix=_FIX) from None


def _is_int(value) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _unknown(text: str, found) -> InputError:
    near = suggest_measure(text)
    fix = (f"Did you mean {near}? " if near else "") + "Known measures: " + \
        ", ".join(SPECS) + ". " + _FIX
    return InputError("unknown measure", item=text, found=found, fix=fix)


def _spelled(base: str, rest: str, relevant_min: int) -> str:
    """``base`` (a known name) with the rest of what was typed, spelled as relgrade takes it:
    an ir_measures name canonically (``nDCG@10``), a trec_eval name as typed when it reads."""
    if base in _TREC:
        try:
            if _trec_names(base + rest, relevant_min):
                return base + rest
        except InputError:
            pass
        if rest[:1] in ("@", "("):  # ndcg_cut@10: the ir_measures spelling of its measure
            try:
                return str(parse_measure(_TREC[base][0] + rest, relevant_min=relevant_min))
            except InputError:
                pass
        return base
    try:
        return str(parse_measure(_ALIASES[base] + rest, relevant_min=relevant_min))
    except InputError:
        return _ALIASES[base]


def suggest_measure(text, *, known=None, relevant_min: int = 1) -> str | None:
    """The measure a mistyped name most likely meant, spelled as relgrade takes it.

    Parameters
    ----------
    text : str
        The name as typed, e.g. ``"ndcg@10"``.
    known : iterable of str, optional
        The names to choose from (e.g. the measures an experiment compared); default every
        name relgrade parses.
    relevant_min : int, default 1
        As for :func:`parse_measure`.

    Returns
    -------
    str or None
        Without ``known``: the name's leading word matched case-insensitively to an
        ir_measures name (``ndcg`` -> ``nDCG``, ``mrr`` -> ``RR``) or a trec_eval name, else
        the closest of them (:func:`difflib.get_close_matches`), with the cutoff and
        parameters that followed it: ``nDCG@10`` for ``ndcg@10``. With ``known``: that
        name if it is in ``known``, else a known measure of the same name and cutoff
        (``nDCG(dcg='exp-log2')@10`` for ``ndcg@10``), else the closest known name,
        compared case-insensitively. None when nothing is close.

    Examples
    --------
    >>> suggest_measure("ndcg@10")
    'nDCG@10'
    >>> suggest_measure("mrr@10")
    'RR@10'
    >>> suggest_measure("ndcg@10", known=["R@10", "nDCG(dcg='exp-log2')@10"])
    "nDCG(dcg='exp-log2')@10"
    """
    text = str(text).strip()
    lead = re.match(r"[A-Za-z_][A-Za-z0-9_]*", text)
    guess = None
    if lead:
        word, rest = lead.group(0), text[lead.end():]
        lower_alias = {k.lower(): k for k in _ALIASES}
        lower_trec = {k.lower(): k for k in _TREC}
        ir_style = rest[:1] in ("", "@", "(")  # ndcg@10 is nDCG@10, not trec_eval's ndcg
        if word in _ALIASES:
            base = word
        elif ir_style and word.lower() in lower_alias:
            base = lower_alias[word.lower()]
        elif word in _TREC:
            base = word
        elif word.lower() in lower_alias:
            base = lower_alias[word.lower()]
        elif word.lower() in lower_trec:
            base = lower_trec[word.lower()]
        else:
            near = difflib.get_close_matches(word, list(_ALIASES) + list(_TREC), n=1)
            if not near:
                lowered = {**lower_trec, **lower_alias}
                near = [lowered[m] for m in difflib.get_close_matches(word.lower(),
                                                                       list(lowered), n=1)]
            base = near[0] if near else None
        if base is not None:
            guess = _spelled(base, rest, relevant_min)
    if known is None:
        return guess
    known = [str(k) for k in known]
    want = guess or text
    if want in known:
        return want
    try:
        target = parse_measure(want, relevant_min=relevant_min)
    except InputError:
        target = None
    if target is not None:
        for k in known:
            try:
                m = parse_measure(k, relevant_min=relevant_min)
            except InputError:
                continue
            if (m.name, m.cutoff) == (target.name, target.cutoff):
                return k
    lowered = {k.lower(): k for k in known}
    near = difflib.get_close_matches(want.lower(), list(lowered), n=1)
    return lowered[near[0]] if near else None


def parse_measure(name, *, relevant_min: int = 1) -> Measure:
    """Parse one ir_measures-style measure name.

    Parameters
    ----------
    name : str or Measure
        e.g. ``"nDCG(dcg='exp-log2')@10"``, ``"R(rel=2)@10"``, ``"AP"``, ``"IPrec@0.5"``,
        ``"RBP(p=0.9)"``; a single trec_eval name (``"map"``, ``"P_5"``, ``"ndcg_cut.10"``)
        is accepted too. A Measure is returned as it is.
    relevant_min : int, default 1
        The ``rel`` of measures that read it when the name does not set it (params
        ``scale.relevant_min``; trec_eval's ``-l``).

    Returns
    -------
    Measure
        ``str()`` of it is the canonical name: parameters at ir_measures' defaults
        (``dcg='log2'``, ``rel=1``, RBP's ``p=0.8``) are dropped.

    Raises
    ------
    InputError
        The name does not parse; names an unknown measure (the nearest known name is
        suggested) or parameter; has a cutoff that is not a positive integer (IPrec: a
        recall level outside [0, 1]); lacks a cutoff the measure needs (Success, Unjudged);
        has ``p`` outside (0, 1), a ``dcg`` other than log2 / exp-log2, gains that are not
        numbers keyed by integer grades, or a ``rel`` that is not an integer.

    Examples
    --------
    >>> str(parse_measure("NDCG(dcg='exp-log2')@10"))
    "nDCG(dcg='exp-log2')@10"
    >>> str(parse_measure("R@10", relevant_min=2))
    'R(rel=2)@10'
    >>> str(parse_measure("map_cut.10"))
    'AP@10'
    """
    if isinstance(name, Measure):
        return name
    text = str(name).strip()
    trec = _trec_names(text, relevant_min)
    if trec is not None:
        if len(trec) != 1:
            raise InputError("this trec_eval name stands for several measures", item=text,
                             fix="Give them to -m, which expands them")
        return trec[0]
    try:
        node = ast.parse(text, mode="eval").body
    except SyntaxError:
        lead = re.match(r"[A-Za-z_][A-Za-z0-9_]*", text)
        if lead and lead.group(0) not in _ALIASES and lead.group(0) not in _TREC:
            raise _unknown(text, lead.group(0)) from None  # e.g. a misspelt trec_eval name
        raise InputError("not a measure name", item=text, fix=_FIX) from None
    at = None
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.MatMult):
        at = _literal(node.right, text)
        node = node.left
    kwargs = {}
    if isinstance(node, ast.Call):
        if node.args:
            raise InputError("measure parameters are given by name, e.g. R(rel=2)@10",
                             item=text)
        kwargs = {kw.arg: _literal(kw.value, text) for kw in node.keywords}
        node = node.func
    if not isinstance(node, ast.Name) or node.id not in _ALIASES:
        raise _unknown(text, node.id if isinstance(node, ast.Name) else text)
    measure = _ALIASES[node.id]
    if node.id == "NumRelRet" and "rel" not in kwargs:
        kwargs["rel"] = relevant_min
    return _build(measure, at, kwargs, text, relevant_min)


def _build(measure: str, at, kwargs: dict, text: str, relevant_min: int) -> Measure:
    spec = SPECS[measure]
    allowed = spec["params"]
    for key in kwargs:
        if key not in allowed:
            raise InputError(f"{measure} takes no parameter `{key}`", item=text,
                             fix=f"{measure} accepts: {', '.join(allowed) or 'no parameters'}")
    kind = spec["at"]
    if at is None and kind == "required":
        raise InputError(f"{measure} needs a cutoff", item=text, fix=f"e.g. {measure}@10")
    if at is not None:
        if kind is None:
            raise InputError(f"{measure} takes no cutoff", item=text, found=f"@{at}")
        if kind == "recall":
            if isinstance(at, bool) or not isinstance(at, (int, float)) or not 0 <= at <= 1:
                raise InputError("IPrec's recall level must be a number in [0, 1]", item=text,
                                 found=repr(at))
            at = float(at)
        elif not _is_int(at) or at < 1:
            raise InputError("a measure's cutoff must be a positive integer", item=text,
                             found=repr(at))
    elif kind == "recall":
        raise InputError("IPrec needs a recall level", item=text, fix="e.g. IPrec@0.5")
    dcg = kwargs.get("dcg", "log2")
    if dcg not in DCG_FORMS:
        raise InputError(f"{measure}'s dcg must be 'log2' or 'exp-log2'", item=text, found=repr(dcg))
    default_rel = spec["params"].get("rel", 1)
    rel = kwargs.get("rel", relevant_min if default_rel is not None else None)
    if rel is not None and not _is_int(rel):
        raise InputError("rel must be an integer grade", item=text, found=repr(rel))
    if "rel" not in allowed:
        rel = 1
    gains = kwargs.get("gains")
    if gains is not None:
        if not isinstance(gains, dict) or not all(
                _is_int(g) and isinstance(v, (int, float)) and not isinstance(v, bool)
                for g, v in gains.items()):
            raise InputError("gains must map integer grades to numbers, e.g. "
                             "gains={0:0,1:1,2:3}", item=text, found=repr(gains))
        gains = tuple(sorted((g, v) for g, v in gains.items() if v != g)) or None
    judged_only = kwargs.get("judged_only", False)
    if not isinstance(judged_only, bool):
        raise InputError("judged_only must be True or False", item=text,
                         found=repr(judged_only))
    p = None
    if "p" in allowed:
        p = kwargs.get("p", spec["params"]["p"])
        if isinstance(p, bool) or not isinstance(p, (int, float)) or not 0 < p < 1:
            raise InputError(f"{measure}'s persistence p must be in (0, 1)", item=text,
                             found=repr(p))
        p = float(p)
    max_grade = kwargs.get("max_grade", 4)
    if not _is_int(max_grade) or max_grade < 1:
        raise InputError("ERR's max_grade must be a positive integer", item=text,
                         found=repr(max_grade))
    return Measure(name=measure, cutoff=at, rel=rel, dcg=dcg, gains=gains,
                   judged_only=judged_only, p=p, max_grade=max_grade)


# --- trec_eval's names ---------------------------------------------------------------

#: trec_eval measure -> (relgrade measure, what trec_eval's parameters are): "cutoffs"
#: (``P.5,10``), "recall" levels (``iprec_at_recall.0.1,0.5``), "gains"
#: (``ndcg.1=3,2=9``), "p" (``rbp.p=0.9``) or None. The default cutoffs are trec_eval's.
_TREC = {
    "map": ("AP", None), "map_cut": ("AP", "cutoffs"), "P": ("P", "cutoffs"),
    "recall": ("R", "cutoffs"), "recip_rank": ("RR", None), "Rprec": ("Rprec", None),
    "bpref": ("Bpref", None), "success": ("Success", "cutoffs"), "infAP": ("infAP", None),
    "ndcg": ("nDCG", "gains"), "ndcg_cut": ("nDCG", "cutoffs"),
    "num_ret": ("NumRet", None), "num_rel": ("NumRel", None),
    "num_rel_ret": ("NumRet", "rel"), "iprec_at_recall": ("IPrec", "recall"),
    "rbp": ("RBP", "p"), "rbp_resid": ("RBPResid", "p"), "unj": ("Unjudged", "cutoffs"),
    "set_P": ("P", None), "set_recall": ("R", None),
}
_TREC_DEFAULT_CUTOFFS = {"P": (5, 10, 15, 20, 30, 100, 200, 500, 1000),
                         "recall": (5, 10, 15, 20, 30, 100, 200, 500, 1000),
                         "map_cut": (5, 10, 15, 20, 30, 100, 200, 500, 1000),
                         "ndcg_cut": (5, 10, 15, 20, 30, 100, 200, 500, 1000),
                         "success": (1, 5, 10), "unj": (5, 10, 20)}
_TREC_RECALLS = (0.0, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 1.0)
# trec_eval prints a measure with one parameter as NAME_PARAM (P_5, iprec_at_recall_0.10)
_PRINTED = re.compile(r"(map_cut|P|recall|success|ndcg_cut|unj|iprec_at_recall)_([0-9.]+)\Z")


def _trec_names(text: str, relevant_min: int) -> list[Measure] | None:
    """The measures a trec_eval name stands for, or None when it is not one."""
    printed = _PRINTED.match(text)
    if printed:
        base, params = printed.group(1), printed.group(2)
    else:
        base, _, params = text.partition(".")
    if base not in _TREC or base == "P" and not (printed or "." in text):
        # "P" alone is ir_measures' precision over the whole list
        return None
    measure, kind = _TREC[base]
    rel = {"rel": relevant_min} if "rel" in SPECS[measure]["params"] else {}
    if measure in ("RBP", "NumRet"):
        rel = {}
    if kind == "rel":
        return [_build(measure, None, {"rel": relevant_min}, text, relevant_min)]
    if kind in ("cutoffs", "recall"):
        # one measure per listed value: P.5,10 is P@5 and P@10; iprec_at_recall.0.5 one level
        if kind == "cutoffs":
            values, parse = (params.split(",") if params else _TREC_DEFAULT_CUTOFFS[base]), int
            rule = "a trec_eval cutoff must be a positive integer"
        else:
            values, parse = (params.split(",") if params else _TREC_RECALLS), float
            rule = "a recall level must be a number in [0, 1]"
        out = []
        for v in values:
            try:
                x = parse(v)
            except ValueError:
                raise InputError(rule, item=text, found=repr(v)) from None
            out.append(_build(measure, x, dict(rel), text, relevant_min))
        return out
    kwargs = dict(rel)
    if kind == "p":
        # trec_eval's RBP: p = 0.9 by default and graded gains
        kwargs["p"] = 0.9
        for pair in filter(None, params.split(",")):
            key, _, value = pair.partition("=")
            if key != "p":
                raise InputError(f"{base} takes the parameter p", item=text, found=key)
            try:
                kwargs["p"] = float(value)
            except ValueError:
                raise InputError("p must be a number in (0, 1)", item=text,
                                 found=repr(value)) from None
    elif kind == "gains":
        gains = {}
        for pair in filter(None, params.split(",")):
            grade, _, gain = pair.partition("=")
            try:
                gains[int(grade)] = float(gain)
            except ValueError:
                raise InputError("ndcg's gains are GRADE=GAIN pairs, e.g. ndcg.1=3,2=9",
                                 item=text, found=repr(pair)) from None
        if gains:
            kwargs["gains"] = gains
    elif params:
        raise InputError(f"trec_eval's {base} takes no parameters", item=text)
    return [_build(measure, None, kwargs, text, relevant_min)]


def value_range(name, *, relevant_min: int = 1) -> tuple[float, float] | None:
    """The range of measure ``name``'s per-query values, and so of their means.

    Parameters
    ----------
    name : str
        A measure name :func:`parse_measure` reads (``nDCG(dcg='exp-log2')@10``).
    relevant_min : int, default 1

    Returns
    -------
    tuple of (float, float) or None
        ``(0.0, 1.0)`` for a measure of :data:`UNIT_RANGE`; None for a count.

    Raises
    ------
    InputError
        As :func:`parse_measure`.

    Examples
    --------
    >>> value_range("nDCG@10"), value_range("NumRel")
    ((0.0, 1.0), None)
    """
    return (0.0, 1.0) if parse_measure(name, relevant_min=relevant_min).name in UNIT_RANGE \
        else None


def parse_measures(names, *, relevant_min: int = 1) -> list[Measure]:
    """Parse measure names as ``relgrade evaluate -m`` takes them, trec_eval's included.

    Parameters
    ----------
    names : iterable of str
        ir_measures names (``"nDCG@10"``, ``"AP"``) and trec_eval names, one of which may
        stand for several measures: ``"P.5,10"`` is P@5 and P@10, ``"ndcg_cut"`` is nDCG at
        trec_eval's default cutoffs 5, 10, 15, 20, 30, 100, 200, 500, 1000.
    relevant_min : int, default 1
        As for :func:`parse_measure`.

    Returns
    -------
    list of Measure
        In the order given (a name given twice gives its measure twice).

    Raises
    ------
    InputError
        As :func:`parse_measure`, naming the first bad name.
    """
    out: list[Measure] = []
    for name in names:
        text = str(name).strip()
        found = _trec_names(text, relevant_min)
        out += found if found is not None else [parse_measure(text, relevant_min=relevant_min)]
    return out


def trec_eval_name(measure: Measure) -> str | None:
    """The name trec_eval prints for a measure, or None when trec_eval has no such measure.

    Parameters
    ----------
    measure : Measure

    Returns
    -------
    str or None
        e.g. ``map``, ``map_cut_10``, ``P_5``, ``ndcg_cut_10``, ``recip_rank``,
        ``iprec_at_recall_0.10``, ``rbp`` (p = 0.9 with graded gain), ``unj_5``. trec_eval's
        relevance level is one per run (``-l``), so ``rel`` is not part of the name.
    """
    m, k = measure, measure.cutoff
    if m.name == "nDCG":
        if m.dcg != "log2" or m.judged_only or (m.gains and k is not None):
            return None
        return "ndcg" if k is None else f"ndcg_cut_{k}"
    if m.name in ("AP", "P", "R", "Success"):
        if m.name == "AP" and m.judged_only:
            return None
        if k is None:
            return {"AP": "map", "P": "set_P", "R": "set_recall", "Success": None}[m.name]
        return {"AP": "map_cut", "P": "P", "R": "recall", "Success": "success"}[m.name] + \
            f"_{k}"
    if m.name == "RR":
        return "recip_rank" if k is None else None
    if m.name == "IPrec":
        return f"iprec_at_recall_{k:.2f}"
    if m.name == "Unjudged":
        return f"unj_{k}"
    if m.name in ("RBP", "RBPResid"):
        if m.p != 0.9 or k is not None or (m.name == "RBP" and m.rel is not None):
            return None
        return "rbp" if m.name == "RBP" else "rbp_resid"
    if m.name == "NumRet":
        return "num_ret" if m.rel is None else "num_rel_ret"
    return {"Rprec": "Rprec", "Bpref": "bpref", "infAP": "infAP",
            "NumRel": "num_rel"}.get(m.name)


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
