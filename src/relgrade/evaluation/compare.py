"""Comparing arms: intervals, paired tests with Holm, power and segments, in one result object.

:func:`compare_arms` takes the per-query table of every arm (columns ``arm``, ``query_id``,
``group``, ``measure``, ``value``) and returns a :class:`Comparison`: a bootstrap interval
and a power estimate per arm and measure, and per comparison (each arm against the
baseline, or every pair) the mean difference with its paired bootstrap interval, a paired
sign-flip randomization test, a paired t test, Cohen's d_z, the Holm-adjusted p-value over
every comparison made, the query count needed to detect a relative change, and the
difference per query group with a flag for segment cancellation. :func:`full_report` adds
the pool-bias checks (:mod:`relgrade.evaluation.poolbias`) and the label-noise band
(:mod:`relgrade.evaluation.noise`).

One result, several renderers: :meth:`Comparison.to_dict` / :meth:`~Comparison.to_json`
(``metrics/comparisons.json``), :meth:`~Comparison.to_markdown`,
:meth:`~Comparison.rich_tables` (the CLI), :meth:`~Comparison.verdicts` (plain sentences),
and the two plot tables :meth:`~Comparison.arms_plot` and :meth:`~Comparison.deltas_plot`.

The JSON report (``metrics/comparisons.json``) holds, in this order: ``key_sha256``,
``pool_version``, ``post_hoc`` (from the key's record); ``settings``; ``measures``;
``arms`` (``{arm: {measure: {estimate, low, high, se, level, method, n, n_resamples,
notes, power}}}``); ``comparisons`` (one object per comparison: ``arm_a``, ``arm_b``,
``measure``, ``n``, ``mean_a``, ``mean_b``, ``delta``, ``low``, ``high``, ``se``,
``interval``, ``relative``, ``p_randomization``, ``p_holm``, ``significant``,
``p_bootstrap``, ``randomization``, ``t_test``, ``d_z``, ``power``, ``segments``,
``segment_cancellation``, ``holm_family``, ``label_noise``, ``notes``, ``verdict``);
``pool_bias`` (``depth``, ``unique_pairs``, ``judged``, ``leave_one_arm_out``,
``condensed``); ``label_noise`` (``auditor``, ``round``, ``queries``, ``pairs``,
``replaced``, ``kept``, ``changed``, ``orderings``); ``verdicts``. A value that does not
exist (an infinite t, an undefined power) is ``null`` with a note saying why; the file
never holds NaN.

Reproducibility: each comparison draws from its own generator, derived from (params
``seed``, arm A, arm B, measure) by :func:`relgrade.evaluation.stats.comparison_rng` (its bootstrap
resamples first, then its sign-flip patterns); per-arm intervals from (seed, measure), with
every arm resampled on the same query indices; segments from (seed, arm A, arm B, measure,
group). So no number depends on which other comparisons are made or in what order, and
work spread over threads gives bit-identical results for any worker count.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field, replace
from typing import Iterable, Sequence

import numpy as np
import pandas as pd

from relgrade.errors import InputError
from relgrade.evaluation import stats
from relgrade.evaluation.noise import LabelNoise
from relgrade.evaluation.settings import Settings, design_pairs

#: Measures that describe the pool rather than the ranking; reported, never compared.
NOT_COMPARED = ("Judged",)

#: Below this many (query x resample) draws in total the work stays in one thread.
PARALLEL_MIN_WORK = 10_000_000

PER_QUERY_COLUMNS = ["arm", "query_id", "group", "measure", "value"]


# --- results -------------------------------------------------------------------------

@dataclass(frozen=True)
class Segment:
    """The paired difference on one query group."""

    group: str
    delta: stats.Interval

    @property
    def significant(self) -> bool:
        return self.delta.excludes_zero()

    def to_dict(self) -> dict:
        d = self.delta
        return {"group": self.group, "n": d.n, "delta": d.estimate, "low": d.low,
                "high": d.high, "se": d.se, "significant": self.significant,
                "notes": list(d.notes)}


@dataclass(frozen=True)
class PairResult:
    """One paired comparison of arm A against arm B on one measure.

    ``delta`` is the interval of mean(A - B); ``p_holm`` and ``significant`` are set once
    the whole family of comparisons is known (None before).
    """

    arm_a: str
    arm_b: str
    measure: str
    mean_a: float
    mean_b: float
    delta: stats.Interval
    p_bootstrap: float
    randomization: stats.SignFlip
    ttest: stats.TTest
    d_z: float | None
    power: stats.Power
    segments: tuple = ()
    cancellation: bool = False
    p_holm: float | None = None
    significant: bool | None = None
    alpha: float = 0.05
    family: int = 1
    noise: LabelNoise | None = None
    notes: tuple = ()

    @property
    def key(self) -> tuple[str, str, str]:
        return (self.arm_a, self.arm_b, self.measure)

    @property
    def relative(self) -> float | None:
        """Difference as a share of arm B's mean; None when that mean is 0."""
        return None if self.mean_b == 0 else self.delta.estimate / self.mean_b

    def mirrored(self) -> "PairResult":
        """The same comparison read as B against A (signs flipped, same p-values)."""
        d = self.delta
        flipped = replace(d, estimate=-d.estimate, low=-d.high, high=-d.low)
        t = self.ttest
        tt = replace(t, t=None if t.t is None else -t.t)
        segs = tuple(replace(s, delta=replace(s.delta, estimate=-s.delta.estimate,
                                               low=-s.delta.high, high=-s.delta.low))
                     for s in self.segments)
        noise = None
        if self.noise is not None:
            n = self.noise
            noise = replace(n, delta_grader=-n.delta_grader, delta_auditor=-n.delta_auditor,
                            delta_swapped=-n.delta_swapped)
        power = replace(self.power, reference=self.mean_a,
                        target=self.power.relative_change * abs(self.mean_a))
        return replace(self, arm_a=self.arm_b, arm_b=self.arm_a, mean_a=self.mean_b,
                       mean_b=self.mean_a, delta=flipped, ttest=tt,
                       d_z=None if self.d_z is None else -self.d_z, segments=segs,
                       noise=noise, power=power,
                       notes=self.notes + ("read in reverse: computed as "
                                           f"{self.arm_a} against {self.arm_b}",))

    def verdict(self) -> str:
        """One plain sentence: who is better on what, by how much, and how sure."""
        d = self.delta
        p = "n/a" if self.p_holm is None else _fmt_p(self.p_holm)
        if self.significant:
            if d.estimate > 0:
                win, lose, est, lo, hi = self.arm_a, self.arm_b, d.estimate, d.low, d.high
            else:
                win, lose, est, lo, hi = self.arm_b, self.arm_a, -d.estimate, -d.high, -d.low
            text = (f"{win} better than {lose} on {self.measure} by {_f(est, '', 3)} "
                    f"[{_f(lo, '', 3)}, {_f(hi, '', 3)}], p={p} after Holm")
            if self.noise is not None and self.noise.within:
                text += (f"; but relabelling the audit queries moves the difference by "
                         f"{self.noise.band:.3f}, at least as much as the difference itself: "
                         "not measured an improvement")
        else:
            text = (f"no detectable difference on {self.measure} between {self.arm_a} and "
                    f"{self.arm_b}: {_f(d.estimate, '+', 3)} [{_f(d.low, '+', 3)}, "
                    f"{_f(d.high, '+', 3)}], "
                    f"p={p} after Holm")
            if d.method == "degenerate" and d.estimate == 0:
                text += "; the two arms score the same on every query"
            if d.excludes_zero() and self.family > 1:
                text += (f"; the interval excludes 0 only before correcting for the "
                         f"{self.family} comparisons made")
            pw = self.power
            if pw.n_needed is not None and pw.n_needed > pw.n:
                text += (f"; about {pw.n_needed} queries would detect a "
                         f"{pw.relative_change:.0%} change with power {pw.power:.0%} "
                         f"(this set has {pw.n})")
            elif pw.n_needed is not None:
                text += (f"; {pw.n} queries detect a {pw.relative_change:.0%} change with "
                         f"power {pw.power:.0%} or more, so a real difference is likely smaller")
        if self.cancellation:
            parts = ", ".join(f"{s.group} {_f(s.delta.estimate, '+', 3)}" for s in self.segments
                              if s.significant)
            text += f"; segment cancellation: groups disagree in sign ({parts})"
        return text

    def to_dict(self) -> dict:
        d = self.delta
        return {
            "arm_a": self.arm_a, "arm_b": self.arm_b, "measure": self.measure,
            "n": d.n, "mean_a": self.mean_a, "mean_b": self.mean_b,
            "delta": d.estimate, "low": d.low, "high": d.high, "se": d.se,
            "interval": d.method, "relative": self.relative,
            "p_randomization": self.randomization.p, "p_holm": self.p_holm,
            "significant": self.significant, "p_bootstrap": self.p_bootstrap,
            "randomization": self.randomization.to_dict(), "t_test": self.ttest.to_dict(),
            "d_z": self.d_z, "power": self.power.to_dict(),
            "segments": [s.to_dict() for s in self.segments],
            "segment_cancellation": self.cancellation, "holm_family": self.family,
            "label_noise": None if self.noise is None else self.noise.to_dict(),
            "notes": list(d.notes) + list(self.notes),
            "verdict": self.verdict(),
        }


def _fmt_p(p: float) -> str:
    return f"{p:.2g}"


def _f(x: float, sign: str = "", digits: int = 4) -> str:
    """A number to ``digits`` decimals, never printed as -0.0000."""
    return f"{round(float(x), digits) + 0.0:{sign}.{digits}f}"


@dataclass
class Comparison:
    """Everything relgrade says about the arms: build with :func:`compare_arms`.

    Attributes
    ----------
    settings : Settings
    arms : list of str
        Sorted.
    measures : list of str
        Measures compared, in the order of the per-query table.
    intervals : dict
        ``(arm, measure) -> stats.Interval`` of the arm's mean.
    arm_power : dict
        ``(arm, measure) -> stats.Power`` from the arm's own standard error.
    pairs : list of PairResult
        In the order they were asked for (by measure, then pair).
    pool_bias : dict or None
        Tables from :mod:`relgrade.evaluation.poolbias` (see :func:`full_report`).
    noise : dict or None
        Summary from :mod:`relgrade.evaluation.noise` (rank correlations per measure).
    record : dict or None
        What the numbers rest on: ``key_sha256``, ``pool_version``, ``post_hoc`` from the
        key's record, written at the top of every rendering.
    values : dict
        ``measure -> (query_ids, groups, matrix of shape (n_arms, n_queries))``; not rendered.
    """

    settings: Settings
    arms: list
    measures: list
    intervals: dict
    arm_power: dict
    pairs: list
    pool_bias: dict | None = None
    noise: dict | None = None
    record: dict | None = None
    values: dict = field(default_factory=dict, repr=False)

    def pair(self, arm_a: str, arm_b: str, measure: str) -> PairResult:
        """The comparison of ``arm_a`` against ``arm_b`` on ``measure`` (mirrored if needed).

        Raises
        ------
        InputError
            That comparison was not made.
        """
        for p in self.pairs:
            if p.key == (arm_a, arm_b, measure):
                return p
            if p.key == (arm_b, arm_a, measure):
                return p.mirrored()
        raise InputError("comparison not made", item=f"{arm_a} vs {arm_b} on {measure}",
                         fix="compare arms that have per-query values for that measure")

    def verdicts(self) -> list[str]:
        """One sentence per comparison."""
        return [p.verdict() for p in self.pairs]

    # -- renderers --------------------------------------------------------------------

    def to_dict(self) -> dict:
        """JSON-ready dict: settings, arms, comparisons, pool bias, label noise, verdicts."""
        arms = {}
        for arm in self.arms:
            arms[arm] = {}
            for m in self.measures:
                if (arm, m) in self.intervals:
                    entry = self.intervals[(arm, m)].to_dict()
                    entry["power"] = self.arm_power[(arm, m)].to_dict()
                    arms[arm][m] = entry
        return {**(self.record or {}), "settings": self.settings.to_dict(),
                "measures": list(self.measures),
                "arms": arms, "comparisons": [p.to_dict() for p in self.pairs],
                "pool_bias": self.pool_bias, "label_noise": self.noise,
                "verdicts": self.verdicts()}

    def to_json(self) -> str:
        """:meth:`to_dict` as indented JSON; refuses NaN and infinity (never written)."""
        return json.dumps(_plain(self.to_dict()), indent=2, ensure_ascii=False,
                          allow_nan=False) + "\n"

    def to_markdown(self) -> str:
        """A Markdown report: arms, comparisons, segments, pool bias, label noise, verdicts."""
        lv = f"{self.settings.level:.0%}"
        family = max([p.family for p in self.pairs] or [0])
        rec = self.record or {}
        head = [f"{k} `{v}`" for k, v in rec.items() if v not in (None, False)]
        if rec.get("post_hoc"):
            head.append("**post-hoc**: the key changed after metrics were seen")
        out = ["# relgrade comparison", ""] + (["; ".join(head), ""] if head else []) + [
               f"Seed {self.settings.seed}; {self.settings.n_resamples} bootstrap resamples "
               f"({self.settings.method}), {self.settings.n_permutations} sign-flip "
               f"permutations; Holm over {family} comparisons at alpha "
               f"{self.settings.alpha:g}.", "", "## Arms", "",
               f"| arm | measure | mean | {lv} CI | SE | queries for a "
               f"{self.settings.min_relative_change:.0%} change |", "|---|---|---|---|---|---|"]
        for (arm, m), ci in self.intervals.items():
            n_needed = self.arm_power[(arm, m)].n_needed
            out.append(f"| {arm} | {m} | {_f(ci.estimate)} | [{_f(ci.low)}, {_f(ci.high)}] | "
                       f"{_f(ci.se)} | {'—' if n_needed is None else n_needed} |")
        out += ["", "## Comparisons", "",
                "| A | B | measure | Δ (A−B) | CI | p (randomization) | p (Holm) | t | d_z | "
                "queries needed |", "|---|---|---|---|---|---|---|---|---|---|"]
        for p in self.pairs:
            d = p.delta
            t = "∞" if p.ttest.infinite else ("—" if p.ttest.t is None else f"{p.ttest.t:.3f}")
            out.append(
                f"| {p.arm_a} | {p.arm_b} | {p.measure} | {_f(d.estimate, '+')} | "
                f"[{_f(d.low, '+')}, {_f(d.high, '+')}] | {_fmt_p(p.randomization.p)} | "
                f"{'—' if p.p_holm is None else _fmt_p(p.p_holm)} | {t} | "
                f"{'—' if p.d_z is None else f'{p.d_z:.3f}'} | "
                f"{'—' if p.power.n_needed is None else p.power.n_needed} |")
        seg_rows = [(p, s) for p in self.pairs for s in p.segments] if any(
            len(p.segments) > 1 for p in self.pairs) else []
        if seg_rows:
            out += ["", "## Segments", "", "| A | B | measure | group | n | Δ | CI | flag |",
                    "|---|---|---|---|---|---|---|---|"]
            for p, s in seg_rows:
                flag = "cancellation" if p.cancellation and s.significant else ""
                out.append(f"| {p.arm_a} | {p.arm_b} | {p.measure} | {s.group} | {s.delta.n} | "
                           f"{_f(s.delta.estimate, '+')} | "
                           f"[{_f(s.delta.low, '+')}, {_f(s.delta.high, '+')}]"
                           f" | {flag} |")
        if self.pool_bias:
            out += ["", "## Pool bias", ""] + _markdown_tables(self.pool_bias)
        if self.noise:
            out += ["", "## Label noise", ""] + _markdown_tables(
                {k: v for k, v in self.noise.items() if isinstance(v, list)})
            for p in self.pairs:
                if p.noise is not None:
                    n = p.noise
                    out.append(f"- {p.arm_a} vs {p.arm_b} on {p.measure}: band {n.band:.4f} "
                               f"over {n.queries} audit queries"
                               + (" — within the band" if n.within else ""))
        out += ["", "## Verdicts", ""] + [f"- {v}" for v in self.verdicts()]
        return "\n".join(out) + "\n"

    def rich_tables(self, *, measure: str | None = None, pair: tuple | None = None) -> list:
        """rich Tables for a terminal: arms, paired comparisons and, with groups, segments.

        Parameters
        ----------
        measure : str, optional
            Only this measure.
        pair : (str, str), optional
            Only these two arms, read as A against B.
        """
        from rich.table import Table

        measures = [measure] if measure else list(self.measures)
        arms = list(pair) if pair else list(self.arms)
        lv = f"{self.settings.level:.0%}"
        t1 = Table(title="Arms")
        for col in ("arm", "measure", "mean", f"{lv} CI", "SE",
                    f"queries for {self.settings.min_relative_change:.0%}"):
            t1.add_column(col, justify="left" if col in ("arm", "measure") else "right",
                          no_wrap=True)
        for arm in arms:
            for m in measures:
                ci = self.intervals.get((arm, m))
                if ci is None:
                    continue
                nn = self.arm_power[(arm, m)].n_needed
                t1.add_row(arm, m, _f(ci.estimate), f"[{_f(ci.low)}, {_f(ci.high)}]",
                           _f(ci.se), "—" if nn is None else str(nn))
        chosen = self.selected(measure=measure, pair=pair)
        title = "Paired comparisons" + (f": {pair[0]} − {pair[1]}" if pair else "")
        t2 = Table(title=title)
        cols = ([] if pair else ["A − B"]) + ["measure", "Δ", f"{lv} CI", "p rand.", "p Holm",
                                              "t", "d_z", "queries needed"]
        for col in cols:
            t2.add_column(col, justify="left" if col in ("A − B", "measure") else "right",
                          no_wrap=True)
        for p in chosen:
            d = p.delta
            t = "∞" if p.ttest.infinite else ("—" if p.ttest.t is None else f"{p.ttest.t:.3f}")
            row = ([] if pair else [f"{p.arm_a} − {p.arm_b}"]) + [
                p.measure, _f(d.estimate, "+"), f"[{_f(d.low, '+')}, {_f(d.high, '+')}]",
                _fmt_p(p.randomization.p), "—" if p.p_holm is None else _fmt_p(p.p_holm), t,
                "—" if p.d_z is None else f"{p.d_z:.3f}",
                "—" if p.power.n_needed is None else str(p.power.n_needed)]
            t2.add_row(*row)
        tables = [t1, t2]
        if any(len(p.segments) > 1 for p in chosen):
            t3 = Table(title="Per query group")
            for col in ([] if pair else ["A − B"]) + ["measure", "group", "n", "Δ",
                                                       f"{lv} CI", "flag"]:
                t3.add_column(col, justify="right" if col in ("n", "Δ", f"{lv} CI") else "left",
                              no_wrap=True)
            for p in chosen:
                for sg in p.segments:
                    flag = "segment cancellation" if p.cancellation and sg.significant else ""
                    t3.add_row(*([] if pair else [f"{p.arm_a} − {p.arm_b}"]), p.measure,
                               sg.group, str(sg.delta.n), _f(sg.delta.estimate, "+"),
                               f"[{_f(sg.delta.low, '+')}, {_f(sg.delta.high, '+')}]", flag)
            tables.append(t3)
        return tables

    def subset(self, *, pair: tuple[str, str], measure: str | None = None) -> "Comparison":
        """The comparisons between the two arms of ``pair``, read as pair[0] against pair[1].

        Holm-adjusted p-values stay those of the whole family this result was built over.

        Raises
        ------
        InputError
            The pair was not compared, or ``measure`` is not one of the measures.
        """
        if measure is not None and measure not in self.measures:
            raise InputError("measure not compared", item=measure,
                             fix="use one of " + ", ".join(self.measures))
        chosen = self.selected(measure=measure, pair=pair)
        if not chosen:
            raise InputError("comparison not made", item=f"{pair[0]} vs {pair[1]}")
        measures = [m for m in self.measures if any(p.measure == m for p in chosen)]
        keep = {(a, m) for a in pair for m in measures}
        return Comparison(self.settings, [a for a in self.arms if a in pair], measures,
                          {k: v for k, v in self.intervals.items() if k in keep},
                          {k: v for k, v in self.arm_power.items() if k in keep}, chosen,
                          pool_bias=None, noise=None if self.noise is None else {
                              **self.noise, "orderings": [o for o in self.noise.get("orderings", [])
                                                          if o["measure"] in measures]},
                          record=self.record,
                          values={m: self.values[m] for m in measures})

    def selected(self, *, measure: str | None = None, pair: tuple | None = None) -> list:
        """The comparisons on ``measure`` (all if None) between ``pair`` (all if None)."""
        measures = [measure] if measure else list(self.measures)
        if pair is None:
            return [p for p in self.pairs if p.measure in measures]
        return [self.pair(pair[0], pair[1], m) for m in measures
                if any(p.measure == m and {p.arm_a, p.arm_b} == set(pair) for p in self.pairs)]

    def arms_plot(self) -> pd.DataFrame:
        """Per arm and measure: mean and interval bounds (``metrics/plots/arms.csv``)."""
        rows = [{"arm": arm, "measure": m, "mean": ci.estimate, "low": ci.low, "high": ci.high}
                for (arm, m), ci in self.intervals.items()]
        return pd.DataFrame(rows, columns=["arm", "measure", "mean", "low", "high"])

    def deltas_plot(self, measure: str | None = None) -> pd.DataFrame:
        """Per-query differences, each arm minus the baseline (``metrics/plots/deltas.csv``).

        Rows per (arm, measure) sorted by difference, largest first, with its 1-based
        ``rank``, so a line per arm shows how many queries gain and lose and by how much.
        Without a baseline the first arm is the reference.
        """
        base = self.settings.baseline or self.arms[0]
        frames = []
        for m in ([measure] if measure else self.measures):
            qids, groups, mat = self.values[m]
            ib = self.arms.index(base)
            for i, arm in enumerate(self.arms):
                if arm == base:
                    continue
                d = mat[i] - mat[ib]
                order = np.lexsort((np.asarray(qids), -d))
                frames.append(pd.DataFrame({
                    "arm": arm, "baseline": base, "measure": m,
                    "rank": np.arange(1, len(d) + 1), "query_id": np.asarray(qids)[order],
                    "group": np.asarray(groups)[order], "delta": d[order]}))
        cols = ["arm", "baseline", "measure", "rank", "query_id", "group", "delta"]
        return pd.concat(frames, ignore_index=True)[cols] if frames else pd.DataFrame(columns=cols)


def _plain(obj):
    """numpy scalars → Python; tuples → lists (for json)."""
    if isinstance(obj, dict):
        return {str(k): _plain(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_plain(v) for v in obj]
    if isinstance(obj, np.generic):
        return obj.item()
    return obj


def _markdown_tables(tables: dict) -> list[str]:
    out = []
    for name, rows in tables.items():
        if not isinstance(rows, list) or not rows:
            continue
        cols = list(rows[0])
        out += [f"### {name.replace('_', ' ')}", "", "| " + " | ".join(cols) + " |",
                "|" + "---|" * len(cols)]
        for r in rows:
            out.append("| " + " | ".join(_cell(r[c]) for c in cols) + " |")
        out.append("")
    return out


def _cell(v) -> str:
    if v is None:
        return "—"
    if isinstance(v, float):
        return f"{v:.4f}"
    return str(v)


# --- building ------------------------------------------------------------------------

def _check_per_query(per_query: pd.DataFrame) -> pd.DataFrame:
    missing = [c for c in ("arm", "query_id", "measure", "value") if c not in per_query.columns]
    if missing:
        raise InputError(f"per-query table lacks column(s) {', '.join(missing)}",
                         found="columns " + ", ".join(map(str, per_query.columns)))
    df = per_query.copy()
    for c in ("arm", "query_id", "measure"):
        df[c] = df[c].astype(str)
    df["group"] = df["group"].astype(str) if "group" in df.columns else "all"
    df["value"] = pd.to_numeric(df["value"], errors="coerce").astype(np.float64)
    bad = ~np.isfinite(df["value"].to_numpy())
    if bad.any():
        r = df[bad].iloc[0]
        raise InputError("per-query value must be a finite number",
                         item=f"arm {r['arm']}, query {r['query_id']}, measure {r['measure']}",
                         found=repr(per_query.loc[r.name, "value"]))
    dup = df.duplicated(["arm", "query_id", "measure"])
    if dup.any():
        r = df[dup].iloc[0]
        raise InputError("a query has two values for one arm and measure",
                         item=f"arm {r['arm']}, query {r['query_id']}, measure {r['measure']}")
    return df


def _matrix(df: pd.DataFrame, measure: str, arms: list[str]):
    """Queries (sorted), their groups and the (n_arms, n_queries) matrix for one measure."""
    sub = df[df["measure"] == measure]
    wide = sub.pivot(index="query_id", columns="arm", values="value")
    wide = wide.reindex(columns=arms).sort_index()
    if wide.isna().to_numpy().any():
        q, a = next((q, a) for q in wide.index for a in arms if pd.isna(wide.at[q, a]))
        raise InputError("per-query values missing", item=f"arm {a}, query {q}, measure {measure}",
                         fix="every arm needs a value for every query of a measure; the "
                             "metrics stage scores a query missing from a run as 0")
    pairs = sub[["query_id", "group"]].drop_duplicates()
    if pairs["query_id"].duplicated().any():
        q = pairs.loc[pairs["query_id"].duplicated(), "query_id"].iloc[0]
        raise InputError("a query belongs to two groups", item=f"query {q}")
    qids = [str(q) for q in wide.index]
    groups = pairs.set_index("query_id")["group"].reindex(wide.index).astype(str).tolist()
    return qids, groups, wide.to_numpy(dtype=np.float64).T.copy()


def _align_weights(weights, qids: list[str]):
    if weights is None:
        return None
    w = pd.Series(weights, dtype=np.float64)
    w.index = w.index.astype(str)
    missing = [q for q in qids if q not in w.index]
    if missing:
        raise InputError("a query has no traffic weight", item=f"query {missing[0]}")
    return w.reindex(qids).to_numpy()


# --- the work units ------------------------------------------------------------------

def _arm_task(measure, arms, matrix, weights, s: Settings):
    """Intervals and power of every arm on one measure, all resampled together."""
    n = matrix.shape[1]
    means = stats.weighted_mean(matrix, weights)
    flat = matrix.min(axis=1) == matrix.max(axis=1)
    boot = None
    if not flat.all():
        rng = stats.comparison_rng(s.seed, "arm-ci", measure)
        boot = stats.bootstrap_means(matrix, rng=rng, n_resamples=s.n_resamples, weights=weights)
    jk = stats.jackknife_means(matrix, weights)
    out = []
    for i, arm in enumerate(arms):
        if flat[i]:
            ci = stats.degenerate_interval(float(matrix[i, 0]), n, s.level)
        else:
            ci = stats.interval_from_resamples(boot[:, i], float(means[i]), level=s.level,
                                               method=s.method, jackknife=jk[i], n=n)
        pw = stats.power_analysis(se=ci.se, n=n, reference=float(means[i]),
                                  relative_change=s.min_relative_change, power=s.power,
                                  alpha=s.alpha)
        pw = replace(pw, notes=pw.notes + ("standard error of the arm's own mean, standing in "
                                           "for that of a paired difference",))
        out.append((arm, ci, pw))
    return out


def _pair_task(arm_a, arm_b, measure, va, vb, weights, groups, s: Settings) -> PairResult:
    d = va - vb
    n = d.size
    rng = stats.comparison_rng(s.seed, "compare", arm_a, arm_b, measure)
    est = float(stats.weighted_mean(d, weights))
    notes = []
    if d.min() == d.max():
        ci = stats.degenerate_interval(float(d[0]), n, s.level)
        p_boot = 1.0 if d[0] == 0 else 1.0 / (s.n_resamples + 1)
    else:
        boot = stats.bootstrap_means(d, rng=rng, n_resamples=s.n_resamples, weights=weights)
        ci = stats.interval_from_resamples(boot, est, level=s.level, method=s.method,
                                           jackknife=stats.jackknife_means(d, weights), n=n)
        p_boot = stats.bootstrap_p_value(boot, est)
    flip = stats.sign_flip_test(d, rng=rng, n_permutations=s.n_permutations, weights=weights)
    tt = stats.paired_t_test(va, vb)
    dz = stats.cohens_dz(d)
    if weights is not None:
        notes.append("t test and d_z are unweighted; the interval and the randomization test "
                     "use the traffic weights")
    mean_b = float(stats.weighted_mean(vb, weights))
    pw = stats.power_analysis(se=ci.se, n=n, reference=mean_b,
                              relative_change=s.min_relative_change, power=s.power, alpha=s.alpha)
    segments = []
    labels = sorted(set(groups))
    if len(labels) > 1:
        g = np.asarray(groups)
        for label in labels:
            sel = g == label
            w = None if weights is None else weights[sel]
            seg = stats.bootstrap_ci(d[sel], rng=stats.comparison_rng(
                s.seed, "segment", arm_a, arm_b, measure, label),
                n_resamples=s.n_resamples, level=s.level, method=s.method, weights=w)
            segments.append(Segment(label, seg))
    cancel = (any(x.delta.low > 0 for x in segments) and any(x.delta.high < 0 for x in segments))
    return PairResult(arm_a, arm_b, measure, float(stats.weighted_mean(va, weights)), mean_b,
                      ci, p_boot, flip, tt, dz, pw, tuple(segments), cancel, alpha=s.alpha,
                      notes=tuple(notes))


def _run(fn_args: list, workers: int) -> list:
    """Run the work units, in threads when ``workers > 1``; results in submission order.

    numpy draws, gathers and sums without holding the GIL, so threads run the units side by
    side; each unit owns its generator, so the order they finish in changes nothing.
    """
    if workers <= 1 or len(fn_args) <= 1:
        return [fn(*args) for fn, args in fn_args]
    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(max_workers=workers) as ex:
        futures = [ex.submit(fn, *args) for fn, args in fn_args]
        return [f.result() for f in futures]


def compare_arms(per_query: pd.DataFrame, *, settings: Settings,
                 pairs: Iterable[tuple[str, str]] | None = None,
                 measures: Sequence[str] | None = None, weights=None,
                 workers: int | None = None) -> Comparison:
    """Per-arm intervals and every paired comparison of an experiment.

    Parameters
    ----------
    per_query : pandas.DataFrame of shape (n_rows, 5)
        ``arm`` (str), ``query_id`` (str), ``group`` (str, optional: one group when
        absent), ``measure`` (str), ``value`` (float): the metrics stage's per-query files
        stacked. Every arm needs a value for every query a measure is defined on. Not
        modified.
    settings : Settings
        Seed, resamples, permutations, level, alpha, power, baseline (see
        :meth:`relgrade.experiment.params.Params.compare_settings`).
    pairs : iterable of (str, str), optional
        Comparisons to make, "A against B"; default :func:`design_pairs` from the settings.
    measures : sequence of str, optional
        Measures to compare; default every measure in the table except Judged@k.
    weights : mapping or pandas.Series, optional
        Traffic weight per query id; every mean, resample and sign-flip sum is then
        weighted.
    workers : int, optional
        Threads to spread the comparisons over; default 1 for small work, else the CPU
        count (at most 8). Results are identical for any value.

    Returns
    -------
    Comparison

    Raises
    ------
    InputError
        A column is missing, a value is not finite, a (arm, query, measure) is duplicated or
        missing, an arm of ``pairs`` has no values, a measure is unknown, the baseline is
        not an arm.

    Notes
    -----
    Holm's adjustment (:func:`relgrade.evaluation.stats.holm`) runs over the randomization-test
    p-values of every comparison made here (all pairs x all measures), and a comparison is
    significant when its adjusted p-value is at most ``settings.alpha``. Segment
    cancellation is flagged when one query group's difference interval lies wholly above 0
    and another's wholly below (the groups' intervals are not Holm-adjusted).
    """
    df = _check_per_query(per_query)
    arms = sorted(df["arm"].unique())
    if not arms:
        raise InputError("per-query table is empty", fix="run the metrics stage first")
    all_measures = [str(m) for m in pd.unique(df["measure"])]
    if measures is None:
        measures = [m for m in all_measures if not m.startswith(NOT_COMPARED)]
    else:
        measures = [str(m) for m in measures]
        unknown = [m for m in measures if m not in all_measures]
        if unknown:
            raise InputError("measure not in the per-query table", item=unknown[0],
                             fix="use one of " + ", ".join(all_measures))
    if pairs is None:
        pairs = design_pairs(arms, baseline=settings.baseline, mode=settings.pairs)
    pairs = [(str(a), str(b)) for a, b in pairs]
    for a, b in pairs:
        for arm in (a, b):
            if arm not in arms:
                raise InputError("arm has no per-query values", item=arm,
                                 fix="run the metrics stage for it, or check the name; arms: "
                                     + ", ".join(arms))
        if a == b:
            raise InputError("an arm cannot be compared with itself here", item=a)
    values = {}
    jobs = []
    for m in measures:
        qids, groups, mat = _matrix(df, m, arms)
        values[m] = (qids, groups, mat)
        w = _align_weights(weights, qids)
        jobs.append((_arm_task, (m, arms, mat, w, settings)))
    pair_jobs = []
    for m in measures:
        qids, groups, mat = values[m]
        w = _align_weights(weights, qids)
        for a, b in pairs:
            pair_jobs.append((_pair_task, (a, b, m, mat[arms.index(a)], mat[arms.index(b)],
                                           w, groups, settings)))
    if workers is None:
        work = sum(len(values[m][0]) for m in measures) * (len(arms) + 2 * len(pairs)) * \
            settings.n_resamples
        workers = 1 if work < PARALLEL_MIN_WORK else min(os.cpu_count() or 1, 8)
    results = _run(jobs + pair_jobs, int(workers))
    intervals, arm_power = {}, {}
    by_measure = dict(zip(measures, results[: len(jobs)]))
    for arm in arms:
        for m in measures:
            for a, ci, pw in by_measure[m]:
                if a == arm:
                    intervals[(arm, m)] = ci
                    arm_power[(arm, m)] = pw
    pair_results = list(results[len(jobs):])
    if pair_results:
        adjusted = stats.holm([p.randomization.p for p in pair_results])
        pair_results = [replace(p, p_holm=float(h), significant=bool(h <= settings.alpha),
                                family=len(pair_results))
                        for p, h in zip(pair_results, adjusted)]
    return Comparison(settings, arms, list(measures), intervals, arm_power, pair_results,
                      values=values)


def full_report(per_query: pd.DataFrame, *, settings: Settings, qrels: pd.DataFrame | None = None,
                runs: pd.DataFrame | None = None, provenance: pd.DataFrame | None = None,
                depth: int | None = None, cutoffs: Sequence[int] = (),
                grades: pd.DataFrame | None = None, audit_queries: Sequence[str] | None = None,
                auditor: str | None = None, round: int = 1,  # noqa: A002
                ties: str = "score", relevant_min: int = 1, weights=None,
                pairs: Iterable[tuple[str, str]] | None = None,
                measures: Sequence[str] | None = None, workers: int | None = None,
                record: dict | None = None) -> Comparison:
    """:func:`compare_arms`, plus the pool-bias checks and the label-noise band.

    Parameters
    ----------
    per_query, settings, pairs, measures, weights, workers
        As for :func:`compare_arms`.
    qrels : pandas.DataFrame, optional
        The frozen key (``query_id``, ``chunk_id``, ``grade``).
    runs : pandas.DataFrame, optional
        Stacked runs (``arm``, ``query_id``, ``chunk_id``, ``rank``, ``score``).
    provenance : pandas.DataFrame, optional
        Pool provenance; with ``qrels``, ``runs`` and ``depth`` it enables the pool-bias
        checks (:func:`relgrade.evaluation.poolbias.pool_bias_report`).
    depth : int, optional
        Pool depth (params ``pool.depth``).
    cutoffs : sequence of int
        The k of judged@k (params ``metrics.cutoffs``).
    grades : pandas.DataFrame, optional
        The long grades table; with ``qrels``, ``runs``, ``audit_queries`` and ``auditor``
        it enables the label-noise band (:mod:`relgrade.evaluation.noise`).
    audit_queries : sequence of str, optional
        The audit sample.
    auditor : str, optional
        The auditor's grader name (params ``grading.auditor``).
    round : int, default 1
        Grading round (params ``grading.round``).
    ties : {"score", "rank"}, default "score"
        Run tie rule (params ``runs.ties``).
    relevant_min : int, default 1
        Lowest relevant grade (params ``scale.relevant_min``).
    record : dict, optional
        ``key_sha256``, ``pool_version``, ``post_hoc`` of the key the values come from.

    Returns
    -------
    Comparison
        With ``pool_bias`` and ``noise`` filled when their inputs were given, and each
        comparison's ``noise`` set where the audit sample defines it.

    Raises
    ------
    InputError
        As :func:`compare_arms`, :mod:`relgrade.evaluation.poolbias` and :mod:`relgrade.evaluation.noise`.
    """
    from relgrade.evaluation import metrics, noise, poolbias

    result = compare_arms(per_query, settings=settings, pairs=pairs, measures=measures,
                          weights=weights, workers=workers)
    result.record = record
    if qrels is not None and runs is not None and provenance is not None and depth is not None:
        result.pool_bias = poolbias.pool_bias_report(
            qrels=qrels, runs=runs, provenance=provenance, depth=int(depth),
            measures=result.measures, cutoffs=list(cutoffs), ties=ties,
            relevant_min=relevant_min)
    if (qrels is not None and runs is not None and grades is not None and audit_queries
            and auditor):
        audit = sorted({str(q) for q in audit_queries})
        akey, info = noise.auditor_key(key=qrels, grades=grades, audit_queries=audit,
                                       auditor=auditor, round=round)
        akey = akey[akey["query_id"].isin(audit)]
        arun = runs[runs["query_id"].astype(str).isin(audit)]
        aud_pq = metrics.per_query(qrels=akey, run=arun, measures=result.measures, ties=ties,
                                   relevant_min=relevant_min)
        grader_pq = _check_per_query(per_query)
        w = None if weights is None else {str(k): float(v) for k, v in dict(weights).items()}
        bands = noise.noise_deltas(grader=grader_pq, auditor=aud_pq,
                                   comparisons=[p.key for p in result.pairs], weights=w)
        result.pairs = [replace(p, noise=bands.get(p.key)) for p in result.pairs]
        result.noise = {"auditor": str(auditor), "round": int(round), **info,
                        "orderings": noise.orderings(grader=grader_pq, auditor=aud_pq,
                                                     measures=result.measures, weights=w)}
    return result
