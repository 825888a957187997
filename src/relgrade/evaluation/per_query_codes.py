"""Every arm's per-query values held as codes and one float array, checked as the table was.

The comparison reads the metrics stage's per-query files of every arm: at 100,000 queries a
few million rows. Held as a pandas frame of string columns (and copied to check it) they
cost about 32 bytes a row twice over; :class:`PerQueryCodes` holds each row as three int32
codes (arm, query, measure; a group code when the table has groups) and its float64 value,
20 bytes, with each distinct id once. It is built a table at a time (one arm's file, then
the next), so the stacked string frame is never made.

Codes are positions: arms in sorted order, query ids in code point order (the order the
comparison's per-measure matrices use), measures and groups in order of first appearance.
Ids are compared as the text ``astype(str)`` gives, as the frame path did.

Nothing is checked while coding: :meth:`PerQueryCodes.check` raises, in the same order and
words as the frame path did, when a column is missing, a value is not finite or a row
repeats (arm, query, measure), naming the first such row of the tables stacked in order.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Iterable

import numpy as np
import pandas as pd

from relgrade.errors import InputError

#: The columns every per-query table needs (``group`` is optional).
COLUMNS = ("arm", "query_id", "measure", "value")


def _as_text(col: pd.Series) -> pd.Series:
    """``col.astype(str)``, without the copy when every value is already a str."""
    if col.dtype == object and pd.api.types.infer_dtype(col, skipna=False) == "string":
        return col
    return col.astype(str)


def _factorized(col: pd.Series) -> tuple[np.ndarray, list]:
    """The text of ``col`` as (int64 codes in row order, the distinct texts by code)."""
    codes, uniques = pd.factorize(_as_text(col), sort=False)
    return codes, [str(u) for u in uniques]


@dataclass
class PerQueryCodes:
    """The stacked per-query tables of every arm, coded.

    Attributes
    ----------
    arms : list of str
        Arm labels, sorted; arm code ``i`` is ``arms[i]``.
    query_ids : numpy.ndarray of object (str), shape (n_queries,)
        Query ids in code point order; query code ``j`` is ``query_ids[j]``.
    measures : list of str
        Measure names in order of first appearance.
    groups : list of str
        Group labels by code (``["all"]`` when the tables have no ``group`` column).
    arm, query, measure, group : numpy.ndarray of int32, shape (n_rows,)
        Each row's codes, rows in the tables' order.
    value : numpy.ndarray of float64, shape (n_rows,)
        Each row's value (``pandas.to_numeric(..., errors="coerce")``: NaN where a value
        is not a number).
    """

    arms: list
    query_ids: np.ndarray
    measures: list
    groups: list
    arm: np.ndarray
    query: np.ndarray
    measure: np.ndarray
    group: np.ndarray
    value: np.ndarray
    _missing: tuple = ()
    _bad: tuple | None = None
    _checked: bool = False

    @classmethod
    def from_frame(cls, per_query: pd.DataFrame) -> "PerQueryCodes":
        """Code one stacked table (``arm``, ``query_id``, ``measure``, ``value``, optional
        ``group``). Not modified; nothing checked (see :meth:`check`)."""
        missing = tuple(c for c in COLUMNS if c not in per_query.columns)
        if missing:
            return cls._lacking(missing, list(per_query.columns))
        return cls._stacked([(None, per_query)])

    @classmethod
    def from_tables(cls, tables: Iterable[tuple[str, pd.DataFrame]]) -> "PerQueryCodes":
        """Code one table per arm as if stacked in the order given, each with ``arm`` set
        to its label (``pandas.concat([t.assign(arm=a) ...], ignore_index=True)``, never
        made).

        Parameters
        ----------
        tables : iterable of (str, pandas.DataFrame)
            Arm label and its table (``query_id``, ``measure``, ``value``, optional
            ``group``); read lazily, one at a time, each coded before the next is taken.
        """
        return cls._stacked(tables)

    @classmethod
    def _lacking(cls, missing, found) -> "PerQueryCodes":
        empty = np.zeros(0, dtype=np.int32)
        return cls([], np.array([], dtype=object), [], ["all"], empty, empty, empty, empty,
                   np.zeros(0), _missing=(tuple(missing), tuple(map(str, found))))

    @classmethod
    def _stacked(cls, tables) -> "PerQueryCodes":
        parts = {k: [] for k in ("arm", "query", "measure", "group", "value")}
        texts = {"arm": {}, "query": {}, "measure": {}, "group": {}}
        offset, bad, columns = 0, None, []

        def coded(kind, codes, uniques):
            seen = texts[kind]
            for u in uniques:
                seen.setdefault(u, len(seen))
            remap = np.array([seen[u] for u in uniques], dtype=np.int32)
            return remap[codes] if len(codes) else np.zeros(0, dtype=np.int32)

        for label, t in tables:
            if label is not None:
                cols = [c for c in t.columns if c != "arm"] + ["arm"]
                columns += [c for c in cols if c not in columns]
                lacking = [c for c in COLUMNS if c != "arm" and c not in t.columns]
                if lacking:  # stacked, the column would be NaN here: the frame path's error
                    return cls._lacking(lacking, columns)
            n = len(t)
            if label is None:
                parts["arm"].append(coded("arm", *_factorized(t["arm"])))
            else:
                parts["arm"].append(coded("arm", np.zeros(n, dtype=np.int64), [str(label)]))
            parts["query"].append(coded("query", *_factorized(t["query_id"])))
            parts["measure"].append(coded("measure", *_factorized(t["measure"])))
            # stacked, a table without groups would have NaN there: the text "nan"
            parts["group"].append(coded("group", *_factorized(t["group"])) if "group" in t
                                  else n)
            v = pd.to_numeric(t["value"], errors="coerce").astype(np.float64).to_numpy()
            finite = np.isfinite(v)
            if bad is None and not finite.all():
                at = int(np.argmax(~finite))
                raw = t.loc[t.index[at], "value"] if label is None else t["value"].iloc[at]
                bad = (offset + at, repr(raw))
            parts["value"].append(np.asarray(v, dtype=np.float64))
            offset += n
        lacking = [isinstance(g, int) for g in parts["group"]]
        if all(lacking):  # no table has groups: one group
            texts["group"], fill = {"all": 0}, 0
        elif any(lacking):
            fill = texts["group"].setdefault("nan", len(texts["group"]))
        parts["group"] = [np.full(g, fill, dtype=np.int32) if isinstance(g, int) else g
                          for g in parts["group"]]

        def joined(kind):
            got = parts[kind]
            return np.concatenate(got) if got else np.zeros(0, dtype=np.int32)

        # arms sorted and query ids in code point order: codes renumbered by rank
        arm, query = joined("arm"), joined("query")
        arm_names = list(texts["arm"])
        arm_rank = np.empty(len(arm_names), dtype=np.int32)
        arm_rank[np.argsort(np.array(arm_names, dtype=object), kind="stable")] = \
            np.arange(len(arm_names), dtype=np.int32)
        qids = np.array(list(texts["query"]), dtype=object)
        order = np.argsort(qids, kind="stable")
        q_rank = np.empty(len(qids), dtype=np.int32)
        q_rank[order] = np.arange(len(qids), dtype=np.int32)
        group = joined("group")
        return cls(sorted(arm_names), qids[order], list(texts["measure"]),
                   list(texts["group"]), arm_rank[arm] if len(arm) else arm,
                   q_rank[query] if len(query) else query, joined("measure"), group,
                   np.concatenate(parts["value"]) if parts["value"] else np.zeros(0),
                   _bad=bad)

    def _row(self, i: int) -> str:
        return (f"arm {self.arms[self.arm[i]]}, query {self.query_ids[self.query[i]]}, "
                f"measure {self.measures[self.measure[i]]}")

    def check(self) -> None:
        """Raise as the stacked frame's check did.

        Raises
        ------
        InputError
            A column is missing (``found``: the columns); else the first row whose value
            is not a finite number (``found``: the value as given); else the first row
            repeating an earlier row's (arm, query, measure).
        """
        if self._checked:
            return
        if self._missing:
            missing, found = self._missing
            raise InputError(f"per-query table lacks column(s) {', '.join(missing)}",
                             found="columns " + ", ".join(found))
        if self._bad is not None:
            at, found = self._bad
            raise InputError("per-query value must be a finite number", item=self._row(at),
                             found=found)
        n_q, n_m = max(1, len(self.query_ids)), max(1, len(self.measures))
        key = (self.arm.astype(np.int64) * n_q + self.query) * n_m + self.measure
        order = np.argsort(key, kind="stable")
        # in a stable sort a repeated key's later rows follow its first: the first repeat
        # in row order is the smallest position among them
        later = order[1:][key[order[1:]] == key[order[:-1]]]
        if len(later):
            raise InputError("a query has two values for one arm and measure",
                             item=self._row(int(later.min())))
        self._checked = True

    def matrix(self, measure: str, arms: list):
        """One measure's queries, their groups and values, as the frame path's pivot.

        Parameters
        ----------
        measure : str
            One of :attr:`measures`.
        arms : list of str
            The matrix's rows, in order (every arm of the table).

        Returns
        -------
        qids : list of str
            The measure's queries, code point order.
        groups : list of str
            Each query's group.
        values : numpy.ndarray of shape (len(arms), len(qids)), float64

        Raises
        ------
        InputError
            An arm lacks a value of a query another arm has (the first query, then arm, in
            order), or a query has two groups (the first row giving a query its second).
        """
        rows = np.flatnonzero(self.measure == self.measures.index(measure))
        qc = self.query[rows]
        present = np.unique(qc)
        where = {a: i for i, a in enumerate(arms)}
        to_row = np.array([where.get(a, -1) for a in self.arms], dtype=np.int64)
        mat = np.full((len(arms), len(present)), np.nan)
        pos = np.searchsorted(present, qc)
        mat[to_row[self.arm[rows]], pos] = self.value[rows]
        hole = np.isnan(mat.T)
        if hole.any():
            q, a = divmod(int(np.argmax(hole.ravel())), len(arms))
            raise InputError("per-query values missing",
                             item=f"arm {arms[a]}, query {self.query_ids[present[q]]}, "
                                  f"measure {measure}",
                             fix="every arm needs a value for every query of a measure; the "
                                 "metrics stage scores a query missing from a run as 0")
        gc = self.group[rows]
        pair = qc.astype(np.int64) * len(self.groups) + gc
        _, first = np.unique(pair, return_index=True)
        first.sort()                       # each (query, group) once, in row order
        qf = qc[first]
        order = np.argsort(qf, kind="stable")
        again = order[1:][qf[order[1:]] == qf[order[:-1]]]
        if len(again):
            raise InputError("a query belongs to two groups",
                             item=f"query {self.query_ids[qf[again.min()]]}")
        group_of = np.empty(len(present), dtype=np.int32)
        group_of[np.searchsorted(present, qf)] = gc[first]
        names = np.array(self.groups, dtype=object)
        return (self.query_ids[present].tolist(), names[group_of].tolist(), mat)

    def frame(self, measures) -> pd.DataFrame:
        """The rows of ``measures`` as a frame (``arm``, ``query_id``, ``measure`` str;
        ``value`` float64), in row order."""
        keep = np.isin(self.measure, [self.measures.index(m) for m in measures])
        rows = np.flatnonzero(keep)
        return pd.DataFrame({
            "arm": np.array(self.arms, dtype=object)[self.arm[rows]],
            "query_id": self.query_ids[self.query[rows]],
            "measure": np.array(self.measures, dtype=object)[self.measure[rows]],
            "value": self.value[rows]})
