"""In ppi mode the decision is PPI++'s: the comparison report with the prediction-powered
estimates in the place that decides.

A ppi experiment's frozen key is the model grader's, so the compare stage's own numbers
(bootstrap intervals, randomization tests) are model-key numbers: their intervals ignore the
model's bias. :func:`govern` rewrites the comparison report (the JSON layout of
``metrics/comparisons.json``, :meth:`relgrade.evaluation.report.Comparison.to_dict`) so that
for every measure the ppi stage estimated (``ppi.json``'s ``estimates``,
:func:`relgrade.evaluation.ppi_table.ppi_table`) each arm's ``estimate``/``low``/``high``/``se``
and each comparison's ``delta``/``low``/``high``/``se``/``p_holm``/``significant``/``verdict``
are PPI++'s. The model-key numbers stay beside them under ``model_only`` and the sample's
under ``human_only``, and every entry says which estimator it is (``estimator``). A measure the
ppi stage did not estimate keeps its model-key numbers, labelled ``estimator: "model-only"``
and its verdicts prefixed so. Everything downstream (the report's verdicts and tables, the
decision files ``dvc metrics show`` lists, ``relgrade metrics``, the printed verdicts) reads
the rewritten report and so decides on PPI++.

Why PPI++ decides: its interval covers what people would give however biased the model is
(Angelopoulos, Duchi & Zrnic, "PPI++", arXiv:2311.01453, 2023); model-only does not, and
human-only is never narrower (the ``jackknife`` kind caps PPI++ at the human-only width,
except where that width is 0: people gave one value on every sampled query, and the PPI++
row is marked ``wider_than_human_only``).
"""

from __future__ import annotations

import copy

from relgrade.errors import InputError
from relgrade.evaluation.report import before_holm_note

#: The estimator that decides in ppi mode, and the labels of the two beside it.
DECIDES, MODEL_ONLY, HUMAN_ONLY = "ppi++", "model-only", "human-only"

#: The sentence the report prints under its verdicts in ppi mode.
DECIDED_BY = ("Decided by PPI++: the model grader's key on every query, rectified by people's "
              "grades on the human sample ({n} of {N} queries); Holm over the {family} "
              "comparisons made on the measure. Model-only (the model's key alone: its "
              "interval ignores the model's bias) and human-only (people's sample alone) stand "
              "beside it in the prediction-powered section.")

_ARM_KEYS = ("estimate", "low", "high", "se")
_PAIR_KEYS = ("delta", "low", "high", "se", "interval", "p_randomization", "p_test", "test",
              "power", "p_holm", "significant", "verdict", "mean_a", "mean_b", "relative",
              "segments", "segment_cancellation", "holm_family")


def _f(x: float, sign: str = "") -> str:
    return f"{round(float(x), 3) + 0.0:{sign}.3f}"


def _p(p: float) -> str:
    return f"{p:.2g}"


def ppi_verdict(arm_a: str, arm_b: str, measure: str, row: dict, *, n: int, big_n: int,
                model_only: dict | None = None, family: int | None = None) -> str:
    """One plain sentence on a PPI++ difference (A − B), as the report's verdicts read.

    Parameters
    ----------
    arm_a, arm_b : str
        The comparison, read as A against B.
    measure : str
    row : dict
        The difference's PPI++ row, read as A − B: ``estimate``, ``low``, ``high``,
        ``p_holm``, ``significant``.
    n, big_n : int
        Human-sample queries and all queries.
    model_only : dict, optional
        The model key's own comparison (``significant``, ``p_holm``, ``holm_family``: the
        compare stage's family, every comparison made): named, with its family, when it
        decides otherwise.
    family : int, optional
        The comparisons on the measure Holm adjusted over: a difference not significant
        after Holm whose own interval excludes 0 says it excludes 0 only before correcting
        for them (:func:`relgrade.evaluation.report.before_holm_note`, the model-key
        verdicts' clause).

    Returns
    -------
    str

    Examples
    --------
    >>> ppi_verdict("a", "b", "m", {"estimate": -0.1, "low": -0.15, "high": -0.05,
    ...             "p_holm": 0.004, "significant": True}, n=10, big_n=40)
    'b better than a on m by 0.100 [0.050, 0.150], p=0.004 after Holm (PPI++, people on 10 of 40 queries)'
    >>> ppi_verdict("fresh", "lex", "m", {"estimate": -0.468, "low": -0.736, "high": -0.199,
    ...             "p_holm": 0.052, "significant": False}, n=3, big_n=15, family=3)
    'no detectable difference on m between fresh and lex: -0.468 [-0.736, -0.199], p=0.052 after Holm; the interval excludes 0 only before correcting for the 3 comparisons made (PPI++, people on 3 of 15 queries)'
    """
    est, lo, hi = float(row["estimate"]), float(row["low"]), float(row["high"])
    who = f"(PPI++, people on {n} of {big_n} queries)"
    if row["significant"]:
        win, lose = (arm_a, arm_b) if est > 0 else (arm_b, arm_a)
        e, a, b = (est, lo, hi) if est > 0 else (-est, -hi, -lo)
        text = (f"{win} better than {lose} on {measure} by {_f(e)} [{_f(a)}, {_f(b)}], "
                f"p={_p(row['p_holm'])} after Holm {who}")
    else:
        text = (f"no detectable difference on {measure} between {arm_a} and {arm_b}: "
                f"{_f(est, '+')} [{_f(lo, '+')}, {_f(hi, '+')}], p={_p(row['p_holm'])} after "
                f"Holm{before_holm_note(lo, hi, family)} {who}")
    if model_only is not None and bool(model_only.get("significant")) != bool(
            row["significant"]):
        said = "significant" if model_only.get("significant") else "not significant"
        p, k = model_only.get("p_holm"), model_only.get("holm_family")
        # the model key's p-value is the compare stage's: Holm over every comparison made
        family = "" if not k else f", Holm over all {k} comparisons"
        text += (f"; the model key alone would call it {said}"
                 + ("" if p is None else f" (p={_p(p)}{family})") + ", not what decides")
    return text


def _difference(est: dict, a: str, b: str) -> dict | None:
    """The ppi stage's difference a − b (mirrored from b − a when recorded that way)."""
    for d in est["differences"]:
        if (d["arm_a"], d["arm_b"]) == (a, b):
            return {k: dict(d[k]) for k in (DECIDES, MODEL_ONLY, HUMAN_ONLY)}
        if (d["arm_a"], d["arm_b"]) == (b, a):
            out = {}
            for k in (DECIDES, MODEL_ONLY, HUMAN_ONLY):
                r = dict(d[k])
                r["estimate"], r["low"], r["high"] = -r["estimate"], -r["high"], -r["low"]
                out[k] = r
            return out
    return None


#: The estimator that decides a comparison when the human grading stopped early.
ANYTIME = "anytime"


def anytime_verdict(arm_a: str, arm_b: str, measure: str, row: dict, *, stop: dict) -> str:
    """One plain sentence on a difference (A − B) decided by the anytime stopping rule.

    Parameters
    ----------
    row : dict
        The difference's row of ``ppi.json``'s ``stop`` block: ``delta``, ``low``, ``high``
        (the confidence sequence at the stop), ``p_holm``, ``significant``, ``equivalent``.
    stop : dict
        The ``stop`` block: ``words`` ("settled at N of M queries"), ``margin``, and, when
        given, ``level`` and ``measures`` (the rows of each measure's Holm family): a
        difference not significant after Holm whose own confidence sequence (level
        ``level``, the one shown) excludes 0 is said to exclude it only before correcting
        for the family's k comparisons, with the sequence at ``1 − (1 − level)/k``
        (``low_simultaneous``, ``high_simultaneous``) when the row holds it.

    Examples
    --------
    >>> anytime_verdict("a", "b", "m", {"delta": 0.2, "low": 0.1, "high": 0.3, "p_holm": 0.01,
    ...                 "significant": True, "equivalent": False},
    ...                 stop={"words": "settled at 8 of 12 queries", "margin": 0.0})
    'a better than b on m by 0.200 [0.100, 0.300], anytime p=0.01 after Holm (people, settled at 8 of 12 queries)'
    """
    est, lo, hi = float(row["delta"]), float(row["low"]), float(row["high"])
    who = f"(people, {stop['words']})"
    if row["significant"]:
        win, lose = (arm_a, arm_b) if est > 0 else (arm_b, arm_a)
        e, a, b = (est, lo, hi) if est > 0 else (-est, -hi, -lo)
        return (f"{win} better than {lose} on {measure} by {_f(e)} [{_f(a)}, {_f(b)}], "
                f"anytime p={_p(row['p_holm'])} after Holm {who}")
    if row.get("equivalent"):
        return (f"no difference beyond the margin {stop['margin']:g} on {measure} between "
                f"{arm_a} and {arm_b}: {_f(est, '+')} [{_f(lo, '+')}, {_f(hi, '+')}] {who}")
    text = (f"no detectable difference on {measure} between {arm_a} and {arm_b}: "
            f"{_f(est, '+')} [{_f(lo, '+')}, {_f(hi, '+')}], anytime p={_p(row['p_holm'])} "
            f"after Holm")
    k = len((stop.get("measures") or {}).get(measure) or [])
    if (lo > 0 or hi < 0) and k > 1:
        level = float(stop.get("level", 0.95))
        text += (f"; the confidence sequence shown is each comparison's own at "
                 f"{level:.0%} and excludes 0 only before correcting for the {k} comparisons "
                 f"made")
        if row.get("low_simultaneous") is not None:
            text += (f" (at 1 − {1 - level:g}/{k} it is [{_f(row['low_simultaneous'], '+')}, "
                     f"{_f(row['high_simultaneous'], '+')}])")
    return f"{text} {who}"


def _anytime_row(stop: dict, measure: str, a: str, b: str) -> dict | None:
    """The stop block's row of a − b (mirrored from b − a)."""
    for r in (stop.get("measures") or {}).get(measure, []):
        if (r["arm_a"], r["arm_b"]) == (a, b):
            return dict(r)
        if (r["arm_a"], r["arm_b"]) == (b, a):
            r = dict(r)
            r["delta"], r["low"], r["high"] = -r["delta"], -r["high"], -r["low"]
            r["low_simultaneous"], r["high_simultaneous"] = \
                -r["high_simultaneous"], -r["low_simultaneous"]
            return r
    return None


def _brief(row: dict, *keys: str) -> dict:
    return {k: row.get(k) for k in keys if k in row}


def govern(report: dict, ppi: dict, *, source=None) -> dict:
    """The comparison report with PPI++ deciding every measure the ppi stage estimated.

    Parameters
    ----------
    report : dict
        The comparison report (JSON layout, model-key numbers). Not modified.
    ppi : dict
        The ppi stage's result (``paths.ppi``): ``design`` and ``estimates`` (measure →
        :func:`relgrade.evaluation.ppi_table.ppi_table`).
    source : str or os.PathLike, optional
        The ppi file, named in errors.

    Returns
    -------
    dict
        A new report. Top level: ``estimator`` = ``{"decides": "ppi++", "measures": [...],
        "human_sample": n, "queries": N, "alpha": 1 - ppi level (None when the design does
        not record it), "note": sentence}`` (with the anytime stopping rule
        also ``"comparisons": "anytime"`` and ``stop``, the note naming both); ``verdicts``
        rebuilt. When ``ppi`` says ``post_hoc: true`` (a human key changed after the ppi
        stage's estimates were seen, allowed by ``grading.post_hoc``), the report's
        ``post_hoc`` is true, ``estimator.post_hoc`` holds the ppi record's note and every
        verdict starts with ``post-hoc:``.
        ``rank_sets``: the ppi stage's PPI++ rank-sets of the report's rank-sets measure
        (``ppi.json``'s ``rank_sets``) with ``estimator: "ppi++"``, the model key's under
        ``model_only`` (``estimator: "model-only"``); the model key's alone, labelled
        ``estimator: "model-only"``, when the ppi stage has none on that measure.
        Per arm and estimated measure: ``estimator: "ppi++"``, ``estimate``, ``low``,
        ``high``, ``se`` PPI++'s, ``method`` ``"ppi++ (INTERVAL)"``, ``lambda``, ``capped``,
        ``human_n``; ``model_only`` (the compare stage's entry: ``estimate``, ``low``,
        ``high``, ``se``, ``method``) and ``human_only`` (``estimate``, ``low``, ``high``,
        ``se``, ``n``). Per comparison on an estimated measure: ``estimator: "ppi++"``;
        ``delta``, ``low``, ``high``, ``se``, ``p`` (unadjusted), ``p_holm``, ``significant``,
        ``mean_a``, ``mean_b``, ``relative``, ``holm_family`` (comparisons on the measure),
        ``verdict`` PPI++'s (:func:`ppi_verdict`); ``p_randomization`` None (no
        randomization test decides), ``p_test`` the estimator's unadjusted p-value and
        ``test`` its name, ``power`` None (the model key's power analysis, like its segments,
        moved under ``model_only`` beside the model key's other numbers); ``human_only`` the sample's difference (``delta``, ``low``,
        ``high``, ``se``, ``p``, ``p_holm``, ``significant``). Entries on other measures
        carry ``estimator: "model-only"`` and their verdicts say they are not decisions.

    Raises
    ------
    InputError
        The ppi record has no estimates, was computed on another key, or lacks an arm or a comparison the report holds
        (the two files were computed on different arms: rerun the ppi stage).
    """
    estimates = ppi.get("estimates") or {}
    if not estimates:
        raise InputError("the ppi record has no estimates", path=source, item="estimates",
                         fix="rerun the ppi stage (dvc repro)")
    if report.get("key_sha256") and ppi.get("key_sha256") \
            and report["key_sha256"] != ppi["key_sha256"]:
        raise InputError("the ppi record was computed on another key than the comparison "
                         "report", path=source, found=f"key {ppi['key_sha256'][:12]}, not "
                                                      f"{report['key_sha256'][:12]}",
                         fix="rerun the ppi stage (dvc repro)")
    out = copy.deepcopy(report)
    decided = [m for m in out.get("measures", []) if m in estimates]
    design = ppi.get("design") or {}
    for arm, per_measure in out.get("arms", {}).items():
        for m, entry in per_measure.items():
            if m not in estimates:
                entry["estimator"] = MODEL_ONLY
                continue
            row = estimates[m]["arms"].get(arm)
            if row is None:
                raise InputError("the ppi record lacks an arm of the comparison report",
                                 path=source, item=f"arm {arm}, {m}",
                                 fix="rerun the ppi stage (dvc repro)")
            e, h = row[DECIDES], row[HUMAN_ONLY]
            entry["model_only"] = _brief(entry, *_ARM_KEYS, "method", "n")
            entry.update(estimator=DECIDES, estimate=e["estimate"], low=e["low"],
                         high=e["high"], se=e["se"], method=f"ppi++ ({e['interval']})",
                         n=e["N"], human_n=e["n"], n_resamples=0, notes=[],
                         **{"lambda": e.get("lambda"), "capped": bool(e.get("capped"))})
            entry["human_only"] = _brief(h, *_ARM_KEYS, "n")
    for c in out.get("comparisons", []):
        m = c["measure"]
        if m not in estimates:
            c["estimator"] = MODEL_ONLY
            # people decide only the measures the ppi stage estimated: the model key's
            # verdict is shown as what it is, never as a decision
            c["verdict"] = ("not a decision (the model key alone, no PPI++ on this measure; "
                            f"list it in ppi.measures for people's verdict): {c['verdict']}")
            continue
        est = estimates[m]
        d = _difference(est, c["arm_a"], c["arm_b"])
        if d is None:
            raise InputError("the ppi record lacks a comparison of the comparison report",
                             path=source, item=f"{c['arm_a']} vs {c['arm_b']} on {m}",
                             fix="rerun the ppi stage (dvc repro)")
        e, h = d[DECIDES], d[HUMAN_ONLY]
        arm_a = est["arms"][c["arm_a"]][DECIDES]["estimate"]
        arm_b = est["arms"][c["arm_b"]][DECIDES]["estimate"]
        model = _brief(c, *_PAIR_KEYS)
        c["model_only"] = model
        c.update(estimator=DECIDES, delta=e["estimate"], low=e["low"], high=e["high"],
                 se=e["se"], interval=f"ppi++ ({e['interval']})", p=e["p"],
                 p_randomization=None, p_test=e["p"], test=DECIDES, power=None,
                 p_holm=e["p_holm"], significant=bool(e["significant"]),
                 mean_a=arm_a, mean_b=arm_b,
                 relative=None if arm_b == 0 else e["estimate"] / arm_b,
                 holm_family=len(est["differences"]), segments=[],
                 segment_cancellation=False, capped=bool(e.get("capped")),
                 **{"lambda": e.get("lambda")})
        c["human_only"] = {"delta": h["estimate"], **_brief(h, "low", "high", "se", "p",
                                                            "p_holm", "significant")}
        c["verdict"] = ppi_verdict(c["arm_a"], c["arm_b"], m, e, n=e["n"], big_n=e["N"],
                                   model_only=model, family=len(est["differences"]))
        row = _anytime_row(ppi.get("stop") or {}, m, c["arm_a"], c["arm_b"])
        if row is not None:
            # people stopped early: the confidence sequence decides, PPI++ on the queries
            # graded stands beside it (its fixed-sample interval ignores the stop)
            c["ppi++"] = {"delta": c["delta"], "low": c["low"], "high": c["high"],
                          "p_holm": c["p_holm"], "significant": c["significant"],
                          "verdict": c["verdict"]}
            c.update(estimator=ANYTIME, delta=row["delta"], low=row["low"], high=row["high"],
                     se=None, p=row["p"], p_test=row["p"], test=ANYTIME, p_holm=row["p_holm"],
                     significant=bool(row["significant"]),
                     equivalent=bool(row["equivalent"]),
                     interval="anytime confidence sequence (hedged betting, without "
                              "replacement)")
            c["verdict"] = anytime_verdict(c["arm_a"], c["arm_b"], m, row, stop=ppi["stop"])
    any_est = next(iter(estimates.values()))
    n, big_n = any_est["n"], any_est["N"]
    out["estimator"] = {
        "decides": DECIDES, "measures": decided, "human_sample": n, "queries": big_n,
        "human_grader": design.get("human_grader"), "model_grader": design.get("model_grader"),
        "alpha": None if design.get("level") is None else round(1 - float(design["level"]), 12),
        "note": DECIDED_BY.format(n=n, N=big_n, family=max(
            [len(estimates[m]["differences"]) for m in decided] or [0]))}
    stop = ppi.get("stop")
    if stop is not None:
        out["estimator"]["stop"] = {k: stop.get(k) for k in (
            "rule", "settled", "settled_at", "graded", "sample", "margin", "words")}
        # the arms stay PPI++'s, the comparisons are the rule's: the block names both
        out["estimator"]["comparisons"] = ANYTIME
        out["estimator"]["note"] = (
            f"The arms' estimates are PPI++'s (the model grader's key on every query, "
            f"rectified by people's grades on the {n} human-sample queries the stopping rule "
            f"read, of {big_n}); the comparisons are decided by the anytime stopping rule: "
            + (f"people graded the human sample in a seeded order and stopped early "
               f"({stop['words']})"
               if stop.get("settled") and (stop.get("settled_at") or 0) < stop["sample"] else
               f"people graded the human sample in a seeded order ({stop['words']})")
            + ", each comparison is decided by its anytime-valid confidence "
            f"sequence and Holm over anytime p-values on the queries they graded; PPI++ on "
            f"those queries stands beside it (ppi++ in each comparison), model-only and "
            f"human-only in the prediction-powered section.")
    model_ranks = out.get("rank_sets")
    if isinstance(model_ranks, dict):
        # the rank-sets that decide are PPI++'s (the ppi stage's, on the same measure); the
        # model key's stay beside them, labelled
        ranks = (ppi.get("rank_sets") or {}).get(model_ranks.get("measure"))
        if ranks is not None:
            out["rank_sets"] = {**ranks, "estimator": DECIDES,
                                "model_only": {**model_ranks, "estimator": MODEL_ONLY}}
        else:
            out["rank_sets"] = {**model_ranks, "estimator": MODEL_ONLY}
    if ppi.get("post_hoc"):
        # the human sample's grades changed after the estimates were seen (params
        # grading.post_hoc): every number that decides is post-hoc, and says so
        out["post_hoc"] = True
        out["estimator"]["post_hoc"] = ppi.get("post_hoc_note") or True
    prefix = "post-hoc: " if out.get("post_hoc") else ""
    out["verdicts"] = [prefix + c["verdict"] for c in out.get("comparisons", [])]
    return out
