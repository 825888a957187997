"""Pool-bias checks: how much each arm's score owes to the pool it helped build.

Unjudged chunks score 0, so a key pooled from some arms penalises an arm that retrieves
differently. Three checks, all computed against the frozen key:

* **judged@k** per arm: the share of each arm's top k that has a grade (low means the arm
  is scored on chunks nobody graded);
* **leave-one-arm-out** (Zobel 1998, "How reliable are the results of large-scale
  information retrieval experiments?", SIGIR; Buckley et al. 2007): remove from the key the
  pairs only that arm brought into the pool, re-score the arm on the reduced key, and see
  how its score and its rank among the arms move. A large drop says the key favours arms
  that took part in pooling, and a new arm scored on this key would be short-changed;
* **condensed lists** (Sakai 2007, "Alternatives to bpref", SIGIR): drop unjudged chunks
  from each run before scoring, so an unjudged chunk neither scores 0 nor pushes judged
  ones down. Reported beside the standard scores, never instead of them.

Scores come from :func:`relgrade.evaluation.metrics.per_query`, the same code as the metrics stage.
"""

from __future__ import annotations

from typing import Sequence

import numpy as np
import pandas as pd

from relgrade.errors import InputError
from relgrade.evaluation import metrics

LOO_COLUMNS = ["arm", "measure", "full", "reduced", "change", "rank_full", "rank_reduced",
               "rank_change", "removed_pairs", "removed_relevant", "queries_full",
               "queries_reduced"]


def _need(df: pd.DataFrame, cols: Sequence[str], what: str) -> None:
    missing = [c for c in cols if c not in df.columns]
    if missing:
        raise InputError(f"{what} lacks column(s) {', '.join(missing)}",
                         found="columns " + ", ".join(map(str, df.columns)))


def unique_contributions(provenance: pd.DataFrame, *, depth: int) -> pd.DataFrame:
    """The pooled pairs that only one arm brought into the pool, within the pool depth.

    Parameters
    ----------
    provenance : pandas.DataFrame of shape (n_rows, >= 5)
        The private provenance table (:func:`relgrade.protocol.pool.build_pool`): ``query_id``,
        ``chunk_id``, ``arm``, ``rank``, ``source`` (``"depth"`` or ``"tail"``). Not modified.
    depth : int
        The pool depth (params ``pool.depth``).

    Returns
    -------
    pandas.DataFrame
        ``arm``, ``query_id``, ``chunk_id`` (str), sorted: a pair is listed under arm X
        when X ranked it within ``depth`` and no other arm appears in its provenance (at
        any depth, or through the tail sample).

    Raises
    ------
    InputError
        A column is missing or ``depth`` is not a positive integer.

    Examples
    --------
    >>> prov = pd.DataFrame({"query_id": ["q", "q", "q"], "chunk_id": ["a", "a", "b"],
    ...                      "arm": ["x", "y", "x"], "rank": [1, 2, 2],
    ...                      "source": ["depth"] * 3})
    >>> unique_contributions(prov, depth=10).values.tolist()
    [['x', 'q', 'b']]
    """
    _need(provenance, ["query_id", "chunk_id", "arm", "rank", "source"], "provenance")
    if isinstance(depth, bool) or not isinstance(depth, (int, np.integer)) or depth < 1:
        raise InputError("pool.depth must be a positive integer",
                         found=repr(depth))
    p = provenance[["query_id", "chunk_id", "arm", "rank", "source"]].astype(
        {"query_id": str, "chunk_id": str, "arm": str})
    n_arms = p.groupby(["query_id", "chunk_id"])["arm"].nunique()
    only = n_arms[n_arms == 1].index
    inside = p[(p["source"] == "depth") & (p["rank"] <= depth)]
    inside = inside.set_index(["query_id", "chunk_id"])
    inside = inside[inside.index.isin(only)].reset_index()
    out = inside[["arm", "query_id", "chunk_id"]].drop_duplicates()
    return out.sort_values(["arm", "query_id", "chunk_id"]).reset_index(drop=True)


def _means(per_query: pd.DataFrame) -> pd.DataFrame:
    g = per_query.groupby(["arm", "measure"], sort=False)["value"]
    return pd.DataFrame({"mean": g.mean(), "queries": g.size()}).reset_index()


def _loo_rows(arm: str, arms, full: pd.DataFrame, red_means: pd.DataFrame, *,
              removed: tuple[int, int]) -> list[dict]:
    """The leave-one-out rows of ``arm``, one per measure of ``full`` (indexed by arm and
    measure: ``mean``, ``queries``) against its means on the reduced key (``red_means``,
    indexed by measure: ``mean``, ``size``; :func:`_reduced_means`); ``removed`` is
    (pairs, relevant pairs) the reduced key lacks. Shared by the whole-table and the block
    paths."""
    rows = []
    for m in full.index.get_level_values("measure").unique():
        f = float(full.loc[(arm, m), "mean"]) if (arm, m) in full.index else 0.0
        r = float(red_means.loc[m, "mean"]) if m in red_means.index else 0.0
        others = [float(full.loc[(o, m), "mean"]) for o in arms
                  if o != arm and (o, m) in full.index]
        rf, rr = _rank(f, others), _rank(r, others)
        rows.append({"arm": arm, "measure": m, "full": f, "reduced": r, "change": r - f,
                     "rank_full": rf, "rank_reduced": rr, "rank_change": rr - rf,
                     "removed_pairs": removed[0], "removed_relevant": removed[1],
                     "queries_full": int(full.loc[(arm, m), "queries"])
                     if (arm, m) in full.index else 0,
                     "queries_reduced": int(red_means.loc[m, "size"])
                     if m in red_means.index else 0})
    return rows


def _reduced_means(reduced: pd.DataFrame) -> pd.DataFrame:
    """One arm's per-query values on its reduced key (``measure``, ``value``) → per measure
    (index, in order of first appearance) its ``mean`` and ``size``."""
    return reduced.groupby("measure", sort=False)["value"].agg(["mean", "size"])


def _rank(score: float, others: Sequence[float]) -> int:
    """1 + the number of other arms scoring strictly higher (ties share the better rank)."""
    return 1 + int(sum(o > score for o in others))


def leave_one_arm_out(*, qrels: pd.DataFrame, runs: pd.DataFrame, provenance: pd.DataFrame,
                      depth: int, measures: Sequence[str], ties: str = "score",
                      relevant_min: int = 1) -> pd.DataFrame:
    """Re-score each arm on a key without the pairs only it contributed.

    Parameters
    ----------
    qrels : pandas.DataFrame of shape (n_pairs, 3)
        The key: ``query_id``, ``chunk_id``, ``grade``. Not modified.
    runs : pandas.DataFrame
        Stacked runs: ``arm``, ``query_id``, ``chunk_id``, ``rank``, ``score``. Not modified.
    provenance : pandas.DataFrame
        Pool provenance (see :func:`unique_contributions`).
    depth : int
        Pool depth (params ``pool.depth``).
    measures : sequence of str
        Measure names (e.g. ``["nDCG(dcg='exp-log2')@10", "R@10"]``).
    ties : {"score", "rank"}, default "score"
        Run tie rule (params ``runs.ties``).
    relevant_min : int, default 1
        Lowest relevant grade (params ``scale.relevant_min``).

    Returns
    -------
    pandas.DataFrame
        One row per (arm, measure), columns ``LOO_COLUMNS``: ``full`` and ``reduced`` mean
        scores, ``change = reduced - full``, the arm's rank among all arms on the full key
        (``rank_full``) and with its reduced score against the others' full scores
        (``rank_reduced``; 1 is best, ties share the better rank), ``rank_change =
        rank_reduced - rank_full`` (positive: it falls), pairs and relevant pairs removed,
        and the queries each mean is over.

    Raises
    ------
    InputError
        Missing columns, a bad measure name, or the errors of
        :func:`relgrade.evaluation.metrics.per_query`.

    Notes
    -----
    The other arms keep their scores on the full key: the question is where the left-out
    arm would stand had it not helped build the pool (Zobel 1998). A query left with
    nothing relevant in the reduced key is undefined there and drops out of the arm's
    reduced mean, as the protocol drops a query whose pool holds nothing relevant;
    ``queries_reduced`` shows it.
    """
    _need(runs, ["arm", "query_id", "chunk_id", "rank", "score"], "runs")
    _need(qrels, ["query_id", "chunk_id", "grade"], "key")
    measures = list(measures)
    unique = unique_contributions(provenance, depth=depth)
    full = _means(metrics.per_query(qrels=qrels, run=runs, measures=measures, ties=ties,
                                    relevant_min=relevant_min))
    full = full.set_index(["arm", "measure"])
    arms = sorted(runs["arm"].astype(str).unique())
    key = qrels.assign(query_id=qrels["query_id"].astype(str),
                       chunk_id=qrels["chunk_id"].astype(str))
    pair_index = pd.MultiIndex.from_frame(key[["query_id", "chunk_id"]])
    rows = []
    for arm in arms:
        mine = unique[unique["arm"] == arm]
        drop = pair_index.isin(pd.MultiIndex.from_frame(mine[["query_id", "chunk_id"]])) \
            if len(mine) else np.zeros(len(key), dtype=bool)
        reduced_key = key[~drop]
        removed_relevant = int((key.loc[drop, "grade"].astype(int) >= relevant_min).sum())
        run = runs[runs["arm"].astype(str) == arm].drop(columns="arm")
        red = metrics.per_query(qrels=reduced_key, run=run, measures=measures, ties=ties,
                                relevant_min=relevant_min)
        rows += _loo_rows(arm, arms, full, _reduced_means(red),
                          removed=(int(drop.sum()), removed_relevant))
    return pd.DataFrame(rows, columns=LOO_COLUMNS)


def condensed_runs(runs: pd.DataFrame, qrels: pd.DataFrame) -> pd.DataFrame:
    """The runs with every unjudged chunk removed (Sakai 2007's condensed lists).

    Parameters
    ----------
    runs : pandas.DataFrame
        A run or stacked runs (``query_id``, ``chunk_id``, ``rank``, ``score``, optional
        ``arm``). Not modified.
    qrels : pandas.DataFrame
        The key (``query_id``, ``chunk_id``, ``grade``).

    Returns
    -------
    pandas.DataFrame
        The rows of ``runs`` whose (query_id, chunk_id) has a grade, in the same order;
        scores and ranks unchanged, so the judged chunks keep their relative order under
        either tie rule and move up into the places the unjudged ones left.
    """
    _need(runs, ["query_id", "chunk_id"], "runs")
    _need(qrels, ["query_id", "chunk_id"], "key")
    judged = pd.MultiIndex.from_arrays([qrels["query_id"].astype(str),
                                        qrels["chunk_id"].astype(str)])
    have = pd.MultiIndex.from_arrays([runs["query_id"].astype(str),
                                      runs["chunk_id"].astype(str)]).isin(judged)
    return runs[have].reset_index(drop=True)


def condensed_scores(*, qrels: pd.DataFrame, runs: pd.DataFrame, measures: Sequence[str],
                     ties: str = "score", relevant_min: int = 1) -> pd.DataFrame:
    """Each arm's mean score on its full run and on its condensed run.

    Parameters
    ----------
    qrels, runs, measures, ties, relevant_min
        As for :func:`leave_one_arm_out`; Judged@k measures are skipped (1 on a condensed
        list by construction).

    Returns
    -------
    pandas.DataFrame
        ``arm``, ``measure``, ``standard``, ``condensed``, ``difference`` (condensed -
        standard). A large positive difference means the arm's standard score is held down
        by chunks nobody graded.

    Notes
    -----
    Equivalent to trec_eval's ``-J`` (judged documents only) option; the tests check it
    against pytrec_eval with ``judged_docs_only_flag``.
    """
    _need(runs, ["arm", "query_id", "chunk_id", "rank", "score"], "runs")
    measures = [m for m in measures if not str(m).startswith("Judged")]
    std = _means(metrics.per_query(qrels=qrels, run=runs, measures=measures, ties=ties,
                                   relevant_min=relevant_min))
    con = _means(metrics.per_query(qrels=qrels, run=condensed_runs(runs, qrels),
                                   measures=measures, ties=ties, relevant_min=relevant_min))
    out = std.merge(con, on=["arm", "measure"], how="left", suffixes=("_std", "_con"))
    out = pd.DataFrame({"arm": out["arm"], "measure": out["measure"],
                        "standard": out["mean_std"], "condensed": out["mean_con"].fillna(0.0)})
    out["difference"] = out["condensed"] - out["standard"]
    return out.sort_values(["arm", "measure"], kind="stable").reset_index(drop=True)


def judged_at_k(*, qrels: pd.DataFrame, runs: pd.DataFrame, cutoffs: Sequence[int],
                ties: str = "score") -> pd.DataFrame:
    """Mean Judged@k per arm: the share of its top k that the key grades.

    Parameters
    ----------
    qrels, runs, ties
        As for :func:`leave_one_arm_out`.
    cutoffs : sequence of int
        The k values (params ``metrics.cutoffs``).

    Returns
    -------
    pandas.DataFrame
        ``arm``, ``k``, ``judged`` (mean over the key's queries of
        graded chunks in the top k / min(k, chunks retrieved); a query the arm did not
        answer counts 0), ``unjudged_share`` = 1 - judged.
    """
    names = [f"Judged@{int(k)}" for k in cutoffs]
    pq = metrics.per_query(qrels=qrels, run=runs, measures=names, ties=ties)
    means = _means(pq)
    means["k"] = means["measure"].str.split("@").str[1].astype(int)
    out = means.rename(columns={"mean": "judged"})[["arm", "k", "judged"]]
    out["unjudged_share"] = 1.0 - out["judged"]
    return out.sort_values(["arm", "k"]).reset_index(drop=True)


def pool_bias_report(*, qrels: pd.DataFrame, runs: pd.DataFrame, provenance: pd.DataFrame,
                     depth: int, measures: Sequence[str], cutoffs: Sequence[int],
                     ties: str = "score", relevant_min: int = 1) -> dict:
    """All three checks as JSON-ready lists of rows.

    Returns
    -------
    dict
        ``{"depth": int, "judged": [...], "leave_one_arm_out": [...], "condensed": [...],
        "unique_pairs": {arm: n}}``; each list holds one dict per row of
        :func:`judged_at_k`, :func:`leave_one_arm_out` and :func:`condensed_scores`.
    """
    measures = [m for m in measures if not str(m).startswith("Judged")]
    unique = unique_contributions(provenance, depth=depth)
    arms = sorted(runs["arm"].astype(str).unique())
    counts = unique.groupby("arm").size()
    return {
        "depth": int(depth),
        "unique_pairs": {a: int(counts.get(a, 0)) for a in arms},
        "judged": judged_at_k(qrels=qrels, runs=runs, cutoffs=cutoffs, ties=ties)
        .to_dict("records"),
        "leave_one_arm_out": leave_one_arm_out(
            qrels=qrels, runs=runs, provenance=provenance, depth=depth, measures=measures,
            ties=ties, relevant_min=relevant_min).to_dict("records"),
        "condensed": condensed_scores(qrels=qrels, runs=runs, measures=measures, ties=ties,
                                      relevant_min=relevant_min).to_dict("records"),
    }


def unique_contributions_blocks(blocks, *, depth: int) -> pd.DataFrame:
    """:func:`unique_contributions` of a provenance table given as blocks of whole queries
    (every row of a query in one block, :func:`relgrade.io.batches.iter_query_blocks`):
    each pair's arms are its own query's rows, so the table is the same.

    Raises
    ------
    InputError
        As :func:`unique_contributions`.
    """
    parts = [unique_contributions(block, depth=depth) for block in blocks]
    if not parts:
        return unique_contributions(pd.DataFrame(
            {c: [] for c in ["query_id", "chunk_id", "arm", "rank", "source"]}), depth=depth)
    out = pd.concat(parts, ignore_index=True)
    return out.sort_values(["arm", "query_id", "chunk_id"]).reset_index(drop=True)


class _UniqueCursor:
    """The unique pairs of a provenance read a block of whole queries at a time, beside the
    key's blocks: each call gives the pairs of the key block's queries, and only the pairs
    of queries not yet reached are held (not every pair one arm alone brought in, with its
    ids as strings).

    ``parts`` gives :func:`unique_contributions` of each provenance block, in query order
    (text by code point, as the blocks are read); the key's blocks come in the same order.
    The first part is made at once, so the provenance's errors come before any scoring, as
    when the whole table was made first.
    """

    def __init__(self, parts):
        self.parts = iter(parts)
        self.held: list[pd.DataFrame] = []
        self.counts: dict = {}
        self.done = False
        self._pull()

    def _pull(self) -> str | None:
        """The next non-empty part's last query id, the part held and counted (None: no
        parts left)."""
        for part in self.parts:
            if not len(part):
                continue
            part = part.assign(query_id=part["query_id"].astype(str))
            for arm, n in part.groupby("arm").size().items():
                self.counts[arm] = self.counts.get(arm, 0) + int(n)
            self.held.append(part)
            return str(part["query_id"].max())
        self.done = True
        return None

    def of(self, ids: np.ndarray) -> pd.DataFrame:
        """The held pairs (``arm``, ``query_id``, ``chunk_id``) of ``ids`` (sorted query ids of
        one key block, after every earlier block's); pairs of queries up to the last of
        ``ids`` are then let go."""
        last = str(ids[-1])
        upto = max((str(p["query_id"].max()) for p in self.held), default=None)
        while not self.done and (upto is None or upto < last):  # a query is in one part
            upto = self._pull() or upto
        if not self.held:
            return pd.DataFrame({"arm": [], "query_id": [], "chunk_id": []}, dtype=object)
        here = pd.concat(self.held, ignore_index=True) if len(self.held) > 1 \
            else self.held[0]
        q = here["query_id"]
        later = here[q > last]
        self.held = [later] if len(later) else []
        return here[q.isin(ids)]

    def totals(self) -> dict:
        """Every part's pairs per arm (the provenance read to its end)."""
        while not self.done:
            self._pull()
        self.held = []
        return self.counts


class _Stacked:
    """Blocks' per-query tables stacked into the order one call over every query gives (by
    arm, then measure in the order asked, then query: each block's queries follow the
    previous block's), held compactly.

    The first block is kept as given (one block is used as one call gives it); from the
    second on, each block's values are kept as one float array per (arm, measure), in
    row order, beside the group's first row (its place in the stacked rows), and the
    query ids are dropped: the means read the values of each (arm, measure) in the
    stacked order and nothing else, so :meth:`frame` gives a table whose groups, their
    order and each group's values in order are those of the stacked table.
    """

    def __init__(self, measures: Sequence[str]):
        self.rank = {str(m): i for i, m in enumerate(measures)}
        self.first: pd.DataFrame | None = None
        self.values: dict = {}           # (arm, measure) -> [arrays]
        self.seen: dict = {}             # (arm, measure) -> first stacked row
        self.rows = 0
        self.blocks = 0

    def add(self, per_query: pd.DataFrame) -> None:
        self.blocks += 1
        if self.blocks == 1:
            self.first = per_query
            return
        if self.first is not None:
            first, self.first = self.first, None
            self._keep(first)
        self._keep(per_query)

    def _keep(self, per_query: pd.DataFrame) -> None:
        arm = per_query["arm"].to_numpy()
        measure = per_query["measure"].to_numpy()
        value = per_query["value"].to_numpy()
        codes, uniques = pd.factorize(pd.MultiIndex.from_arrays([arm, measure]), sort=False)
        order = np.argsort(codes, kind="stable")     # each group's rows, in row order
        cuts = np.searchsorted(codes[order], np.arange(len(uniques) + 1))
        for k, (a, m) in enumerate(uniques):
            at = order[cuts[k]:cuts[k + 1]]
            self.seen.setdefault((a, m), self.rows + int(at[0]))
            self.values.setdefault((a, m), []).append(value[at])
        self.rows += len(per_query)

    def frame(self, columns=("arm", "measure", "value")) -> pd.DataFrame:
        """The stacked table's ``arm``, ``measure`` and ``value`` (one block: the block)."""
        if self.blocks <= 1:
            return self.first
        keys = self._order()
        parts = [np.concatenate(self.values[g]) for g in keys]
        sizes = [len(v) for v in parts]
        return pd.DataFrame({
            "arm": np.repeat(np.array([g[0] for g in keys], dtype=object), sizes),
            "measure": np.repeat(np.array([g[1] for g in keys], dtype=object), sizes),
            "value": np.concatenate(parts) if parts else np.zeros(0)})[list(columns)]

    def _order(self) -> list:
        """The (arm, measure) groups in the stacked table's order."""
        return sorted(self.seen, key=lambda g: (str(g[0]), self.rank.get(str(g[1]),
                                                                         len(self.rank)),
                                                self.seen[g]))

    def means(self) -> pd.DataFrame:
        """``_means(self.frame())`` without laying the values out as one table.

        Returns
        -------
        pandas.DataFrame
            ``arm``, ``measure`` (object), ``mean`` (float64), ``queries`` (int64): one row
            per (arm, measure), in the stacked table's order (one block: the block's groups
            in order of first appearance).

        Notes
        -----
        pandas' group mean adds each group's values in row order, compensated, one running
        sum per group: a group's mean depends on its own values alone. Each group's values
        here are its rows of the stacked table in order, so taking its mean by the same
        group mean over that array alone gives the same bits.
        """
        if self.blocks <= 1:
            return _means(self.first)
        keys = self._order()
        mean = np.empty(len(keys), dtype=np.float64)
        size = np.empty(len(keys), dtype=np.int64)
        for i, g in enumerate(keys):
            values = np.concatenate(self.values[g])
            one = np.zeros(len(values), dtype=np.intp)   # one group: pandas' own group mean
            mean[i] = pd.Series(values).groupby(one).mean().iloc[0]
            size[i] = len(values)
        return pd.DataFrame({"arm": np.array([g[0] for g in keys], dtype=object),
                             "measure": np.array([g[1] for g in keys], dtype=object),
                             "mean": mean, "queries": size})


def _scored(qrels: pd.DataFrame, runs: pd.DataFrame, arms: Sequence[str],
            **options) -> pd.DataFrame:
    """:func:`relgrade.evaluation.metrics.per_query` of a block's stacked runs, with the rows
    of every arm of ``arms`` the block's runs lack (its queries all scored as unanswered),
    as the arm's rows in other blocks make a call over every query give them."""
    out = metrics.per_query(qrels=qrels, run=runs, **options)
    if not arms or "arm" not in runs.columns:
        return out
    present = set(runs["arm"].astype(str).unique())
    missing = [a for a in arms if a not in present]
    if not missing:
        return out
    empty = runs.iloc[:0].drop(columns="arm")
    extra = [metrics.per_query(qrels=qrels, run=empty, **options).assign(arm=a)
             for a in missing]
    return pd.concat([out, *extra], ignore_index=True)[["arm", "query_id", "measure", "value"]]


def pool_bias_blocks(blocks, *, unique, arms: Sequence[str], depth: int,
                     measures: Sequence[str], cutoffs: Sequence[int], ties: str = "score",
                     relevant_min: int = 1) -> dict:
    """:func:`pool_bias_report` computed a block of whole queries at a time.

    Every per-query value of the three checks depends on its query's key pairs and run rows
    alone, so each block is scored on its own and only the per-query values are kept (a few
    rows per query, arm and measure); the means are taken at the end over the stacked values
    in the order a single call gives them, so every number is the same.

    Parameters
    ----------
    blocks : iterable of (pandas.DataFrame, pandas.DataFrame)
        ``(qrels, runs)`` per block, in query order: the key's rows of some queries (every
        row of each) and the stacked runs' rows of the same queries (``arm``, ``query_id``,
        ``chunk_id``, ``rank``, ``score``). A query's rows are in one block only.
    unique : pandas.DataFrame or iterable of pandas.DataFrame
        :func:`unique_contributions` of the whole provenance (or
        :func:`unique_contributions_blocks`), or of each of the provenance's blocks of whole
        queries in query order (``unique_contributions(b, depth=depth) for b in blocks``),
        read beside the key's blocks so that only the pairs of queries not yet reached are
        held; the first is made before any block is scored.
    arms : sequence of str
        The arms of the whole runs table (sorted), as :func:`pool_bias_report` finds them.
    depth, measures, cutoffs, ties, relevant_min
        As :func:`pool_bias_report`.

    Returns
    -------
    dict
        As :func:`pool_bias_report`.

    Raises
    ------
    InputError
        As :func:`pool_bias_report`, for the first block that breaks a rule.
    """
    measures = [m for m in measures if not str(m).startswith("Judged")]
    if isinstance(depth, bool) or not isinstance(depth, (int, np.integer)) or depth < 1:
        raise InputError("pool.depth must be a positive integer", found=repr(depth))
    arms = [str(a) for a in arms]
    judged_names = [f"Judged@{int(k)}" for k in cutoffs]
    # the unique pairs a key block's queries at a time, not every pair with string ids
    pairs = _UniqueCursor([unique] if isinstance(unique, pd.DataFrame) else unique)
    # per-query values kept as arrays per (arm, measure), not frames of every query id
    judged, full = _Stacked(judged_names), _Stacked(measures)
    condensed = _Stacked(measures)
    reduced = {a: _Stacked(measures) for a in arms}
    removed = {a: [0, 0] for a in arms}
    blocks = iter(blocks)
    first = next(blocks, None)
    if first is None:
        return pool_bias_report(qrels=pd.DataFrame({"query_id": [], "chunk_id": [],
                                                    "grade": []}),
                                runs=pd.DataFrame({c: [] for c in ["arm", "query_id",
                                                                   "chunk_id", "rank",
                                                                   "score"]}),
                                provenance=pd.DataFrame({c: [] for c in [
                                    "query_id", "chunk_id", "arm", "rank", "source"]}),
                                depth=depth, measures=measures, cutoffs=cutoffs, ties=ties,
                                relevant_min=relevant_min)
    second = next(blocks, None)
    # one block is scored as one call scores it; with more, an arm a block's runs lack
    # gets its unanswered rows there, as a call over every query gives them
    within = [] if second is None else arms

    def chain():
        yield first
        if second is not None:
            yield second
            yield from blocks

    for qrels, runs in chain():
        judged.add(_scored(qrels, runs, within, measures=judged_names, ties=ties))
        _need(runs, ["arm", "query_id", "chunk_id", "rank", "score"], "runs")
        _need(qrels, ["query_id", "chunk_id", "grade"], "key")
        full.add(_scored(qrels, runs, within, measures=measures, ties=ties,
                         relevant_min=relevant_min))
        key = qrels.assign(query_id=qrels["query_id"].astype(str),
                           chunk_id=qrels["chunk_id"].astype(str))
        ids = np.sort(key["query_id"].unique().astype(object)) if len(key) else np.array([])
        here = pairs.of(ids) if len(ids) else \
            pd.DataFrame({"arm": [], "query_id": [], "chunk_id": []}, dtype=object)
        pair_index = pd.MultiIndex.from_frame(key[["query_id", "chunk_id"]])
        for arm in arms:
            mine = here[here["arm"] == arm]
            drop = pair_index.isin(pd.MultiIndex.from_frame(mine[["query_id", "chunk_id"]])) \
                if len(mine) else np.zeros(len(key), dtype=bool)
            removed[arm][0] += int(drop.sum())
            removed[arm][1] += int((key.loc[drop, "grade"].astype(int) >= relevant_min).sum())
            run = runs[runs["arm"].astype(str) == arm].drop(columns="arm")
            reduced[arm].add(metrics.per_query(
                qrels=key[~drop], run=run, measures=measures, ties=ties,
                relevant_min=relevant_min).assign(arm=arm))
        condensed.add(_scored(qrels, condensed_runs(runs, qrels), within,
                              measures=measures, ties=ties, relevant_min=relevant_min))

    counts = pairs.totals()
    # each group's mean from its own values: the stacked table is never laid out
    judged_means = judged.means()
    judged_means["k"] = judged_means["measure"].str.split("@").str[1].astype(int)
    judged_out = judged_means.rename(columns={"mean": "judged"})[["arm", "k", "judged"]]
    judged_out["unjudged_share"] = 1.0 - judged_out["judged"]
    judged_out = judged_out.sort_values(["arm", "k"]).reset_index(drop=True)

    full_means = full.means()
    indexed = full_means.set_index(["arm", "measure"])
    rows = []
    for arm in arms:
        red = _reduced_means(pd.DataFrame({"measure": [], "value": []})) \
            if not reduced[arm].blocks else reduced[arm].means().set_index("measure")[
                ["mean", "queries"]].rename(columns={"queries": "size"})
        rows += _loo_rows(arm, arms, indexed, red, removed=removed[arm])
    loo = pd.DataFrame(rows, columns=LOO_COLUMNS)

    con = condensed.means()
    out = full_means.merge(con, on=["arm", "measure"], how="left", suffixes=("_std", "_con"))
    out = pd.DataFrame({"arm": out["arm"], "measure": out["measure"],
                        "standard": out["mean_std"], "condensed": out["mean_con"].fillna(0.0)})
    out["difference"] = out["condensed"] - out["standard"]
    out = out.sort_values(["arm", "measure"], kind="stable").reset_index(drop=True)
    return {
        "depth": int(depth),
        "unique_pairs": {a: int(counts.get(a, 0)) for a in arms},
        "judged": judged_out.to_dict("records"),
        "leave_one_arm_out": loo.to_dict("records"),
        "condensed": out.to_dict("records"),
    }
