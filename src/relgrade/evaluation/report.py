"""The comparison of arms as a result: frozen result classes with their renderers beside them.

:func:`relgrade.evaluation.compare.compare_arms` computes; the classes here hold what it
found and render it, one result with several renderers: :meth:`Comparison.to_dict` /
:meth:`~Comparison.to_json` (``metrics/comparisons.json``), :meth:`~Comparison.to_markdown`,
:meth:`~Comparison.rich_tables` (the CLI), :meth:`~Comparison.verdicts` (plain sentences),
and the two plot tables :meth:`~Comparison.arms_plot` and :meth:`~Comparison.deltas_plot`.
The JSON report's layout is described in :mod:`relgrade.evaluation.compare`.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING

import numpy as np
import pandas as pd

from relgrade.canonical import json_ready
from relgrade.errors import InputError
from relgrade.evaluation import stats
from relgrade.evaluation.noise import LabelNoise

if TYPE_CHECKING:
    from relgrade.evaluation.settings import Settings


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
    test: stats.MeanTest | None = None
    verdict_test: str = "mean"

    @property
    def key(self) -> tuple[str, str, str]:
        return (self.arm_a, self.arm_b, self.measure)

    @property
    def p_test(self) -> float:
        """The p-value Holm adjusts: the mean test's (``metrics.test: mean``), or the
        sign-flip test's (``sign-flip``, or when no mean test was made)."""
        if self.verdict_test == "mean" and self.test is not None:
            return float(self.test.p)
        return float(self.randomization.p)

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
            text += before_holm_note(d.low, d.high, self.family)
            pw = self.power
            if pw.n_needed is not None and pw.n_needed > pw.n:
                text += (f"; about {pw.n_needed} queries would detect a "
                         f"{pw.relative_change:.0%} change with power {pw.power:.0%} "
                         f"(this set has {pw.n})")
            elif pw.n_needed is not None:
                text += (f"; {pw.n} queries detect a {pw.relative_change:.0%} change with "
                         f"power {pw.power:.0%} or more, so a real difference is likely smaller")
            else:
                thin = [x for x in pw.notes if x.startswith(stats.THIN_SPREAD)]
                if thin:
                    text += "; " + thin[0]
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
            "interval": d.method, "clipped": d.clipped, "relative": self.relative,
            "p_randomization": self.randomization.p, "p_test": self.p_test,
            "test": None if self.test is None else {**self.test.to_dict(),
                                                    "verdict_test": self.verdict_test},
            "p_holm": self.p_holm,
            "significant": self.significant, "p_bootstrap": self.p_bootstrap,
            "randomization": self.randomization.to_dict(), "t_test": self.ttest.to_dict(),
            "d_z": self.d_z, "power": self.power.to_dict(),
            "segments": [s.to_dict() for s in self.segments],
            "segment_cancellation": self.cancellation, "holm_family": self.family,
            "label_noise": None if self.noise is None else self.noise.to_dict(),
            "notes": list(d.notes) + list(self.notes),
            "verdict": self.verdict(),
        }


#: How the report names the verdict's test (params ``metrics.test``).
_TEST_NAMES = {"mean": "paired test of mean difference 0 (t below 30 queries off the mode, "
                       "studentized bootstrap from there)",
               "sign-flip": "paired sign-flip randomization test (assumes each difference "
                            "symmetric about 0)"}


def _test_caption(settings) -> str:
    """The verdict's test in a table caption, with its resample or pattern count."""
    if settings.test == "sign-flip":
        return (f"paired sign-flip randomization test, {settings.n_permutations} "
                "permutations")
    return ("paired test of mean difference 0 (Student t below 30 queries off the most "
            f"common difference, studentized bootstrap of {settings.n_permutations} "
            "resamples from there)")


def _fmt_p(p: float) -> str:
    return f"{p:.2g}"


def before_holm_note(low: float, high: float, family: int | None) -> str:
    """The clause a verdict of no detectable difference carries when its interval excludes
    0 only before Holm's correction ("" otherwise).

    Parameters
    ----------
    low, high : float
        The comparison's own interval (metric units), at the stated level, not corrected
        for the family.
    family : int or None
        The comparisons Holm adjusted over (None or 1: no correction, no clause).

    Returns
    -------
    str
        ``"; the interval excludes 0 only before correcting for the K comparisons made"``
        when the interval lies strictly on one side of 0 and ``family > 1``, else ``""``.
        Shared by the model-key verdicts (:meth:`PairResult.verdict`) and PPI++'s
        (:func:`relgrade.evaluation.ppi_decision.ppi_verdict`).

    Examples
    --------
    >>> before_holm_note(-0.736, -0.199, 3)
    '; the interval excludes 0 only before correcting for the 3 comparisons made'
    >>> before_holm_note(-0.1, 0.2, 3), before_holm_note(0.1, 0.2, 1)
    ('', '')
    """
    if (low > 0 or high < 0) and family is not None and family > 1:
        return (f"; the interval excludes 0 only before correcting for the {family} "
                "comparisons made")
    return ""


def _f(x: float, sign: str = "", digits: int = 4) -> str:
    """A number to ``digits`` decimals, never printed as -0.0000."""
    return f"{round(float(x), digits) + 0.0:{sign}.{digits}f}"


#: What a weighted comparison report says about its statistics.
WEIGHTING_NOTE = ("means, bootstrap intervals and randomization tests are traffic-weighted by "
                  "the queries' `weight`; each arm's `unweighted_mean` is beside its estimate; "
                  "the t test and d_z are unweighted")


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
    plans : list of dict
        The shared resample plans the numbers were read from
        (:meth:`relgrade.evaluation.resample.ResamplePlan.to_dict`: version, seed, scope,
        queries, resamples, permutations, block rows), written to the JSON as
        ``resample_plans``.
    unweighted : dict or None
        ``(arm, measure) -> unweighted mean`` when the means are traffic-weighted
        (``metrics.weighted``): the JSON then says so and gives each arm's unweighted mean
        beside its weighted one; ``None`` when the means are unweighted.
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
    unweighted: dict | None = None
    plans: list = field(default_factory=list)

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
                    if self.unweighted is not None and (arm, m) in self.unweighted:
                        entry["unweighted_mean"] = self.unweighted[(arm, m)]
                    arms[arm][m] = entry
        weighting = ({"weighted": True, "weighting": WEIGHTING_NOTE}
                     if self.unweighted is not None else {})
        plans = {"resample_plans": self.plans} if self.plans else {}
        return {**(self.record or {}), "settings": self.settings.to_dict(), **plans,
                **weighting,
                "measures": list(self.measures),
                "arms": arms, "comparisons": [p.to_dict() for p in self.pairs],
                "pool_bias": self.pool_bias, "label_noise": self.noise,
                "verdicts": self.verdicts()}

    def to_json(self) -> str:
        """:meth:`to_dict` as indented JSON; refuses NaN and infinity (never written)."""
        return json.dumps(json_ready(self.to_dict()), indent=2, ensure_ascii=False,
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
               f"permutations; verdict test: {_TEST_NAMES[self.settings.test]}; Holm over "
               f"{family} comparisons at alpha "
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
            skipped = self.pool_bias.get("not_checked")
            if skipped:
                out.append(f"{', '.join(skipped['measures'])}: {skipped['note']}.")
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

    def to_latex(self, *, caption: str | None = None, label: str | None = None,
                 digits: int = 4) -> str:
        """A LaTeX table (booktabs): one row per arm, one column per measure, with the tests.

        Each arm gets a letter (a, b, c, ... in the order of :attr:`arms`); a cell holds the
        arm's mean and, as a superscript, the letters of the arms it beats significantly on
        that measure: the comparison was made, its difference is positive and its
        Holm-adjusted randomization p-value is at most ``settings.alpha``. The best mean of
        each column is bold. The layout follows the comparison tables of ranx
        (``Report.to_latex``), so a paper's table needs no reshaping.

        Parameters
        ----------
        caption : str, optional
            The caption; default: a sentence stating the test, its permutations, the Holm
            family and alpha.
        label : str, optional
            A ``\\label`` for the table.
        digits : int, default 4
            Decimal places of the means.

        Returns
        -------
        str
            A ``table`` environment; it needs ``\\usepackage{booktabs}``. Arm and measure
            names are escaped (``_``, ``%``, ``&``, ``#``, ``$``, ``{``, ``}``, ``~``, ``^``,
            ``\\``).
        """
        letters = {arm: _letter(i) for i, arm in enumerate(self.arms)}
        beats: dict = {}
        for p in self.pairs:
            if not p.significant or p.delta.estimate == 0:
                continue
            winner, loser = (p.arm_a, p.arm_b) if p.delta.estimate > 0 else (p.arm_b, p.arm_a)
            beats.setdefault((winner, p.measure), set()).add(letters[loser])
        best = {}
        for m in self.measures:
            means = [self.intervals[(a, m)].estimate for a in self.arms if (a, m) in self.intervals]
            best[m] = max(means) if means else None
        family = max([p.family for p in self.pairs] or [0])
        if caption is None:
            caption = (f"Mean over the queries. A superscript marks a significant improvement "
                       f"over the run with that letter: {_test_caption(self.settings)}, "
                       f"Holm-adjusted over "
                       f"{family} comparisons, alpha {self.settings.alpha:g}. Best in bold.")
        out = ["\\begin{table}[t]", "\\centering", f"\\caption{{{_latex_escape(caption)}}}"]
        if label:
            out.append(f"\\label{{{label}}}")
        out += ["\\begin{tabular}{cl" + "r" * len(self.measures) + "}", "\\toprule",
                " & ".join(["\\#", "Run"] + [_latex_escape(m) for m in self.measures])
                + " \\\\", "\\midrule"]
        for arm in self.arms:
            cells = [letters[arm], _latex_escape(arm)]
            for m in self.measures:
                ci = self.intervals.get((arm, m))
                if ci is None:
                    cells.append("--")
                    continue
                text = f"{ci.estimate:.{digits}f}"
                if ci.estimate == best[m]:
                    text = f"\\textbf{{{text}}}"
                sup = "".join(sorted(beats.get((arm, m), ())))
                cells.append(text + (f"$^{{{sup}}}$" if sup else ""))
            out.append(" & ".join(cells) + " \\\\")
        out += ["\\bottomrule", "\\end{tabular}", "\\end{table}"]
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
            from relgrade.evaluation.measures import suggest_measure

            near = suggest_measure(measure, known=self.measures)
            raise InputError("measure not compared", item=measure,
                             fix=(f"Did you mean {near}? " if near else "")
                             + "Use one of " + ", ".join(self.measures))
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
                          values={m: self.values[m] for m in measures},
                          unweighted=self.unweighted)

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


def _letter(i: int) -> str:
    """a, b, ..., z, aa, ab, ...: the label of the i-th arm (0-based) in a LaTeX table."""
    out = ""
    i += 1
    while i:
        i, r = divmod(i - 1, 26)
        out = chr(ord("a") + r) + out
    return out


#: LaTeX's special characters and how to print each literally.
_LATEX_SPECIAL = {"\\": "\\textbackslash{}", "&": "\\&", "%": "\\%", "$": "\\$",
                  "#": "\\#", "_": "\\_", "{": "\\{", "}": "\\}",
                  "~": "\\textasciitilde{}", "^": "\\textasciicircum{}"}


def _latex_escape(text: str) -> str:
    return "".join(_LATEX_SPECIAL.get(c, c) for c in str(text))


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
