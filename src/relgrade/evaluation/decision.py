"""The decision report: what the comparison found, as ``report.md`` and an offline ``report.html``.

Input is the comparison report in its JSON layout (``metrics/comparisons.json``, written by
:meth:`relgrade.evaluation.report.Comparison.to_dict`; described in
:mod:`relgrade.evaluation.compare`). :func:`build_decision` reads it into a
:class:`Decision` whose cells are already formatted, and two renderers lay the same cells out:
:func:`to_markdown` and :func:`to_html` (Jinja2 templates in ``evaluation/templates/``; the
HTML page has its styles inlined and its charts as static SVG from
:mod:`relgrade.evaluation.charts`, so it opens without network). :func:`arm_summaries` gives
the few numbers per arm kept as ``dvc metrics`` (one small file per arm).

Judged@k caveat: an arm is scored with every chunk that has no grade counted as not
relevant (trec_eval's rule). Below the pool depth every retrieved chunk of a pooled arm was
graded, so the rule costs nothing; at a cutoff deeper than the pool depth part of each ranked
list was never graded, and the arm's numbers there are lower bounds that favour the arms the
pool was built from (Buckley & Voorhees 2004, "Retrieval evaluation with incomplete
information"). Every verdict at such a cutoff says so, with the arms' Judged@k.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import jinja2
from markupsafe import Markup

from relgrade.errors import InputError
from relgrade.evaluation import charts
from relgrade.evaluation.measures import parse_measure
from relgrade.text import inert, markdown_text

UNDEFINED = "—"

#: Hex digits of the key's sha256 a decision file carries.
KEY_DIGITS = 12


def _num(x, digits: int = 4, sign: str = "") -> str:
    """``x`` to ``digits`` decimals ("—" when undefined), never printed as -0.0000."""
    if x is None or (isinstance(x, float) and not math.isfinite(x)):
        return UNDEFINED
    return f"{round(float(x), digits) + 0.0:{sign}.{digits}f}"


def _p(p) -> str:
    return UNDEFINED if p is None else f"{p:.2g}"


def _p_finite(p) -> str:
    """A p-value as the report's other p-values are printed (two significant digits, so a
    small one reads ``6.8e-05``, not ``0.000``); "—" when undefined."""
    if p is None or (isinstance(p, float) and not math.isfinite(p)):
        return UNDEFINED
    return _p(p)


def _int(n) -> str:
    return UNDEFINED if n is None else str(n)


@dataclass(frozen=True)
class Decision:
    """The decision report's content, every cell a formatted string.

    Attributes
    ----------
    header : list of (str, str)
        What the numbers rest on: key sha256, pool version, post-hoc flag, seed, resamples,
        Holm family, level, pool depth.
    primary : str
        The measure the verdicts lead with (params ``metrics.primary``).
    verdicts : list of str
        One sentence per comparison on ``primary``, with its judged@k caveat if any.
    other_verdicts : list of str
        The same for every other measure.
    caveats : list of str
        One line per cutoff deeper than the pool depth, with each arm's Judged@k; a single
        line saying none is when every cutoff lies within the pool depth.
    arms, pairs, segments, judged, leave_one_out, condensed, orderings, noise_bands : list of dict
        Table rows, keys as in the templates.
    noise : list of (str, str)
        The label-noise audit's summary (auditor, round, queries, pairs, grades changed).
    charts : list of str
        SVG elements (HTML only): the arms on ``primary`` and the paired differences on it.
    triage : list of str
        A triage key only (``grading.mode: triage``): the model's miss rate on its 0s with
        its interval, and the note that the unsampled 0s are model-judged; empty otherwise.
    translation : dict or None
        Every arm under the previous and the current key (:func:`translation_cells`); None
        when no key was replaced (the report then has no such section).
    cost : dict or None
        The judging cost (:func:`cost_cells`); None when not given.
    ppi : dict or None
        A prediction-powered experiment only (``grading.mode: ppi``): :func:`ppi_cells` of
        the ppi stage's result.
    post_hoc : dict or None
        A post-hoc key beside the frozen one (:func:`post_hoc_cells`); None when there is
        none (the report then has no such section).
    ranks : dict or None
        The arms' rank-sets and tied groups on ``primary`` (:func:`rank_set_cells`); None
        without rank-sets (the report then has no such section).
    decided_by : str
        In ppi mode, the sentence saying that PPI++ decides and what stands beside it (the
        report's ``estimator.note``); "" otherwise.
    primary_holm : str
        The Verdicts heading's words on the Holm family of the primary measure's verdicts:
        every comparison made (single mode), or in ppi mode the comparisons on the measure
        (PPI++ or anytime) or every comparison (a measure left model-only).
    holm_column : str
        The paired-comparisons table's Holm column header; in ppi mode it says that each
        cell names its family.
    """

    header: list
    primary: str
    verdicts: list
    other_verdicts: list
    caveats: list
    arms: list
    pairs: list
    segments: list
    judged: list
    unique_pairs: list
    leave_one_out: list
    condensed: list
    noise: list
    orderings: list
    noise_bands: list
    level: str
    min_change: str
    charts: list = field(default_factory=list)
    triage: list = field(default_factory=list)
    translation: dict | None = None
    cost: dict | None = None
    ppi: dict | None = None
    post_hoc: dict | None = None
    ranks: dict | None = None
    decided_by: str = ""
    primary_holm: str = "Holm-adjusted over every comparison made"
    holm_column: str = "p (Holm)"


def _cutoff(measure: str) -> int | None:
    return parse_measure(measure).cutoff


def _need(report: dict, key: str, source=None):
    if key not in report:
        raise InputError("comparison report lacks a section", path=source, item=key,
                         fix="rerun the compare stage (dvc repro compare)")
    return report[key]


def judged_caveats(report: dict) -> dict[int, str]:
    """Per cutoff deeper than the pool depth, the caveat its verdicts carry.

    Parameters
    ----------
    report : dict
        The comparison report (JSON layout); reads ``measures`` and ``pool_bias``
        (``depth``, ``judged``: rows ``{arm, k, judged}``).

    Returns
    -------
    dict
        ``k -> sentence`` for every cutoff k of the compared measures with k > depth, e.g.
        ``"at cutoff 20, deeper than the pool depth 10, ungraded chunks count as not
        relevant (Judged@20: bm25 0.62, tfidf 0.55)"``; empty without pool-bias tables.
    """
    bias = report.get("pool_bias") or {}
    depth = bias.get("depth")
    if depth is None:
        return {}
    judged = {}
    for row in bias.get("judged") or []:
        judged.setdefault(int(row["k"]), []).append(f"{row['arm']} {_num(row['judged'], 2)}")
    cutoffs = sorted({k for m in _need(report, "measures") if (k := _cutoff(m)) is not None})
    out = {}
    for k in cutoffs:
        if k > depth:
            share = "; ".join(judged.get(k, [])) or "not measured"
            out[k] = (f"at cutoff {k}, deeper than the pool depth {depth}, ungraded chunks "
                      f"count as not relevant (Judged@{k}: {share})")
    return out


def verdicts(report: dict) -> list[tuple[str, str]]:
    """Every comparison's verdict with its judged@k caveat, as ``(measure, sentence)``.

    A post-hoc report prefixes each sentence with ``post-hoc:``.
    """
    caveats = judged_caveats(report)
    prefix = "post-hoc: " if report.get("post_hoc") else ""
    out = []
    for c in _need(report, "comparisons"):
        text = prefix + c["verdict"]
        k = _cutoff(c["measure"])
        if k in caveats:
            text += "; " + caveats[k]
        out.append((c["measure"], text))
    return out


def _primary(report: dict, primary: str | None, source=None) -> str:
    measures = list(_need(report, "measures", source))
    if not measures:
        raise InputError("comparison report has no measures", path=source, item="measures")
    if primary is None:
        return measures[0]
    if primary not in measures:
        raise InputError("primary measure not compared", path=source, item=primary,
                         fix="set metrics.primary to one of " + ", ".join(measures))
    return primary


def _against(report: dict, arm: str, base: str, measure: str) -> dict | None:
    """The comparison of ``arm`` against ``base`` on ``measure``, read as arm − base."""
    for c in report["comparisons"]:
        if c["measure"] != measure:
            continue
        if (c["arm_a"], c["arm_b"]) in ((arm, base), (base, arm)):
            sign = 1.0 if (c["arm_a"], c["arm_b"]) == (arm, base) else -1.0
            out = {"delta": sign * c["delta"], "p_holm": c["p_holm"],
                   "significant": c["significant"]}
            if c.get("estimator"):
                out["estimator"] = c["estimator"]
            # ppi mode: the model key's and the human sample's differences stand beside
            for label, key in (("model_only", "model_only"), ("human_only", "human_only")):
                other = c.get(key)
                if other is not None:
                    out[f"{label}_delta"] = sign * other["delta"]
                    out[f"{label}_p_holm"] = other.get("p_holm")
            return out
    return None


def arm_summaries(report: dict, *, primary: str | None = None, source=None,
                  rank_sets: dict | None = None) -> dict[str, dict]:
    """Per arm, the handful of numbers kept as ``dvc metrics`` (arms as rows).

    Parameters
    ----------
    report : dict
        The comparison report (JSON layout).
    primary : str, optional
        The measure summarised (default: the first compared).
    source : str or os.PathLike, optional
        Where the report was read from, named in errors.
    rank_sets : dict, optional
        The arms' rank-sets (the ``rank_sets`` of the comparison report, or of the ppi
        stage's result in ppi mode: :func:`relgrade.evaluation.ranksets.table_rank_sets`'s
        layout); used when its ``measure`` is the one summarised.

    Returns
    -------
    dict
        ``arm -> {"measure", "mean", "low", "high", ("weighted", "unweighted_mean"),
        "pool_version", "key", "judged", "baseline", "delta", "p_holm", "rank_low",
        "rank_high"}``: the arm's mean of
        ``primary`` with its interval (traffic-weighted when the report is, then with
        ``weighted: true`` and the unweighted mean beside it), the pool version and the first
        12 hex digits of the key's sha256 it was computed on (absent when the report lacks
        them; files of different pool versions are not comparable), its Judged@k at the
        measure's cutoff (absent without pool-bias tables or cutoff), and, for an arm other
        than the baseline that was compared with it, the difference arm − baseline and its
        Holm-adjusted p-value, and the arm's rank-set (rank 1 the best; with the others'
        sets, simultaneous coverage at the rank-sets' level) when ``rank_sets`` is given for
        the measure. Values are the report's, unrounded. In ppi mode (a report
        rewritten by :func:`relgrade.evaluation.ppi_decision.govern`) ``mean``, ``low``,
        ``high``, ``delta`` and ``p_holm`` are PPI++'s, and the row adds ``estimator``
        (``"ppi++"``, or ``"model-only"`` for a measure the ppi stage did not estimate),
        ``human_queries``, ``model_only_mean``/``_low``/``_high``,
        ``human_only_mean``/``_low``/``_high`` and, against the baseline,
        ``model_only_delta``, ``model_only_p_holm``, ``human_only_delta``,
        ``human_only_p_holm``. When the comparison against the baseline was decided by
        another estimator than the arm's mean (``"anytime"``: the stopping rule's confidence
        sequence, params ``grading.stop: anytime``), the row names it as
        ``delta_estimator``: ``delta`` and ``p_holm`` are that estimator's. A post-hoc
        report (``post_hoc: true``: a changed key, or in ppi mode a changed human key,
        allowed by ``grading.post_hoc``) gives every row ``post_hoc: true``.

    Raises
    ------
    InputError
        ``primary`` was not compared, or the report lacks ``arms``/``measures``.
    """
    measure = _primary(report, primary, source)
    k = _cutoff(measure)
    judged = {(r["arm"], int(r["k"])): r["judged"]
              for r in ((report.get("pool_bias") or {}).get("judged") or [])}
    base = (report.get("settings") or {}).get("baseline")
    # what the numbers were computed on, so `dvc metrics diff` shows a change of key
    # (12 hex digits of the key's sha256 keep `dvc metrics show` narrow and tell keys apart)
    stamp = {k: v for k, v in (("pool_version", report.get("pool_version")),
                               ("key", (report.get("key_sha256") or "")[:KEY_DIGITS]),
                               ("post_hoc", report.get("post_hoc") is True)) if v}
    out = {}
    for arm, per_measure in _need(report, "arms", source).items():
        ci = per_measure.get(measure)
        if ci is None:
            continue
        row = {"measure": measure, "mean": ci["estimate"], "low": ci["low"], "high": ci["high"]}
        if ci.get("estimator"):
            # ppi mode: which estimator decides, and the other two beside it, labelled
            row["estimator"] = ci["estimator"]
            for label in ("model_only", "human_only"):
                other = ci.get(label)
                if other is not None:
                    row.update({f"{label}_mean": other["estimate"],
                                f"{label}_low": other["low"], f"{label}_high": other["high"]})
            if ci.get("human_n") is not None:
                row["human_queries"] = ci["human_n"]
        if report.get("weighted"):
            # the mean and interval are traffic-weighted; the plain mean stands beside them
            row.update(weighted=True, unweighted_mean=ci.get("unweighted_mean"))
        row.update(stamp)
        if (arm, k) in judged:
            row["judged"] = judged[(arm, k)]
        if base and arm != base:
            vs = _against(report, arm, base, measure)
            if vs is not None:
                row.update(baseline=base, delta=vs["delta"], p_holm=vs["p_holm"])
                if vs.get("estimator") and vs["estimator"] != row.get("estimator"):
                    # the difference was made by another estimator than the mean (the
                    # anytime stopping rule's confidence sequence): the file names it
                    row["delta_estimator"] = vs["estimator"]
                row.update({k: v for k, v in vs.items() if k.startswith(("model_only_",
                                                                         "human_only_"))})
        ranks = _ranks_for(rank_sets, measure).get(arm)
        if ranks is not None:
            row.update(rank_low=ranks["rank_low"], rank_high=ranks["rank_high"])
        out[arm] = row
    return out


def holm_families(report: dict) -> dict | None:
    """In ppi mode, the Holm family each comparison's p-value was adjusted over.

    Parameters
    ----------
    report : dict
        The comparison report (JSON layout); ppi mode when it has a top-level ``estimator``
        block (:func:`relgrade.evaluation.ppi_decision.govern`).

    Returns
    -------
    dict or None
        None outside ppi mode (one family: every comparison made). Else ``{"all": K,
        "measures": {measure: (estimator, k)}}``: ``K`` the compare stage's family (every
        comparison made, the family of a model-only row), and per measure the ppi stage
        estimated, the estimator that decides its comparisons (``"ppi++"`` or
        ``"anytime"``) and ``k`` the comparisons on that measure, its Holm family
        (docs/ppi.md: Holm's family is the comparisons made, per measure).

    Examples
    --------
    >>> holm_families({"estimator": {"decides": "ppi++"}, "comparisons": [
    ...     {"measure": "m", "estimator": "ppi++", "holm_family": 2,
    ...      "model_only": {"holm_family": 4}},
    ...     {"measure": "r", "estimator": "model-only", "holm_family": 4}]})
    {'all': 4, 'measures': {'m': ('ppi++', 2)}}
    """
    if not report.get("estimator"):
        return None
    every, measures = 0, {}
    for c in report.get("comparisons") or []:
        if c.get("estimator") in (None, "model-only"):
            every = max(every, int(c.get("holm_family") or 0))
            continue
        every = max(every, int((c.get("model_only") or {}).get("holm_family") or 0))
        measures[c["measure"]] = (str(c["estimator"]), int(c.get("holm_family") or 0))
    return {"all": every, "measures": measures}


def _comparisons(k: int) -> str:
    return f"{k} comparison{'s' if k != 1 else ''}"


def _estimator_name(estimator: str) -> str:
    return "PPI++" if estimator == "ppi++" else estimator


def holm_header(report: dict) -> str | None:
    """The report header's Holm line in ppi mode, naming both families (None outside it).

    Parameters
    ----------
    report : dict
        The comparison report (JSON layout), as :func:`holm_families` takes it; its
        ``settings.alpha`` is the model-only family's level, ``estimator.alpha`` (when
        present) the ppi stage's (``1 - ppi.level``).

    Returns
    -------
    str or None
        One line: per (estimator, family size) the measures it decides, then the model-only
        family over every comparison made; None outside ppi mode.

    Examples
    --------
    >>> holm_header({"settings": {"alpha": 0.05},
    ...     "estimator": {"decides": "ppi++", "alpha": 0.05},
    ...     "comparisons": [{"measure": "m", "estimator": "ppi++", "holm_family": 2,
    ...                      "model_only": {"holm_family": 4}},
    ...                     {"measure": "r", "estimator": "model-only", "holm_family": 4}]})
    'PPI++ verdicts over the 2 comparisons on their measure (m) at alpha 0.05; model-only verdicts over all 4 comparisons made at alpha 0.05'
    """
    families = holm_families(report)
    if families is None:
        return None
    alpha = (report.get("settings") or {}).get("alpha", UNDEFINED)
    ppi_alpha = (report.get("estimator") or {}).get("alpha")
    groups: dict = {}
    for m, (est, k) in families["measures"].items():
        groups.setdefault((est, k), []).append(m)
    parts = [f"{_estimator_name(est)} verdicts over the {_comparisons(k)} on their measure "
             f"({', '.join(ms)})" + ("" if ppi_alpha is None else f" at alpha {ppi_alpha:g}")
             for (est, k), ms in groups.items()]
    parts.append(f"model-only verdicts over all {families['all']} comparisons made at alpha "
                 f"{alpha}")
    return "; ".join(parts)


def _family_note(c: dict, families: dict | None) -> str:
    """In ppi mode, after a Holm p-value in the comparisons table, the family it was adjusted
    over: `` (of 3 on the measure)`` or `` (of all 27)``; "" outside ppi mode."""
    if families is None or c.get("p_holm") is None:
        return ""
    if c["measure"] in families["measures"] and c.get("estimator") not in (None, "model-only"):
        return f" (of {families['measures'][c['measure']][1]} on the measure)"
    return f" (of all {families['all']})"


def _family_words(measure: str, families: dict | None) -> dict:
    """The Verdicts heading's family words and the Holm column's header, in ppi mode."""
    if families is None:
        return {}
    if measure in families["measures"]:
        est, k = families["measures"][measure]
        words = f"{_estimator_name(est)}, Holm-adjusted over the {_comparisons(k)} made on it"
    else:
        words = f"model key only, Holm-adjusted over all {families['all']} comparisons made"
    return {"primary_holm": words,
            "holm_column": "p (Holm, of the family named)"}


def _rests_on(ci: dict, power: dict) -> dict:
    """An arms-table row's ``n`` and ``needed`` cells: the queries its number rests on and
    the queries a 2% change needs.

    Outside ppi mode, the arm's queries and its power analysis as they are. On a PPI++ row
    the power analysis is the model key's (the compare stage's), labelled ``(model-only)``;
    with ``lambda`` above 0 the row rests on every query's model grades and the human
    sample's people's grades, and says both; with ``lambda`` 0 PPI++ equals human-only, so
    the row counts the human sample's queries, not all of them.

    Examples
    --------
    >>> _rests_on({"n": 36, "estimator": "ppi++", "lambda": 0.4, "human_n": 10},
    ...           {"n_needed": 97})
    {'n': '36 (10 by people)', 'needed': '97 (model-only)'}
    >>> _rests_on({"n": 36, "estimator": "ppi++", "lambda": 0.0, "human_n": 11},
    ...           {"n_needed": 97})
    {'n': '11 (people only: λ = 0)', 'needed': '97 (model-only)'}
    >>> _rests_on({"n": 36}, {"n_needed": 97})
    {'n': '36', 'needed': '97'}
    """
    n, needed = _int(ci.get("n")), _int(power.get("n_needed"))
    if ci.get("estimator") != "ppi++":
        return {"n": n, "needed": needed}
    if ci.get("human_n") is not None:
        n = (f"{_int(ci['human_n'])} (people only: λ = 0)" if ci.get("lambda") == 0
             else f"{n} ({_int(ci['human_n'])} by people)")
    if needed != UNDEFINED:
        needed += " (model-only)"
    return {"n": n, "needed": needed}


def _by(entry: dict) -> str:
    """In ppi mode, the estimator that made an interval, to follow it in the report's tables
    (" (ppi++)", " (anytime)", " (model-only)"); "" outside ppi mode."""
    return f" ({entry['estimator']})" if entry.get("estimator") else ""


def _ranks_for(rank_sets: dict | None, measure: str) -> dict:
    if not rank_sets or rank_sets.get("measure") != measure:
        return {}
    return rank_sets.get("arms") or {}


def rank_set_cells(rank_sets: dict, *, human_only: bool = False) -> dict:
    """The rank-sets section's cells.

    Parameters
    ----------
    rank_sets : dict
        :func:`relgrade.evaluation.ranksets.table_rank_sets`'s layout (or the ppi stage's,
        with ``human_queries``).
    human_only : bool, default False
        The ppi stage's shared ``lambda`` is 0 on the measure: PPI++ equals human-only, and
        the sentence says the estimates rest on the human sample's queries alone.

    Returns
    -------
    dict
        ``{"measure", "sentence", "rows": [{"arm", "estimate", "ranks"}], "groups"}``: rows
        best first, ``ranks`` as ``"2"`` or ``"2–4"``; ``groups`` the tied groups, best
        first, each a comma-separated list of arms.
    """
    arms = rank_sets["arms"]
    order = [a for g in rank_sets["tied_groups"] for a in g]
    rows = [{"arm": a, "estimate": _num(arms[a]["estimate"]),
             "ranks": str(arms[a]["rank_low"]) if arms[a]["rank_low"] == arms[a]["rank_high"]
             else f"{arms[a]['rank_low']}–{arms[a]['rank_high']}"} for a in order]
    on = ("PPI++ estimates (model key on every query, rectified on "
          f"{_int(rank_sets.get('human_queries'))} human-graded queries"
          + ("; here λ = 0, so each estimate is the human-only one and rests on those "
             f"{_int(rank_sets.get('human_queries'))} queries alone" if human_only else "")
          + ")" if rank_sets.get("human_queries") is not None
          else "the frozen key's per-query means")
    sentence = (f"Each arm's rank on {rank_sets['measure']} (1 the best) with simultaneous "
                f"{rank_sets['level']:.0%} coverage: with that probability every arm's true rank "
                f"lies in its set at once. From {on} over {_int(rank_sets.get('queries'))} "
                f"queries, {_int(rank_sets['n_resamples'])} bootstrap resamples (seed "
                f"{_int(rank_sets.get('seed'))}, stream \"{rank_sets.get('stream', '')}\"). "
                "Arms in one tied group cannot be told apart.")
    return {"measure": rank_sets["measure"], "sentence": sentence, "rows": rows,
            "groups": [", ".join(g) for g in rank_sets["tied_groups"]]}


def _order(arms) -> str:
    return " > ".join(arms) or UNDEFINED


def translation_cells(translation: dict) -> dict:
    """The translation section's formatted cells.

    Parameters
    ----------
    translation : dict
        :meth:`relgrade.evaluation.translate.Translation.to_dict`.

    Returns
    -------
    dict
        ``measure``; ``sides``: rows ``{"which", "key", "pool", "rubric", "round",
        "queries"}`` for the previous and the current key; ``arms``: rows ``{"arm",
        "previous", "current", "shift", "rank"}``; ``order_previous``, ``order_current``
        (arms joined by " > "), ``tau`` (Kendall's tau-b, 3 decimals, over the arms both
        keys judged), ``summary`` (one sentence: whether the order changed, naming the arms
        new to the previous key, ``translation["arms_new"]``, left out of it), ``why`` (one sentence: why the key changed,
        from ``translation["regraded"]`` — the count of pairs a revision regraded on edited
        content — or the two pool versions; "" when neither tells).
    """
    keys = []
    for which in ("previous", "current"):
        k = translation[which]
        keys.append({"which": which, "key": str(k.get("key_sha256") or UNDEFINED),
                     "pool": str(k.get("pool_version") or UNDEFINED),
                     "rubric": str(k.get("rubric_version") or UNDEFINED),
                     "round": _int(k.get("round")), "queries": _int(k.get("queries"))})
    arms = [{"arm": r["arm"], "previous": _num(r["previous"]), "current": _num(r["current"]),
             "shift": _num(r["shift"], sign="+"),
             "rank": f"{r['rank_previous']} → {r['rank_current']}"}
            for r in translation["arms"]]
    tau = _num(translation.get("kendall_tau"), 3)
    new = list(translation.get("arms_new") or [])
    if new:
        summary = _translation_with_new_arms(translation, tau, new)
    elif translation["order_changed"]:
        summary = (f"the arms' order changed between the keys (Kendall τ {tau}): numbers "
                   "published under the previous key do not carry over")
    else:
        summary = (f"the arms' order is the same under both keys (Kendall τ {tau}); each "
                   "arm's number moved by its shift")
    if translation.get("regraded") is not None:
        n = int(translation["regraded"])
        why = (f"The current key revises the previous one: {n} pair{'s' if n != 1 else ''} "
               "regraded because what they show changed (chunk text, intent or rubric); the key "
               "record lists each with its grade before and after (regraded).")
    elif keys[0]["pool"] != keys[1]["pool"]:
        why = (f"The pool changed ({keys[0]['pool']} → {keys[1]['pool']}): the current key is "
               "a new pool version, not a revision.")
    else:
        why = ""
    return {"measure": translation["measure"], "sides": keys, "arms": arms, "why": why,
            "order_previous": _order(translation["order_previous"]),
            "order_current": _order(translation["order_current"]), "tau": tau,
            "shared": _int(translation.get("queries_shared")), "summary": summary}


def _translation_with_new_arms(translation: dict, tau: str, new: list) -> str:
    """The translation's summary when arms are new to the previous key: its tau and order
    are of the arms both keys judged (a new arm's previous number counts pairs never judged
    as not relevant), and a change of the full order made by the new arms alone says so."""
    names = ", ".join(new)
    theirs = "its" if len(new) == 1 else "their"
    over = (f"Kendall τ {tau} over the arms both keys judged"
            if translation.get("kendall_tau") is not None else
            "Kendall τ undefined over the arms both keys judged: fewer than two, or tied "
            "under a key")
    aside = (f"{names}, new to the previous key, left out: {theirs} pairs that key lacks "
             "count as not relevant under it")
    if translation["order_changed"]:
        return (f"the order of the arms both keys judged changed ({over}): numbers published "
                f"under the previous key do not carry over; {aside}")
    if list(translation["order_previous"]) != list(translation["order_current"]):
        return (f"the order of the arms both keys judged is the same ({over}); the full "
                f"order changed through {names} alone, new to the previous key ({theirs} "
                "pairs that key lacks count as not relevant under it)")
    return (f"the arms' order is the same under both keys ({over}; {aside}); each arm's "
            "number moved by its shift")


def cost_cells(cost: dict) -> dict:
    """The judging-cost section's formatted cells: people's work in annotator-hours, models'
    in calls.

    Parameters
    ----------
    cost : dict
        :func:`relgrade.pipeline.cost.judging_cost`'s result (``graders``, each with
        ``worker``; ``spent``, ``pending``, ``spent_hours``, ``pending_hours``,
        ``spent_calls``, ``pending_calls``). An entry without ``worker`` is a person's.

    Returns
    -------
    dict
        ``graders``: rows ``{"grader", "worker", "spent", "pending", "each", "spent_cost",
        "pending_cost"}``: ``each`` "30 s" (a person) or "1 call" (a model), the costs
        "1.25 h" (hours to 2 decimals) or "4560 calls"; ``total``: ``spent``, ``pending``
        (judgments) and ``spent_cost``, ``pending_cost`` (the hours and the calls, each
        named when such a grader is there).

    Examples
    --------
    >>> c = cost_cells({"graders": {
    ...     "m": {"worker": "model", "spent": 40, "pending": 0, "calls_per_judgment": 1,
    ...           "spent_calls": 40, "pending_calls": 0},
    ...     "p": {"worker": "person", "spent": 12, "pending": 0, "seconds_per_judgment": 30.0,
    ...           "spent_hours": 0.1, "pending_hours": 0.0}},
    ...     "spent": 52, "pending": 0, "spent_hours": 0.1, "pending_hours": 0.0,
    ...     "spent_calls": 40, "pending_calls": 0})
    >>> c["graders"][0]["spent_cost"], c["total"]["spent_cost"]
    ('40 calls', '0.10 annotator-hours + 40 model calls')
    """
    rows = []
    for g, c in cost["graders"].items():
        if c.get("worker") == "model":
            k = int(c["calls_per_judgment"])
            rows.append({"grader": g, "worker": "model", "spent": _int(c["spent"]),
                         "pending": _int(c["pending"]), "each": f"{k} call{'s' if k != 1 else ''}",
                         "spent_cost": f"{c['spent_calls']} calls",
                         "pending_cost": f"{c['pending_calls']} calls"})
        else:
            rows.append({"grader": g, "worker": "person", "spent": _int(c["spent"]),
                         "pending": _int(c["pending"]),
                         "each": f"{c['seconds_per_judgment']:g} s",
                         "spent_cost": f"{_num(c['spent_hours'], 2)} h",
                         "pending_cost": f"{_num(c['pending_hours'], 2)} h"})
    kinds = {r["worker"] for r in rows}

    def both(which):
        parts = []
        if "person" in kinds:
            parts.append(f"{_num(cost[f'{which}_hours'], 2)} annotator-hours")
        if "model" in kinds:
            parts.append(f"{cost.get(f'{which}_calls', 0)} model calls")
        return " + ".join(parts) or UNDEFINED

    total = {"spent": _int(cost["spent"]), "pending": _int(cost["pending"]),
             "spent_cost": both("spent"), "pending_cost": both("pending")}
    return {"graders": rows, "total": total}


def post_hoc_cells(post_hoc: dict) -> dict:
    """The post-hoc section's formatted cells: the corrections, both keys, each arm under both.

    The section stands beside the frozen key's numbers and never replaces them: the verdicts,
    the arms and the decision files rest on the frozen key alone.

    Parameters
    ----------
    post_hoc : dict
        ``measure`` (the primary measure); ``frozen`` and ``post_hoc``: the two keys' records
        (``key_sha256``, ``frozen_at``; the post-hoc one with ``corrections`` and
        ``corrections_set_aside``, rows of :data:`relgrade.protocol.corrections.CORRECTION`,
        both absent for a changed key allowed by ``grading.post_hoc``); ``arms``: arm →
        ``{"frozen": mean or None, "post_hoc": mean or None}``, each arm's mean of
        ``measure`` in its metrics file under that key (None when not computed).

    Returns
    -------
    dict
        ``measure``; ``summary`` (one sentence: how many corrections, whose grades, when,
        who made them, how many set aside); ``sides``: rows ``{"which", "key",
        "frozen_at"}``; ``corrections``: rows ``{"query", "chunk", "before", "after",
        "grader", "by", "corrected_at", "reason"}`` in the order recorded (``by`` "—" when
        the correction names no one); ``arms``: rows ``{"arm",
        "frozen", "post_hoc", "change"}`` (4 decimals; change = post-hoc − frozen).

    Examples
    --------
    >>> c = post_hoc_cells({"measure": "ndcg@10",
    ...     "frozen": {"key_sha256": "aa", "frozen_at": "t0"},
    ...     "post_hoc": {"key_sha256": "bb", "frozen_at": "t2", "corrections": [
    ...         {"query_id": "q", "chunk_id": "c", "grade_before": 0, "grade": 2,
    ...          "reason": "answers it", "grader": "g", "corrected_at": "t1",
    ...          "corrected_by": "Ana"}],
    ...         "corrections_set_aside": []},
    ...     "arms": {"a": {"frozen": 0.5, "post_hoc": 0.625}}})
    >>> c["summary"]
    "1 correction of g's grades by Ana, recorded with `relgrade grade correct` at t1."
    >>> c["arms"][0]["change"]
    '+0.1250'
    """
    ph = post_hoc["post_hoc"]
    applied = list(ph.get("corrections") or [])
    aside = list(ph.get("corrections_set_aside") or [])
    if applied:
        n = len(applied)
        whose = ", ".join(sorted({str(c.get("grader")) for c in applied}))
        named = sorted({inert(str(c["corrected_by"])) for c in applied
                        if c.get("corrected_by")})
        by = f" by {', '.join(named)}" if named else ""
        if named and any(not c.get("corrected_by") for c in applied):
            by += " (some unnamed)"
        times = sorted(str(c.get("corrected_at")) for c in applied)
        when = f"at {times[0]}" if times[0] == times[-1] else f"from {times[0]} to {times[-1]}"
        summary = (f"{n} correction{'s' if n != 1 else ''} of {whose}'s grades{by}, recorded "
                   f"with `relgrade grade correct` {when}.")
    else:
        summary = ("A changed key used after metrics were seen, allowed by params "
                   "`grading.post_hoc`; no correction recorded.")
    if aside:
        summary += (f" {len(aside)} set aside (made on other content, or of a pair the key "
                    "no longer holds).")
    sides = [{"which": which, "key": str(rec.get("key_sha256") or UNDEFINED),
             "frozen_at": str(rec.get("frozen_at") or UNDEFINED)}
             for which, rec in (("frozen", post_hoc["frozen"]), ("post-hoc", ph))]
    rows = [{"query": str(c["query_id"]), "chunk": str(c["chunk_id"]),
             "before": _int(c.get("grade_before")), "after": _int(c.get("grade")),
             "grader": str(c.get("grader") or UNDEFINED),
             "by": str(c.get("corrected_by") or UNDEFINED),
             "corrected_at": str(c.get("corrected_at") or UNDEFINED),
             "reason": str(c.get("reason") or "")} for c in applied]
    arms = []
    for arm, v in post_hoc["arms"].items():
        before, after = v.get("frozen"), v.get("post_hoc")
        change = None if before is None or after is None else after - before
        arms.append({"arm": arm, "frozen": _num(before), "post_hoc": _num(after),
                     "change": _num(change, sign="+")})
    return {"measure": post_hoc["measure"], "summary": summary, "sides": sides,
            "corrections": rows, "arms": arms}


def _capped(row: dict) -> str:
    """`` (capped)`` after a PPI++ interval held to the human-only half-width, `` (wider than
    human-only)`` after one the cap did not hold because the human-only interval has zero
    width (:func:`relgrade.evaluation.ppi_table.estimate_rows`), else ``""``."""
    if row.get("capped"):
        return " (capped)"
    return " (wider than human-only)" if row.get("wider_than_human_only") else ""


def _significant(row: dict) -> str:
    """A difference row's Holm verdict: ``yes`` or ``no``; ``undefined (no spread)`` for a
    human-only or model-only difference with no spread, which has no test
    (:func:`relgrade.evaluation.ppi_table.no_spread_words`)."""
    if row.get("no_spread"):
        return "undefined (no spread)"
    return "yes" if row["significant"] else "no"


def _iv(row: dict) -> str:
    return f"{_num(row['estimate'], 4)} [{_num(row['low'], 4)}, {_num(row['high'], 4)}]"


def paraphrase_sentence(ppi: dict) -> str | None:
    """The prediction-powered section's sentence on the judge's paraphrase component (None
    when the ppi stage read no probe report).

    Parameters
    ----------
    ppi : dict
        The ppi stage's result; its ``paraphrase`` entry (see docs/ppi.md) is read.

    Examples
    --------
    >>> paraphrase_sentence({"paraphrase": {"source": "judges/probe-m.json", "sha256": "ab" * 32,
    ...     "used": False, "widen": True, "widened": False, "note": "ignored: another rubric"}})
    'Paraphrase component: judges/probe-m.json (sha256 abababababab) ignored: another rubric.'
    """
    para = ppi.get("paraphrase")
    if not para:
        return None
    head = f"Paraphrase component: {para['source']} (sha256 {para['sha256'][:12]})"
    if not para["used"]:
        return f"{head} {para['note']}."
    parts = []
    for m, c in para["components"].items():
        arms = ", ".join(f"{a} {_num(e['prompt_variance'], 6)}" for a, e in c["arms"].items())
        diffs = ", ".join(f"{e['arm_a']} − {e['arm_b']} {_num(e['prompt_variance'], 6)}"
                          for e in c["differences"])
        parts.append(f"{m}: {arms}" + (f"; differences {diffs}" if diffs else ""))
    what = (f"every PPI++ interval is widened by {para['draws']} × λ² × the prompt variance "
            "of the mean of the model's per-query values" if para["widened"] else
            "recorded, not widened (judges.probe.widen: false)")
    return (f"{head}, measured under the key grader's judge identity now on "
            f"{para['probed_pairs']} pairs of {para['probed_queries']} queries × "
            f"{para['paraphrases']} paraphrases: {what}. Prompt variance of the mean, "
            f"metric units squared: " + " | ".join(parts) + ".")


def ppi_cells(ppi: dict) -> dict:
    """The prediction-powered section's formatted cells, from the ppi stage's ``ppi.json``.

    Parameters
    ----------
    ppi : dict
        :mod:`relgrade.pipeline.stages.ppi`'s result: ``design``, ``estimates`` (per measure
        :func:`relgrade.evaluation.ppi_table.ppi_table`), ``judge_audit``, ``budget``.

    Returns
    -------
    dict
        ``design`` (one sentence), ``small_sample`` (the warning the ppi stage recorded for
        a human sample under the recommended size, ``design.small_sample.words``; None when
        it recorded none), ``measures`` (per measure: ``arms`` and ``pairs`` rows of
        the three estimates, each ``estimate [low, high]``, with lambda and Holm verdicts,
        ``capped`` and ``wider`` the counts of rows marked so),
        ``audit`` (leniency rows, order rows, flags) and ``budget`` (curve rows and the
        first budget reaching tau 0.9 per strategy).
    """
    d = ppi["design"]
    size = (f"share {d['human_fraction']}" if d.get("human_fraction") is not None
            else f"count {d.get('human_queries')}")
    design = (f"{d['model_grader']} (model) graded every pool pair of {d['queries']} queries; "
              f"{d['human_grader']} graded a seeded uniform sample of "
              f"{len(d['human_sample'])} queries in full ({size}, seed {d['seed']}): "
              f"{', '.join(d['human_sample'])}. Estimator: {d['rectifier']}. Intervals: "
              f"{d['interval']}"
              + (f" ({d['interval_words']})" if d.get("interval_words") else "")
              + f" at level {d['level']}.")
    measures = []
    for m, est in ppi["estimates"].items():
        arms = [{"arm": a, "ppi": _iv(r["ppi++"]) + _capped(r["ppi++"]),
                 "lam": _num(r["ppi++"]["lambda"], 2),
                 "model": _iv(r["model-only"]), "human": _iv(r["human-only"])}
                for a, r in est["arms"].items()]
        pairs = [{"pair": f"{r['arm_a']} − {r['arm_b']}",
                  "ppi": _iv(r["ppi++"]) + _capped(r["ppi++"]),
                  "ppi_holm": _p_finite(r["ppi++"]["p_holm"]),
                  "ppi_sig": "yes" if r["ppi++"]["significant"] else "no",
                  "model": _iv(r["model-only"]),
                  "model_sig": _significant(r["model-only"]),
                  "human": _iv(r["human-only"]),
                  "human_sig": _significant(r["human-only"])}
                 for r in est["differences"]]
        capped = sum(bool(r["ppi++"].get("capped")) for r in est["arms"].values()) + \
            sum(bool(r["ppi++"].get("capped")) for r in est["differences"])
        wider = sum(bool(r["ppi++"].get("wider_than_human_only"))
                    for r in [*est["arms"].values(), *est["differences"]])
        measures.append({"measure": m, "n": est["n"], "N": est["N"], "arms": arms,
                         "pairs": pairs, "capped": capped, "wider": wider,
                         "family": len(est["differences"])})
    ja = ppi["judge_audit"]
    leniency = [{"arm": x["arm"], "family": x["family"] or "", "mean": _num(x["mean"], 3),
                 "interval": f"[{_num(x['low'], 3)}, {_num(x['high'], 3)}]",
                 "pairs": x["pairs"]} for x in ja["leniency"]]
    order = [{"name": o["name"].replace("_", " "),
              "value": "undefined" if o["value"] is None else _num(o["value"], 3),
              "interval": "" if o["low"] is None else f"[{_num(o['low'], 3)}, "
                                                      f"{_num(o['high'], 3)}]",
              "pairs": o["pairs"]} for o in ja["order"]]
    b = ppi["budget"]
    curve = [{"strategy": r["strategy"], "budget": _num(r["budget"], 2),
              "judgments": r["judgments"], "hours": _num(r["annotator_hours"], 2),
              "tau": "undefined" if r["kendall_tau"] is None else _num(r["kendall_tau"], 3),
              "top": "undefined" if r["top_half_tau"] is None else _num(r["top_half_tau"], 3),
              "verdicts": _num(r["verdicts_preserved"], 3)} for r in b["curve"]]
    reach = [f"{s}: " + ("never" if r is None else
                         f"budget {_num(r['budget'], 2)} ({r['judgments']} judgments, "
                         f"{_num(r['annotator_hours'], 2)} h)")
             for s, r in b["tau_0.9"].items()]
    small = (d.get("small_sample") or {}).get("words")
    return {"design": design, "small_sample": None if small is None else f"Warning: {small}",
            "paraphrase": paraphrase_sentence(ppi), "measures": measures,
            "audit": {"leniency": leniency, "order": order, "flags": ja["flags"] or ["none"],
                      "spread": _num(ja["spread"], 3), "max_spread": _num(ja["max_spread"], 3)},
            "budget": {"reference": b["reference"], "curve": curve, "reach": reach}}


def build_decision(report: dict, *, primary: str | None = None, source=None,
                   translation: dict | None = None, cost: dict | None = None,
                   ppi: dict | None = None, post_hoc: dict | None = None,
                   rank_sets: dict | None = None) -> Decision:
    """Read the comparison report into the decision report's formatted cells and charts.

    Parameters
    ----------
    report : dict
        The comparison report (JSON layout of ``metrics/comparisons.json``).
    primary : str, optional
        The measure the verdicts and charts lead with (default: the first compared).
    source : str or os.PathLike, optional
        Where the report was read from, named in errors.
    translation : dict, optional
        :meth:`relgrade.evaluation.translate.Translation.to_dict` when a key was replaced.
    cost : dict, optional
        :func:`relgrade.pipeline.cost.judging_cost`'s result.
    ppi : dict, optional
        The ppi stage's result (``grading.mode: ppi``), see :func:`ppi_cells`.
    post_hoc : dict, optional
        A post-hoc key beside the frozen one, see :func:`post_hoc_cells`; reported in its own
        section, beside the frozen key's numbers, never in their place.
    rank_sets : dict, optional
        The arms' rank-sets (see :func:`arm_summaries`); reported with their tied groups
        when their measure is ``primary``'s.

    Returns
    -------
    Decision

    Raises
    ------
    InputError
        A section the report must have is missing, or ``primary`` was not compared.
    """
    for section in ("measures", "arms", "comparisons"):
        _need(report, section, source)
    measure = _primary(report, primary, source)
    settings = report.get("settings") or {}
    bias = report.get("pool_bias") or {}
    comparisons = report["comparisons"]
    family = max([c.get("holm_family") or 0 for c in comparisons] or [0])
    header = [("key sha256", str(report.get("key_sha256") or UNDEFINED)),
              ("pool version", str(report.get("pool_version") or UNDEFINED)),
              ("post-hoc", ("yes: the human sample's grades changed after the ppi "
                            "estimates were seen"
                            if (report.get("estimator") or {}).get("post_hoc")
                            else "yes: the key changed after metrics were seen")
               if report.get("post_hoc") else "no"),
              ("pool depth", _int(bias.get("depth"))),
              ("seed", _int(settings.get("seed"))),
              ("bootstrap", f"{_int(settings.get('bootstrap'))} resamples "
                            f"({settings.get('interval', UNDEFINED)})"),
              ("randomization", _randomization(settings, comparisons)),
              ("verdict test", _VERDICT_TESTS.get(str(settings.get("test", "sign-flip")),
                                                  UNDEFINED)),
              ("Holm", holm_header(report) or
               f"{family} comparisons at alpha {settings.get('alpha', UNDEFINED)}"),
              ("baseline", str(settings.get("baseline") or "none"))]
    if report.get("weighted"):
        header.append(("query weights", str(report.get("weighting") or "traffic-weighted")))
    if report.get("estimator"):
        e = report["estimator"]
        header.append(("decided by", f"PPI++ ({e.get('human_sample')} of {e.get('queries')} "
                                     "queries graded by people, the rest by the model)"
                       + ("" if not e.get("comparisons") else
                          f"; the comparisons by the {e['comparisons']} stopping rule "
                          f"({(e.get('stop') or {}).get('words', UNDEFINED)})")))
    level = f"{settings.get('level', 0.95):.0%}"
    change = f"{settings.get('min_relative_change', 0.02):.0%}"

    caveats = judged_caveats(report)
    lines = verdicts(report)
    families = holm_families(report)
    arms = []
    for arm, per_measure in _need(report, "arms").items():
        for m, ci in per_measure.items():
            pw = ci.get("power") or {}
            mean = _num(ci["estimate"])
            if ci.get("unweighted_mean") is not None:
                mean += f" (unweighted {_num(ci['unweighted_mean'])})"
            arms.append({"arm": arm, "measure": m, "mean": mean,
                         "ci": f"[{_num(ci['low'])}, {_num(ci['high'])}]" + _by(ci),
                         "se": _num(ci["se"]), **_rests_on(ci, pw)})
    pairs, segments = [], []
    for c in comparisons:
        pw = c.get("power") or {}
        pairs.append({"a": c["arm_a"], "b": c["arm_b"], "measure": c["measure"],
                      "delta": _num(c["delta"], sign="+"),
                      "ci": f"[{_num(c['low'], sign='+')}, {_num(c['high'], sign='+')}]"
                            + _by(c),
                      "p_rand": _p(c.get("p_test", c.get("p_randomization"))),
                      "p_holm": _p(c.get("p_holm")) + _family_note(c, families),
                      "significant": "yes" if c.get("significant") else "no",
                      "power_now": _num(pw.get("power_now"), 2),
                      "needed": _int(pw.get("n_needed")),
                      "deeper": "yes" if _cutoff(c["measure"]) in caveats else ""})
        for s in c.get("segments") or []:
            segments.append({"a": c["arm_a"], "b": c["arm_b"], "measure": c["measure"],
                             "group": s["group"], "n": _int(s.get("n")),
                             "delta": _num(s["delta"], sign="+"),
                             "ci": f"[{_num(s['low'], sign='+')}, {_num(s['high'], sign='+')}]",
                             "flag": "segment cancellation"
                             if c.get("segment_cancellation") and s.get("significant") else ""})
    depth = bias.get("depth")
    judged = [{"arm": r["arm"], "k": _int(r["k"]), "judged": _num(r["judged"], 3),
               "deeper": "yes" if depth is not None and int(r["k"]) > depth else ""}
              for r in bias.get("judged") or []]
    loo = [{"arm": r["arm"], "measure": r["measure"], "full": _num(r["full"]),
            "reduced": _num(r["reduced"]), "change": _num(r["change"], sign="+"),
            "rank": f"{r['rank_full']} → {r['rank_reduced']}",
            "removed": f"{r['removed_pairs']} ({r['removed_relevant']} relevant)"}
           for r in bias.get("leave_one_arm_out") or []]
    condensed = [{"arm": r["arm"], "measure": r["measure"], "standard": _num(r["standard"]),
                  "condensed": _num(r["condensed"]), "difference": _num(r["difference"],
                                                                       sign="+")}
                 for r in bias.get("condensed") or []]
    unique = [{"arm": a, "pairs": _int(n)} for a, n in (bias.get("unique_pairs") or {}).items()]
    ln = report.get("label_noise") or {}
    noise = [(k, _int(ln.get(k))) for k in ("auditor", "round", "queries", "pairs", "changed")
             if k in ln]
    orderings = [{"measure": o["measure"], "queries": _int(o.get("queries")),
                  "grader": o.get("order_grader", UNDEFINED),
                  "auditor": o.get("order_auditor", UNDEFINED),
                  "tau": _num(o.get("kendall_tau"), 3), "tau_ap": _num(o.get("tau_ap"), 3)}
                 for o in ln.get("orderings") or []]
    bands = []
    for c in comparisons:
        n = c.get("label_noise")
        if n:
            bands.append({"a": c["arm_a"], "b": c["arm_b"], "measure": c["measure"],
                          "delta": _num(c["delta"], sign="+"), "band": _num(n.get("band")),
                          "within": "yes" if n.get("within_band") else "no"})

    arm_rows = [charts.Row(arm, per[measure]["estimate"], per[measure]["low"],
                           per[measure]["high"], emphasis=arm == settings.get("baseline"))
                for arm, per in report["arms"].items() if measure in per]
    diff_rows = []
    for c in comparisons:
        if c["measure"] != measure:
            continue
        diff_rows.append(charts.Row(f"{c['arm_a']} − {c['arm_b']}", c["delta"], c["low"],
                                    c["high"], emphasis=bool(c.get("significant"))))
        for s in c.get("segments") or []:
            if len(c["segments"]) > 1:
                diff_rows.append(charts.Row(f"↳ {s['group']}", s["delta"], s["low"],
                                            s["high"]))
    svgs = []
    if arm_rows:
        svgs.append(charts.interval_chart(
            arm_rows, title=f"Mean {measure} per arm, {level} interval"))
    if diff_rows:
        svgs.append(charts.interval_chart(
            diff_rows, zero_line=True,
            title=f"Paired difference on {measure} (A − B), {level} interval, by group"))
    return Decision(
        header=header, primary=measure,
        verdicts=[t for m, t in lines if m == measure],
        other_verdicts=[t for m, t in lines if m != measure],
        caveats=list(caveats.values()) or [
            f"every cutoff lies within the pool depth {depth}: all retrieved chunks of the "
            "pooled arms were graded" if depth is not None else "no pool depth recorded"],
        arms=arms, pairs=pairs, segments=segments, judged=judged, unique_pairs=unique,
        leave_one_out=loo, condensed=condensed, noise=noise, orderings=orderings,
        noise_bands=bands, level=level, min_change=change, charts=svgs,
        triage=triage_lines(report.get("triage")),
        translation=translation_cells(translation) if translation else None,
        cost=cost_cells(cost) if cost else None,
        ppi=ppi_cells(ppi) if ppi else None,
        post_hoc=post_hoc_cells(post_hoc) if post_hoc else None,
        ranks=rank_set_cells(rank_sets, human_only=_lambda_zero(report, measure))
        if _ranks_for(rank_sets, measure) else None,
        decided_by=str((report.get("estimator") or {}).get("note") or ""),
        **_family_words(measure, families))


def _lambda_zero(report: dict, measure: str) -> bool:
    """Every arm's PPI++ ``lambda`` on ``measure`` is 0 (PPI++ equals human-only)."""
    lams = [per[measure].get("lambda") for per in report["arms"].values()
            if measure in per and per[measure].get("estimator") == "ppi++"]
    return bool(lams) and all(lam == 0 for lam in lams)


#: The verdict's test as the header names it (params ``metrics.test``; a report written
#: before the setting existed used the sign-flip test).
_VERDICT_TESTS = {"mean": "mean difference 0: Student t below 30 queries off the most "
                          "common difference, studentized bootstrap from there",
                  "sign-flip": "sign-flip randomization (each difference symmetric about 0)"}


def _randomization(settings: dict, comparisons: list) -> str:
    """How the sign-flip test was run: ``"10000 sign-flip patterns"`` when every comparison
    drew them; a comparison with few non-zero differences enumerates all 2^k patterns (exact),
    which the header then says instead of the params' count.

    Examples
    --------
    >>> _randomization({"permutations": 10000},
    ...                [{"randomization": {"method": "exact", "n_permutations": 64}},
    ...                 {"randomization": {"method": "exact", "n_permutations": 2}}])
    'exact: every sign pattern of the queries that differ enumerated (at most 64)'
    >>> _randomization({"permutations": 10000},
    ...                [{"randomization": {"method": "exact", "n_permutations": 64}},
    ...                 {"randomization": {"method": "monte-carlo", "n_permutations": 10000}}])
    'exact where 20 or fewer queries differ (2^k patterns), else 10000 sign-flip patterns'
    """
    drawn = f"{_int(settings.get('permutations'))} sign-flip patterns"
    methods = {str((c.get("randomization") or {}).get("method")) for c in comparisons}
    if methods == {"exact"}:
        most = max(int(c["randomization"]["n_permutations"]) for c in comparisons)
        return f"exact: every sign pattern of the queries that differ enumerated (at most {most})"
    if "exact" in methods:
        return f"exact where 20 or fewer queries differ (2^k patterns), else {drawn}"
    return drawn


def triage_lines(triage: dict | None) -> list[str]:
    """The lines a triage key adds beside the verdicts: its miss rate and the note.

    Parameters
    ----------
    triage : dict or None
        The comparison report's ``triage`` section (the key record's ``triage``: ``miss_rate``
        with ``estimate``, ``low``, ``high``, ``level``, ``missed``, ``sampled``,
        ``unsampled``; ``note``); None for a key graded without triage.

    Returns
    -------
    list of str
        Empty without triage; else the miss-rate sentence and the note.

    Examples
    --------
    >>> triage_lines({"miss_rate": {"estimate": 0.25, "low": 0.0715, "high": 0.5907,
    ...               "level": 0.95, "missed": 2, "sampled": 8, "unsampled": 20},
    ...               "note": "Unsampled 0s are model-judged."})[0]
    'Model miss rate on its 0s: 0.250 (95% Wilson interval 0.071 to 0.591): 2 of 8 sampled 0s graded relevant by people; 20 unsampled 0s are model-judged.'
    """
    if not triage:
        return []
    m = triage.get("miss_rate") or {}
    if m.get("estimate") is None:
        rate = (f"Model miss rate on its 0s: undefined (no 0 sampled); "
                f"{_int(m.get('unsampled'))} unsampled 0s are model-judged.")
    else:
        rate = (f"Model miss rate on its 0s: {m['estimate']:.3f} ({m['level']:.0%} Wilson "
                f"interval {m['low']:.3f} to {m['high']:.3f}): {_int(m.get('missed'))} of "
                f"{_int(m.get('sampled'))} sampled 0s graded relevant by people; "
                f"{_int(m.get('unsampled'))} unsampled 0s are model-judged.")
    return [rate, str(triage.get("note") or "")]


def _shown(value):
    """Every value a template prints, made inert (:func:`relgrade.text.inert`, newlines
    kept for the template's own paragraphs; charts, already markup, untouched)."""
    if isinstance(value, Markup) or not isinstance(value, str):
        return value
    return inert(value, keep="\n")


def _environment(*, html: bool) -> jinja2.Environment:
    # The templates ship inside the package; autoescape only for HTML, where every cell
    # (arm names, query groups) is text from params or data files. Every printed value is
    # made inert first (bidi and control characters shown as \uXXXX).
    return jinja2.Environment(loader=jinja2.PackageLoader("relgrade.evaluation", "templates"),
                              autoescape=html, undefined=jinja2.StrictUndefined,
                              keep_trailing_newline=True, trim_blocks=True,
                              lstrip_blocks=True,
                              finalize=_shown)


def _md_cell(text: str) -> str:
    # a table cell: one line, `|` escaped, no tag (relgrade.text.markdown_text)
    return markdown_text(str(text))


def _md_text(text: str) -> str:
    # a paragraph holding outside text (names): inert, and no tag reaches the renderer
    return inert(str(text)).replace("<", "&lt;").replace(">", "&gt;")


def to_markdown(decision: Decision) -> str:
    """``report.md``: the decision report as GitHub-flavoured Markdown (no charts).

    Table cells have ``|`` escaped so a name holding one cannot break a row, and every cell
    and the post-hoc summary show outside text inert, with ``<``, ``>`` as entities.
    """
    env = _environment(html=False)
    env.filters["cell"] = _md_cell
    env.filters["text"] = _md_text
    return env.get_template("decision.md.j2").render(d=decision)


def to_html(decision: Decision) -> str:
    """``report.html``: one self-contained page (inline styles, inline SVG charts, no script).

    Every text cell is HTML-escaped; the SVG charts are inserted as they are (their own
    text is XML-escaped by :mod:`relgrade.evaluation.charts`).
    """
    return _environment(html=True).get_template("decision.html.j2").render(
        d=decision, charts=[Markup(s) for s in decision.charts])
