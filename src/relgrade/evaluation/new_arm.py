"""A new arm on a frozen key, from tables: the holes each grader owes, then the new arm's report.

:mod:`relgrade.evaluation.holes` works on per-query arrays; this module is the step between
it and the files a pipeline stage reads and writes. It takes the tables such a stage holds
(the frozen key, the new arm's run, the grades of its holes, the old arms' per-query values)
and gives:

* :func:`owed_holes`: the new arm's holes within the measure's cutoff, each flagged when its
  query is in the seeded human sample (the model grader owes every hole, people the
  sampled ones);
* :func:`new_arm_report`: the JSON-ready record of the new arm: its hole rate, the corrected
  (PPI++) estimate beside the model-only one and the key-only one (holes counted as not
  relevant, what scoring the arm on the frozen key alone gives), its differences with every
  old arm on the same corrected per-query values (Holm over the old arms), and the transport
  check with its verdict on the level claim.

Every query of ``queries`` counts; a query whose metric is undefined under a key (nothing
relevant) or that the run does not answer counts 0, as in the ``ppi`` stage (the estimand is
the mean over every query of the experiment).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np
import pandas as pd

from relgrade.errors import InputError
from relgrade.evaluation import holes as hl
from relgrade.evaluation import metrics
from relgrade.evaluation.measures import parse_measure, value_range
from relgrade.evaluation.ppi_table import clip_interval
from relgrade.schema import KEY, PAIR, RUN, require

#: The level claim's verdicts, by :attr:`relgrade.evaluation.holes.TransportCheck.refuse`.
LEVEL_CLAIM = {True: "level claim refused", False: "level claim holds"}

#: Columns of the old arms' pairs graded by both the model grader and people.
OLD_PAIRS = ("query_id", "chunk_id", "model", "human")


def cutoff_of(measure: str, *, relevant_min: int = 1) -> int:
    """The rank cutoff ``k`` of a measure name: the depth within which a pair is a hole.

    Raises
    ------
    InputError
        The name does not parse (:func:`relgrade.evaluation.measures.parse_measure`), or the
        measure has no integer rank cutoff (``AP`` on the whole list, ``IPrec@0.5``): its
        holes would be unbounded.
    """
    m = parse_measure(measure, relevant_min=relevant_min)
    if not isinstance(m.cutoff, int) or m.name == "IPrec":
        raise InputError("the new arm's measure needs a rank cutoff (its holes are the "
                         "pairs within it)", item=str(measure),
                         fix="name the measure with @k, as nDCG@10")
    return int(m.cutoff)


def _queries(queries) -> list[str]:
    q = [str(x) for x in queries]
    if not q:
        raise InputError("the new arm needs at least one query")
    twice = pd.Series(q)[pd.Series(q).duplicated()]
    if not twice.empty:
        raise InputError("a query is listed twice", item=twice.iloc[0])
    return q


def owed_holes(*, run: pd.DataFrame, key: pd.DataFrame, queries: Sequence[str], measure: str,
               fraction: float, rng: np.random.Generator, relevant_min: int = 1,
               ties: str = "score") -> pd.DataFrame:
    """The holes of the new arm, each flagged when people owe its grade.

    Parameters
    ----------
    run : pandas.DataFrame
        The new arm's run, columns :data:`relgrade.schema.RUN`; rows of queries outside
        ``queries`` are ignored. Not modified.
    key : pandas.DataFrame
        The frozen key, columns :data:`relgrade.schema.KEY`. Not modified.
    queries : sequence of str
        The experiment's queries; the sample is drawn among those with holes, in this order
        sorted.
    measure : str
        The measure whose cutoff bounds the holes (:func:`cutoff_of`).
    fraction : float
        Share of the queries with holes whose every hole people grade (params
        ``holes.human_fraction``), in (0, 1].
    rng : numpy.random.Generator
        The draw's source (params ``seed`` through :func:`relgrade.rng.stage_rng`).
    relevant_min : int, default 1
        Params ``scale.relevant_min`` (the measure's default ``rel``).
    ties : {"score", "rank"}, default "score"
        Params ``runs.ties``.

    Returns
    -------
    pandas.DataFrame
        ``query_id``, ``chunk_id`` (str), ``sampled`` (bool): one row per hole, queries
        sorted, each query's holes in the run's canonical order.

    Raises
    ------
    InputError
        As :func:`cutoff_of`, :func:`relgrade.evaluation.holes.find_holes` and
        :func:`relgrade.evaluation.holes.sample_hole_queries` (fewer than 3 queries with
        holes or a sample below 3, a fraction outside (0, 1]).
    """
    require(run, RUN, what="the new arm's run")
    qs = sorted(_queries(queries))
    k = cutoff_of(measure, relevant_min=relevant_min)
    mine = run[run["query_id"].astype(str).isin(qs)]
    found, counts = hl.find_holes(mine, key, k=k, ties=ties)
    per_query = (counts.assign(query_id=counts["query_id"].astype(str))
                 .set_index("query_id")["holes"].reindex(qs).fillna(0).astype(np.int64))
    picked = hl.sample_hole_queries(per_query.to_numpy(), fraction=fraction, rng=rng)
    sampled = {qs[i] for i in picked}
    out = found.astype({"query_id": str, "chunk_id": str})
    out = out.assign(sampled=out["query_id"].isin(sampled).astype(bool))
    order = out["query_id"].map({q: i for i, q in enumerate(qs)})
    return out.iloc[np.argsort(order.to_numpy(), kind="stable")].reset_index(drop=True)


def _values(table: pd.DataFrame, queries: list[str]) -> np.ndarray:
    s = pd.Series(table["value"].to_numpy(dtype=float), index=table["query_id"].astype(str))
    return s.reindex(queries).fillna(0.0).to_numpy()


def new_arm_report(*, arm: str, run: pd.DataFrame, key: pd.DataFrame, queries: Sequence[str],
                   model_grades: pd.DataFrame, human_grades: pd.DataFrame,
                   sample: Sequence[str], old: Mapping[str, pd.Series],
                   old_pairs: pd.DataFrame, measure: str, relevant_min: int = 1,
                   ties: str = "score", level: float = 0.95, alpha: float = 0.05,
                   tolerance: float = 0.1, rng: np.random.Generator | None = None,
                   n_resamples: int = 1000) -> dict:
    """The new arm's record: hole rate, corrected estimate, differences, transport verdict.

    Parameters
    ----------
    arm : str
        The new arm's name.
    run : pandas.DataFrame
        Its run, columns :data:`relgrade.schema.RUN`. Not modified.
    key : pandas.DataFrame
        The frozen key, columns :data:`relgrade.schema.KEY`. Not modified.
    queries : sequence of str
        Every query of the experiment (the estimand is the mean over them).
    model_grades : pandas.DataFrame
        ``query_id``, ``chunk_id``, ``grade``: the model grader's grade of every hole (rows
        of other pairs are ignored).
    human_grades : pandas.DataFrame
        Same columns: people's grade of every hole of the sampled queries.
    sample : sequence of str
        The sampled queries (:func:`owed_holes`' ``sampled`` rows), each with a hole.
    old : mapping of str to pandas.Series
        Each old arm's per-query values of ``measure`` on the frozen key, indexed by query
        id (the metrics stage's table; a missing query counts 0).
    old_pairs : pandas.DataFrame
        :data:`OLD_PAIRS`: the old arms' pairs that the model grader and people both graded,
        their grades (the transport check's reference side).
    measure : str
        The measure (a name :func:`relgrade.evaluation.metrics.per_query` takes, with a rank
        cutoff).
    relevant_min : int, default 1
    ties : {"score", "rank"}, default "score"
    level : float, default 0.95
        Level of the intervals; ``1 - level`` is the family-wise error of the verdicts on
        the differences.
    alpha, tolerance : float
        The transport rule's level and tolerance in grades (params
        ``holes.transport_alpha`` and ``holes.transport_tolerance``).
    rng : numpy.random.Generator, optional
        Source of the rank-set's bootstrap; None (or no old arm): no rank-set.
    n_resamples : int, default 1000
        The rank-set's bootstrap resamples (at least 100).

    Returns
    -------
    dict
        JSON-ready: ``arm``, ``measure``, ``queries`` (N), ``pairs`` and ``holes`` within the
        cutoff, ``hole_rate`` (holes / pairs), ``hole_queries``, ``sample`` (sorted ids);
        ``estimates``: ``ppi++`` and ``model-only``
        (:meth:`relgrade.evaluation.holes.HoleEstimate.to_dict`) and ``key-only`` (the
        mean with every hole counted as not relevant: ``{"method", "estimate"}``);
        ``comparisons``: one record per old arm, sorted by name
        (:func:`relgrade.evaluation.holes.new_arm_comparisons`' columns, and ``clipped``);
        every interval cut to the range its quantity can take ([0, 1] for a mean of nDCG,
        [-1, 1] for a difference; ``clipped`` says whether an end moved), as ppi mode cuts
        them; ``transport``
        (:meth:`relgrade.evaluation.holes.TransportCheck.to_dict`); ``level_claim`` (a value
        of :data:`LEVEL_CLAIM`); with ``rng`` and an old arm, ``rank_set``: the old arms'
        and the new arm's rank intervals with simultaneous coverage ``level``
        (:func:`relgrade.evaluation.holes.new_arm_rank_sets`), ``{"measure", "method",
        "queries"}`` and :meth:`relgrade.evaluation.ranksets.RankSets.to_dict`.

    Raises
    ------
    InputError
        A hole without exactly one model grade, or a sampled query's hole without exactly
        one human grade (naming the pair); a sampled query outside ``queries`` or without a
        hole; ``old_pairs`` without its columns; and as
        :func:`relgrade.evaluation.holes.new_arm_estimate`,
        :func:`relgrade.evaluation.holes.new_arm_comparisons` and
        :func:`relgrade.evaluation.holes.transport_check`.

    Notes
    -----
    The per-query values come from :func:`relgrade.evaluation.metrics.per_query` on the key
    with the holes filled (:func:`relgrade.evaluation.holes.fill_holes`): by the model grader
    on every query (``F``), by people on the sampled queries (``Y``), so a hole graded
    relevant also enters the query's ideal ranking. The transport check's new side is the
    sampled holes, each with both grades.
    """
    require(run, RUN, what="the new arm's run")
    require(key, KEY, what="the frozen key")
    require(old_pairs, OLD_PAIRS, what="the old arms' pairs graded by both")
    qs = sorted(_queries(queries))
    k = cutoff_of(measure, relevant_min=relevant_min)
    mine = run[run["query_id"].astype(str).isin(qs)]
    found, counts = hl.find_holes(mine, key, k=k, ties=ties)
    found = found.astype({"query_id": str, "chunk_id": str})
    c = counts.assign(query_id=counts["query_id"].astype(str)).set_index("query_id")
    c = c.reindex(qs).fillna(0).astype(np.int64)
    s_ids = sorted({str(q) for q in sample})
    position = {q: i for i, q in enumerate(qs)}
    outside = [q for q in s_ids if q not in position]
    if outside:
        raise InputError("a sampled query is not a query of the experiment", item=outside[0],
                         fix="draw the sample with owed_holes over the same queries")
    bare = [q for q in s_ids if c.at[q, "holes"] == 0]
    if bare:
        raise InputError("the human sample must hold queries with holes only", item=bare[0],
                         found="0 holes", fix="draw the sample with owed_holes")
    s = np.array([position[q] for q in s_ids], dtype=np.int64)
    score = dict(measures=measure, ties=ties, relevant_min=relevant_min)
    filled = _values(metrics.per_query(qrels=hl.fill_holes(key, found, model_grades),
                                       run=mine, **score), qs)
    sampled_holes = found[found["query_id"].isin(s_ids)]
    people_key = hl.fill_holes(key, sampled_holes, human_grades)
    in_sample = mine[mine["query_id"].astype(str).isin(s_ids)]
    human = _values(metrics.per_query(qrels=people_key[people_key["query_id"].astype(str)
                                                       .isin(s_ids)],
                                      run=in_sample, **score), s_ids)
    key_only = _values(metrics.per_query(qrels=key, run=mine, **score), qs)
    design = dict(filled=filled, holes=c["holes"].to_numpy(), pairs=c["pairs"].to_numpy(),
                  sample=s, human=human, level=level)
    est = hl.new_arm_estimate(**design)
    old_values = {str(a): pd.Series(v.to_numpy(dtype=float), index=v.index.astype(str))
                  .reindex(qs).fillna(0.0).to_numpy() for a, v in sorted(old.items())}
    comps = hl.new_arm_comparisons(str(arm), old=old_values, **design)
    both = sampled_holes.merge(_grade(model_grades, "model"), on=list(PAIR)).merge(
        _grade(human_grades, "human"), on=list(PAIR))
    ref = old_pairs.astype({"query_id": str})
    check = hl.transport_check(
        old_model=ref["model"].to_numpy(dtype=float), old_human=ref["human"].to_numpy(dtype=float),
        old_query=ref["query_id"].to_numpy(), new_model=both["model"].to_numpy(dtype=float),
        new_human=both["human"].to_numpy(dtype=float), new_query=both["query_id"].to_numpy(),
        alpha=alpha, tolerance=tolerance)
    rank_set = None
    if rng is not None and old_values:
        r = hl.new_arm_rank_sets(old=old_values, rng=rng, n_resamples=n_resamples, **design)
        rank_set = {"measure": str(measure), "method": hl.RANK_SET_METHOD,
                    "queries": len(qs)} | r.to_dict([*old_values, str(arm)])
    bounds = _range(measure)
    diff_bounds = None if bounds is None else (bounds[0] - bounds[1], bounds[1] - bounds[0])
    return {
        "arm": str(arm), "measure": str(measure), "queries": len(qs),
        "pairs": int(c["pairs"].sum()), "holes": int(c["holes"].sum()),
        "hole_rate": hl.hole_rate(c["holes"].to_numpy(), c["pairs"].to_numpy()),
        "hole_queries": int((c["holes"] > 0).sum()), "sample": s_ids,
        "estimates": {"ppi++": _clipped(est["ppi++"].to_dict(), bounds),
                      "model-only": _clipped(est["model-only"].to_dict(), bounds),
                      "key-only": {"method": "key-only", "estimate": float(key_only.mean())}},
        "comparisons": [_clipped({k2: _plain(v) for k2, v in row.items()}, diff_bounds)
                        for row in comps.to_dict(orient="records")],
        "transport": check.to_dict(),
        "level_claim": LEVEL_CLAIM[check.refuse],
    } | ({"rank_set": rank_set} if rank_set is not None else {})


def _range(measure: str):
    """The range a mean of ``measure`` can take, None for a count or an unparsed name."""
    try:
        return value_range(measure)
    except InputError:
        return None


def _clipped(row: dict, bounds) -> dict:
    """``row`` (an estimate or a difference) with ``low``/``high`` cut to ``bounds`` and
    ``clipped`` saying whether either moved, as ppi mode cuts its intervals
    (:func:`relgrade.evaluation.ppi_table.clip_interval`)."""
    low, high, clipped = clip_interval(float(row["low"]), float(row["high"]), bounds)
    return {**row, "low": low, "high": high, "clipped": clipped}


def _grade(grades: pd.DataFrame, name: str) -> pd.DataFrame:
    g = grades[list(KEY)].astype({"query_id": str, "chunk_id": str})
    return g.drop_duplicates(list(PAIR)).rename(columns={"grade": name})


def _plain(v):
    if isinstance(v, (np.bool_, bool)):
        return bool(v)
    if isinstance(v, np.integer):
        return int(v)
    if isinstance(v, np.floating):
        return float(v)
    return v


def reference_pairs(grades: pd.DataFrame, *, model_grader: str, human_grader: str,
                    pairs: pd.DataFrame | None = None) -> pd.DataFrame:
    """The old arms' pairs that the model grader and people both graded: the transport
    check's reference side.

    Parameters
    ----------
    grades : pandas.DataFrame
        The current grades table (``query_id``, ``chunk_id``, ``grader``, ``grade``; the
        grades stage's :data:`relgrade.schema.GRADES`), one current row per pair and grader.
        Not modified.
    model_grader, human_grader : str
        The graders compared (params ``holes.model_grader`` and ``holes.human_grader``).
    pairs : pandas.DataFrame, optional
        ``query_id``, ``chunk_id``: the pairs to keep (the frozen key's); default every pair.

    Returns
    -------
    pandas.DataFrame
        :data:`OLD_PAIRS` (``model`` and ``human`` int64), sorted by query and chunk.

    Raises
    ------
    InputError
        ``grades`` without its columns; a grader with two grades of one pair; the two
        graders the same; no pair graded by both (the bias on the old arms is unknown).

    Examples
    --------
    >>> g = pd.DataFrame({"query_id": ["q1", "q1", "q2", "q1"], "chunk_id": ["a"] * 4,
    ...                   "grader": ["m", "p", "m", "m2"], "grade": [2, 1, 0, 0]})
    >>> reference_pairs(g, model_grader="m", human_grader="p").values.tolist()
    [['q1', 'a', 2, 1]]
    """
    require(grades, ["query_id", "chunk_id", "grader", "grade"], what="the grades table")
    if str(model_grader) == str(human_grader):
        raise InputError("the transport check needs two graders", item=str(model_grader),
                         fix="name different graders in holes.model_grader and "
                             "holes.human_grader")
    g = grades[["query_id", "chunk_id", "grader", "grade"]].astype(
        {"query_id": str, "chunk_id": str, "grader": str})
    sides = []
    for name, col in ((str(model_grader), "model"), (str(human_grader), "human")):
        mine = g[g["grader"] == name]
        twice = mine.duplicated(PAIR)
        if twice.any():
            q, c = mine.loc[twice, PAIR].iloc[0]
            raise InputError("a grader has two current grades of one pair", item=f"{name} {q} {c}",
                             fix="give the current grades table (one row per pair and grader)")
        sides.append(mine[PAIR + ["grade"]].rename(columns={"grade": col}))
    both = sides[0].merge(sides[1], on=PAIR)
    if pairs is not None:
        both = both.merge(pairs[PAIR].astype(str).drop_duplicates(), on=PAIR)
    if both.empty:
        raise InputError("no pair of the old arms was graded by both graders, so the model "
                         "grader's bias there is unknown",
                         item=f"{model_grader} and {human_grader}",
                         fix="name holes graders who both graded pairs of the key (people of "
                             "the key's grading or audit, a model that graded the pool), or "
                             "have the one that did not grade the other's pairs of the key "
                             "first")
    both = both.astype({"model": np.int64, "human": np.int64})
    return both.sort_values(PAIR, kind="stable").reset_index(drop=True)[list(OLD_PAIRS)]


def decision_fields(record: dict, *, key_sha256: str | None = None,
                    pool_version: str | None = None, baseline: str | None = None) -> dict:
    """The new arm's ``dvc metrics`` file, from :func:`new_arm_report`'s record.

    Its columns are those of an old arm's file
    (:func:`relgrade.evaluation.decision.arm_summaries`) where they mean the same, so
    ``dvc metrics show`` lines them up, plus what only a new arm has.

    Parameters
    ----------
    record : dict
        :func:`new_arm_report`'s result.
    key_sha256, pool_version : str, optional
        What the numbers rest on (the frozen key's sha256, cut to its first 12 hex digits as
        the old arms' files carry it, and the pool version).
    baseline : str, optional
        Params ``metrics.baseline``: the old arm whose difference is written.

    Returns
    -------
    dict
        ``measure``, ``mean``, ``low``, ``high`` (the corrected PPI++ estimate and interval),
        ``method`` (``"ppi++ on holes"``), ``hole_rate``, ``model_only_mean``,
        ``key_only_mean``, ``level_claim`` (a value of :data:`LEVEL_CLAIM`), ``judged``
        (1 − hole rate: the share of its pairs within the measure's cutoff that the frozen
        key graded, before the holes were; absent when the arm has no such pair), then
        ``pool_version`` and ``key`` when given, and with a baseline among the old arms
        ``baseline``, ``delta`` (new − baseline on the same corrected per-query values) and
        ``p_holm`` (Holm over every old arm; each one's difference is in the record);
        with the record's ``rank_set``, the arm's ``rank_low`` and ``rank_high`` among the
        old arms and itself (the old arms' files keep their ranks among themselves).
    """
    e = record["estimates"]
    out = {"measure": record["measure"], "mean": e["ppi++"]["estimate"],
           "low": e["ppi++"]["low"], "high": e["ppi++"]["high"], "method": "ppi++ on holes",
           "hole_rate": record["hole_rate"], "model_only_mean": e["model-only"]["estimate"],
           "key_only_mean": e["key-only"]["estimate"], "level_claim": record["level_claim"]}
    if record.get("pairs"):  # the share of its pairs within the cutoff the frozen key graded
        out["judged"] = 1.0 - float(record["hole_rate"])
    if pool_version:
        out["pool_version"] = pool_version
    if key_sha256:
        out["key"] = key_sha256[:12]
    for row in record["comparisons"]:
        if baseline is not None and row["arm_b"] == str(baseline):
            out.update(baseline=row["arm_b"], delta=row["estimate"], p_holm=row["p_holm"])
    ranks = (record.get("rank_set") or {}).get("arms", {}).get(record["arm"])
    if ranks:
        out.update(rank_low=ranks["rank_low"], rank_high=ranks["rank_high"])
    return out


def _f(x, digits: int = 4, sign: str = "") -> str:
    return f"{round(float(x), digits) + 0.0:{sign}.{digits}f}"


def verdict_lines(record: dict) -> list[str]:
    """The new arm's comparisons with the old arms as the report's Verdicts sentences.

    Parameters
    ----------
    record : dict
        :func:`new_arm_report`'s result.

    Returns
    -------
    list of str
        One sentence per old arm, in the words of an old arm's verdict (who is better by how
        much with the interval and the Holm-adjusted p-value, or no detectable difference,
        saying when the interval excludes 0 only before Holm's correction),
        then how it was made: PPI++ on the per-query differences with the new arm's corrected
        values, Holm over the new arm's comparisons, and its level claim.

    Examples
    --------
    >>> rec = {"measure": "nDCG@10", "level_claim": "level claim holds", "comparisons": [
    ...     {"arm_a": "new", "arm_b": "bm25", "estimate": -0.2, "low": -0.3, "high": -0.1,
    ...      "p_holm": 0.004, "significant": True}]}
    >>> print(verdict_lines(rec)[0])
    bm25 better than new on nDCG@10 by 0.200 [0.100, 0.300], p=0.004 after Holm (new joined after the key froze: PPI++ on its holes, Holm over its 1 comparison with the old arms; level claim holds)
    >>> rec["comparisons"] = [dict(rec["comparisons"][0], p_holm=0.12, significant=False),
    ...                       dict(rec["comparisons"][0], arm_b="dense", p_holm=0.5,
    ...                            significant=False, low=-0.3, high=0.1)]
    >>> print(verdict_lines(rec)[0])
    no detectable difference on nDCG@10 between new and bm25: -0.200 [-0.300, -0.100], p=0.12 after Holm; the interval excludes 0 only before correcting for the 2 comparisons made (new joined after the key froze: PPI++ on its holes, Holm over its 2 comparisons with the old arms; level claim holds)
    """
    rows = record["comparisons"]
    how = (f"({rows[0]['arm_a'] if rows else record.get('arm')} joined after the key froze: "
           f"PPI++ on its holes, Holm over its {len(rows)} comparison"
           f"{'s' if len(rows) != 1 else ''} with the old arms; {record['level_claim']})")
    out = []
    m = record["measure"]
    for r in rows:
        est, lo, hi, p = r["estimate"], r["low"], r["high"], f"{r['p_holm']:.2g}"
        if r["significant"]:
            win, lose = (r["arm_a"], r["arm_b"]) if est > 0 else (r["arm_b"], r["arm_a"])
            if est < 0:
                est, lo, hi = -est, -hi, -lo
            out.append(f"{win} better than {lose} on {m} by {_f(est, 3)} [{_f(lo, 3)}, "
                       f"{_f(hi, 3)}], p={p} after Holm {how}")
        else:
            # imported here: the report module loads scipy, which this module's callers need not
            from relgrade.evaluation.report import before_holm_note

            caveat = before_holm_note(lo, hi, len(rows))
            out.append(f"no detectable difference on {m} between {r['arm_a']} and "
                       f"{r['arm_b']}: {_f(est, 3, '+')} [{_f(lo, 3, '+')}, {_f(hi, 3, '+')}], "
                       f"p={p} after Holm{caveat} {how}")
    return out


def report_lines(record: dict) -> list[str]:
    """The new arm's section of the decision report, as Markdown lines.

    Parameters
    ----------
    record : dict
        :func:`new_arm_report`'s result.

    Returns
    -------
    list of str
        A heading, the estimate with its interval and hole rate, the transport verdict (a
        refused level claim says so and why), the model-only and key-only numbers labelled,
        and one line per old arm with the difference, its interval and Holm p-value.
    """
    e, t = record["estimates"]["ppi++"], record["transport"]
    lo, hi = _f(e["low"]), _f(e["high"])
    lines = [f"## New arm {record['arm']} on the frozen key", "",
             f"- {record['measure']}: {_f(e['estimate'])} [{lo}, {hi}] "
             f"({round(100 * e['level'])}% interval, PPI++ on the queries with holes, "
             f"{e['n']} of {e['hole_queries']} such queries graded by people, "
             f"{e['N']} queries)",
             f"- hole rate: {_f(100 * record['hole_rate'], 1)}% "
             f"({record['holes']} of {record['pairs']} pairs within the cutoff)"]
    words = (f"the model grader's bias on the sampled holes ({_f(t['bias_new'], 3)} grade) "
             f"differs from its bias on the old arms' pairs ({_f(t['bias_old'], 3)}) by "
             f"{_f(t['difference'], 3)}, p = {t['p']:.2g} (tolerance {t['tolerance']}, "
             f"alpha {t['alpha']})")
    if t["refuse"]:
        lines.append(f"- **level claim refused**: {words}; the interval rests on the "
                     "human sample of holes alone, and the level is not claimed")
    else:
        lines.append(f"- level claim holds: {words}")
    lines.append(f"- model-only (holes graded by the model, uncorrected): "
                 f"{_f(record['estimates']['model-only']['estimate'])}; key-only (holes "
                 f"counted as not relevant): {_f(record['estimates']['key-only']['estimate'])}")
    if record["comparisons"]:
        lines.append("- differences with the old arms: PPI++ on the per-query differences "
                     "(the new arm's corrected value minus the old arm's on the frozen key, "
                     "every query), each with its own weight of the model's grades, so a "
                     "difference need not equal the difference of the two means")
    for row in record["comparisons"]:
        lines.append(f"- {row['arm_a']} − {row['arm_b']}: {_f(row['estimate'])} "
                     f"[{_f(row['low'])}, {_f(row['high'])}], Holm p = {row['p_holm']:.2g}"
                     + (" (significant)" if row["significant"] else ""))
    lines.extend(_rank_lines(record))
    return lines


def _rank_lines(record: dict) -> list[str]:
    """The new arm's rank among the old arms and its tied groups, or nothing."""
    rs = record.get("rank_set")
    if not rs:
        return []
    me = rs["arms"][record["arm"]]
    ranks = (str(me["rank_low"]) if me["rank_low"] == me["rank_high"]
             else f"{me['rank_low']}–{me['rank_high']}")
    groups = "; ".join(", ".join(g) for g in rs["tied_groups"])
    return [f"- rank among the old arms: {ranks} of {len(rs['arms'])} "
            f"({round(100 * rs['level'])}% simultaneous rank-sets of the old arms and "
            f"{record['arm']}, {rs['n_resamples']} resamples); tied groups, best first: "
            f"{groups}. The old arms' own rank-sets above leave the new arms out"]
