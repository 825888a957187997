"""The rater workflow in one call: gold → removal → aggregation → agreement → flags.

:func:`aggregate_raters` takes the long grades table of several raters (and, optionally, a
gold table of pairs with known grades) and returns a :class:`RaterReport`: each rater's gold
accuracy and what happened to them, one grade per pair, Fleiss' kappa and Krippendorff's
alpha before and after removal, and the high-variance pairs an expert should adjudicate.
The report renders itself as a JSON-ready dict (:meth:`RaterReport.to_dict`) and as text
lines (:meth:`RaterReport.lines`).
"""

from __future__ import annotations

import contextlib
import dataclasses
from dataclasses import dataclass
from typing import Iterable

import pandas as pd

from relgrade.canonical import json_ready
from relgrade.errors import InputError
from relgrade.protocol.agreement import KRIPPENDORFF_LEVELS, multi_rater_agreement
from relgrade.raters import aggregate as agg
from relgrade.raters import gold as gd

#: Aggregation methods: name → how the report names it.
METHODS = {"majority": "majority vote", "dawid-skene": "Dawid-Skene"}

#: The agreement statistics the report shows, before and after removal.
AGREEMENT_ROWS = ("fleiss_kappa", "fleiss_p_bar", "fleiss_p_e") + tuple(
    f"krippendorff_alpha_{lv}" for lv in KRIPPENDORFF_LEVELS)


@contextlib.contextmanager
def _about(path):
    """Name ``path`` in a library error that names no file."""
    try:
        yield
    except InputError as e:
        if e.path is not None or path is None:
            raise
        raise InputError(e.rule, path=path, line=e.line, item=e.item, found=e.found,
                         fix=e.fix) from None


def select_grades(grades: pd.DataFrame, *, round_: int | None = None,
                  exclude: Iterable[str] = (), source=None) -> pd.DataFrame:
    """The grades of one round, without the excluded graders.

    Parameters
    ----------
    grades : pandas.DataFrame
        The long grades table: ``query_id``, ``chunk_id``, ``grader``, ``grade`` and, when
        it holds several rounds, ``round``.
    round_ : int, optional
        Keep this round only. Required when the table holds several rounds.
    exclude : iterable of str, optional
        Graders to leave out (e.g. an earlier aggregate imported as a grader).
    source : str or os.PathLike, optional
        The file named in errors.

    Returns
    -------
    pandas.DataFrame
        The selected rows, columns unchanged.

    Raises
    ------
    InputError
        ``round_`` given but the table has no ``round`` column; several rounds and no
        ``round_``; ``exclude`` names a grader the table does not have.
    """
    exclude = tuple(exclude)
    if round_ is not None:
        if "round" not in grades.columns:
            raise InputError("--round given but the grades have no round column", path=source)
        grades = grades[pd.to_numeric(grades["round"], errors="coerce") == round_]
    elif "round" in grades.columns:
        rounds = sorted({int(r) for r in grades["round"].dropna()})
        if len(rounds) > 1:
            raise InputError("the grades hold several rounds", path=source,
                             found="rounds " + ", ".join(map(str, rounds)),
                             fix="Pass --round N to aggregate one round")
    if exclude:
        names = set(grades["grader"].astype(str)) if "grader" in grades.columns else set()
        unknown = [n for n in exclude if n not in names]
        if unknown:
            raise InputError("--exclude names a grader the grades do not have", path=source,
                             item=unknown[0])
        grades = grades[~grades["grader"].astype(str).isin(exclude)]
    return grades


def _rater_rows(ratings, accuracy, decisions) -> list[dict]:
    counts = ratings.groupby("grader")["grade"].size()
    acc = {} if accuracy is None else accuracy.set_index("grader").to_dict("index")
    dec = decisions.set_index("grader").to_dict("index")
    rows = []
    for name in sorted(counts.index):
        a = acc.get(name, {})
        d = dec.get(name)
        rows.append({
            "grader": name,
            "grades": int(counts[name]),
            "gold_pairs": json_ready(a["gold_pairs"], nan_as_null=True) if a else None,
            "correct": json_ready(a["correct"], nan_as_null=True) if a else None,
            "accuracy": json_ready(a["accuracy"], nan_as_null=True) if a else None,
            "within_one": json_ready(a["within_one"], nan_as_null=True) if a else None,
            "removed": bool(d["removed"]) if d else False,
            "flagged": bool(d is not None and not d["removed"]),
            "decision": d["reason"] if d else ("kept" if accuracy is not None
                                               else "kept (no gold table)"),
        })
    return rows


@dataclass(frozen=True, eq=False)
class RaterReport:
    """What :func:`aggregate_raters` found, ready to print or to write.

    Attributes
    ----------
    labels : pandas.DataFrame of shape (n_pairs, 3)
        The aggregate: ``query_id``, ``chunk_id`` (str), ``grade`` (int64), one row per
        pair, sorted by (query_id, chunk_id).
    raters : list of dict
        Per rater (by name): ``grader``, ``grades``, ``gold_pairs``, ``correct``,
        ``accuracy``, ``within_one`` (``None`` without gold), ``removed``, ``flagged``,
        ``decision``.
    agreement : dict
        ``{"all": ..., "kept": ...}``: :func:`~relgrade.protocol.agreement.multi_rater_agreement`
        over every rater and over the kept raters.
    high_variance : list of dict
        The pairs flagged for adjudication (:func:`relgrade.raters.aggregate.flag_high_variance`)
        with their aggregate ``grade``.
    method_detail : dict
        ``{"tie_rule": ...}`` for majority, ``{"dawid_skene": {...}}`` for Dawid-Skene.
    n_ratings, n_pairs_in : int
        Grades and distinct pairs of the selected input, before removal.
    grades, gold, out : str or None
        The names of the grades table, the gold table and the written aggregate, as shown.
    Other attributes echo the settings.
    """

    labels: pd.DataFrame
    raters: list
    kept_raters: list
    agreement: dict
    high_variance: list
    method_detail: dict
    method: str
    scale: list
    threshold: float
    min_gold: int
    flag_variance: float
    round: int | None
    gold_pairs: int | None
    n_ratings: int
    n_pairs_in: int
    grades: str | None = None
    gold: str | None = None
    out: str | None = None

    def written_to(self, out) -> "RaterReport":
        """The same report, saying the aggregate was written to ``out``."""
        return dataclasses.replace(self, out=None if out is None else str(out))

    def to_dict(self) -> dict:
        """The report as one JSON-ready document (what ``relgrade aggregate --json`` prints).

        Returns
        -------
        dict
            Keys ``grades``, ``gold``, ``gold_pairs``, ``method``, ``scale``, ``threshold``,
            ``min_gold``, ``round``, ``pairs``, ``raters``, ``removed``, ``flagged_raters``,
            ``kept_raters``, ``agreement``, ``flag_variance``, ``high_variance``, ``out``, then
            ``tie_rule`` and ``shares`` (majority: per pair its grade, its raters and the
            share of them who gave that grade) or ``dawid_skene`` (its iterations,
            convergence, tol, max_iter, log-likelihood, class priors, each kept rater's
            confusion matrix and ``posteriors``: per pair its grade and the posterior
            probability of every grade).
        """
        return {
            "grades": self.grades,
            "gold": self.gold,
            "gold_pairs": self.gold_pairs,
            "method": self.method,
            "scale": self.scale,
            "threshold": self.threshold,
            "min_gold": self.min_gold,
            "round": self.round,
            "pairs": int(len(self.labels)),
            "raters": self.raters,
            "removed": [r["grader"] for r in self.raters if r["removed"]],
            "flagged_raters": [r["grader"] for r in self.raters if r["flagged"]],
            "kept_raters": self.kept_raters,
            "agreement": self.agreement,
            "flag_variance": self.flag_variance,
            "high_variance": self.high_variance,
            "out": self.out,
            **self.method_detail,
        }


def aggregate_raters(grades: pd.DataFrame, *, scale: Iterable[int],
                     gold: pd.DataFrame | None = None, method: str = "majority",
                     threshold: float = 0.7, min_gold: int = 5, flag_variance: float = 0.5,
                     round_: int | None = None, exclude: Iterable[str] = (),
                     grades_source=None, gold_source=None, tol: float = agg.TOL,
                     max_iter: int = agg.MAX_ITER, repeats: bool = False) -> RaterReport:
    """Several raters' grades → one grade per pair, with who was removed and why.

    The steps, in order: select the round and drop excluded graders
    (:func:`select_grades`); check the ratings; with gold, measure each rater's accuracy
    on it and remove those below ``threshold`` measured on at least ``min_gold`` gold
    answers (:func:`relgrade.raters.gold.remove_raters`); aggregate the kept raters by
    majority vote or Dawid-Skene; measure agreement over all raters and over the kept ones;
    flag high-variance pairs for adjudication.

    Parameters
    ----------
    grades : pandas.DataFrame
        The long grades table: ``query_id``, ``chunk_id``, ``grader``, ``grade`` (and
        ``round``), one row per rater and pair.
    scale : iterable of int
        The grade scale.
    gold : pandas.DataFrame, optional
        Pairs with known grades: ``query_id``, ``chunk_id``, ``grade``. Without it no rater
        is removed.
    method : {"majority", "dawid-skene"}, default "majority"
        How the kept raters' grades become one grade (majority ties: the median of the
        tied grades, rounded down).
    threshold : float, default 0.7
        Lowest gold accuracy a rater may have and stay, in [0, 1].
    min_gold : int, default 5
        Fewest gold answers on which a rater can be removed; one with fewer is kept and
        flagged.
    flag_variance : float, default 0.5
        Flag a pair when its grades' variance is at least this (grades two or more apart
        are always flagged).
    round_, exclude
        As :func:`select_grades`.
    grades_source, gold_source : str or os.PathLike, optional
        The names of the two tables: shown in the report and named in errors.
    tol, max_iter
        Dawid-Skene's convergence tolerance on its parameters and its iteration cap (see
        :func:`relgrade.raters.aggregate.dawid_skene`); unused by majority vote.
    repeats : bool, default False
        Accept a rater's repeated grades of one pair (Dawid & Skene's 1979 data has them):
        each counts as a vote, a gold answer and a term of the likelihood; agreement takes
        each repeat as one more rating of the pair (the k-th repeat of rater r is scored as
        rater ``r#k``). False refuses them, naming the rater and the pair.

    Returns
    -------
    RaterReport

    Raises
    ------
    InputError
        A setting is out of range; a rule of :func:`select_grades`,
        :func:`relgrade.raters.aggregate.check_ratings` or
        :func:`relgrade.raters.gold.check_gold` is broken; a gold grade is off the scale;
        nothing is left to aggregate (no grades, or every rater removed).
    """
    if method not in METHODS:
        raise InputError("unknown aggregation method", found=method,
                         fix="Use one of " + ", ".join(METHODS))
    if not (0.0 <= threshold <= 1.0):
        raise InputError("--threshold is a gold accuracy between 0 and 1",
                         found=repr(threshold))
    scale = list(scale)
    grades = select_grades(grades, round_=round_, exclude=exclude, source=grades_source)
    with _about(grades_source):
        ratings = agg.check_ratings(grades, scale=scale, repeats=repeats)
    if ratings.empty:
        raise InputError("no grades to aggregate", path=grades_source)

    accuracy, known, kept = None, None, ratings
    decisions = pd.DataFrame({c: pd.Series(dtype=object) for c in gd.DECISION_COLUMNS})
    if gold is not None:
        with _about(gold_source):
            known = gd.check_gold(gold)
        off = known[~known["grade"].isin(scale)]
        if len(off):
            raise InputError(f"gold grade outside the scale {','.join(map(str, scale))}",
                             path=gold_source,
                             item=f"pair ({off.iloc[0]['query_id']}, {off.iloc[0]['chunk_id']})",
                             found=int(off.iloc[0]["grade"]))
        accuracy = gd.gold_accuracy(ratings, known, repeats=repeats)
        kept, decisions = gd.remove_raters(ratings, accuracy, threshold=threshold,
                                           min_gold=min_gold)
        if kept.empty:
            raise InputError("every rater fell below the gold threshold: nothing is left to "
                             "aggregate", path=grades_source,
                             fix="Check the gold table's grades, or lower --threshold")

    if method == "majority":
        labels = agg.majority(kept, scale=scale, repeats=repeats)
        detail = {"tie_rule": agg.TIES["median-low"],
                  "shares": [{"query_id": q, "chunk_id": c, "grade": int(g), "votes": int(v),
                              "share": float(a)}
                             for q, c, g, v, a in labels[agg.MAJORITY_COLUMNS].itertuples(
                                 index=False)]}
    else:
        ds = agg.dawid_skene(kept, scale=scale, tol=tol, max_iter=max_iter, repeats=repeats)
        labels = ds.labels
    kept_raters = sorted(kept["grader"].unique())
    if method != "majority":
        detail = {"dawid_skene": {
            "iterations": ds.iterations, "converged": ds.converged, "tol": tol,
            "max_iter": max_iter,
            "log_likelihood": ds.log_likelihood,
            "priors": {str(g): float(p) for g, p in ds.priors.items()},
            "confusion": {name: ds.confusion.loc[name].to_numpy().tolist()
                          for name in kept_raters},
            "posteriors": [{"query_id": str(q), "chunk_id": str(c), "grade": int(g),
                            "posterior": {str(k): float(p) for k, p in row.items()}}
                           for ((q, c), row), g in zip(ds.posteriors.iterrows(),
                                                       ds.labels["grade"])],
        }}
    flags = agg.flag_high_variance(kept, threshold=flag_variance, repeats=repeats)
    flags = flags.merge(labels[["query_id", "chunk_id", "grade"]], on=["query_id", "chunk_id"],
                        how="left")
    return RaterReport(
        labels=labels[["query_id", "chunk_id", "grade"]],
        raters=_rater_rows(ratings, accuracy, decisions),
        kept_raters=kept_raters,
        agreement={"all": multi_rater_agreement(_one_per_rater(ratings, repeats), scale=scale),
                   "kept": multi_rater_agreement(_one_per_rater(kept, repeats), scale=scale)},
        high_variance=[{k: json_ready(v, nan_as_null=True) for k, v in row.items()}
                       for row in flags.to_dict("records")],
        method_detail=detail,
        method=method, scale=scale, threshold=threshold, min_gold=min_gold,
        flag_variance=flag_variance, round=round_,
        gold_pairs=None if known is None else int(len(known)),
        n_ratings=int(len(ratings)),
        n_pairs_in=int(ratings[["query_id", "chunk_id"]].drop_duplicates().shape[0]),
        grades=None if grades_source is None else str(grades_source),
        gold=None if gold_source is None else str(gold_source),
    )


def _one_per_rater(ratings: pd.DataFrame, repeats: bool) -> pd.DataFrame:
    """With repeats, a rater's k-th grade of a pair (k >= 2) as rater ``NAME#k``."""
    if not repeats:
        return ratings
    k = ratings.groupby(["query_id", "chunk_id", "grader"], sort=False).cumcount() + 1
    name = ratings["grader"].where(k == 1, ratings["grader"] + "#" + k.astype(str))
    return ratings.assign(grader=name)
