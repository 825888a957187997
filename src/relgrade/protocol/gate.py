"""The agreement gate: no key and no arm metric until the audit agreement passes.

:func:`check_gates` compares the agreement measures (the agreement stage's metrics) with the
thresholds in params ``gates`` and returns a :class:`GateResult`: whether it passed, one line
per failing measure (``weighted_kappa 0.71 < 0.75``), and what to do next. An undefined
measure fails, with a line saying it is undefined and why. A kappa is undefined when both
graders gave every audited pair one category (all relevant, say): chance agreement is then 1,
and agreement beyond chance cannot be measured on that sample however well they agree. The
protocol gates kappa, not raw agreement, so this fails too, but its advice is about the
sample (a larger audit sample in a new round, holding both relevant and non-relevant pairs),
not the rubric.

On a fail the protocol reads the disagreements with their reasons, names the cause (an
ambiguous intent, a missing boundary rule, or drift), revises the rubric or the intents, logs
the revision and regrades the whole pool in a new round from fresh orders. One case has a
narrower remedy: when binary kappa passes and weighted kappa fails mostly on splits between
two relevant grades (1 versus 2), only the query-form rules need tightening, and only the
chunks graded relevant are regraded (a partial regrade in a new ``grading.round``).
"""

from __future__ import annotations

import dataclasses
import math
import re
from dataclasses import dataclass, field
from typing import Mapping

from relgrade.errors import InputError

#: params ``gates`` key → (measure in the agreement metrics, "min" or "max").
GATES: Mapping[str, tuple[str, str]] = {
    "weighted_kappa_min": ("weighted_kappa", "min"),
    "binary_kappa_min": ("binary_kappa", "min"),
    "disagreement_max": ("disagreement", "max"),
    "two_step_max": ("two_step_disagreement", "max"),
}

#: params ``gates`` keys about the audit rather than agreement (see :func:`audit_gate`).
AUDIT_GATES = ("audit_coverage_min", "require_distinct_families")

#: Above this share of disagreements between relevant grades, weighted kappa is said to
#: fail "mostly on 1-versus-2 splits".
RELEVANT_SPLIT_MAJORITY = 0.5

GENERAL_ADVICE = (
    "read the disagreements (paths.disagreements) with both reasons and name the cause: an "
    "ambiguous intent, a missing boundary rule, or drift; revise the rubric or the intents, "
    "log the revision, and regrade the whole pool from fresh orders in a new grading.round")

#: Why a one-category sample is not the rubric's fault: the opening of every such advice.
NOT_THE_RUBRIC = (
    "kappa is undefined because every audited pair fell in one category for both graders, "
    "not because they disagree: revising the rubric cannot help.")

#: The advice when a kappa is undefined because both graders used one category for every
#: audited pair (:func:`one_category`); the gate stage gives a version naming the params file,
#: the current values and the command.
ONE_CATEGORY_ADVICE = (
    NOT_THE_RUBRIC + " Kappa needs an audit sample that holds both relevant and non-relevant "
    "pairs: raise audit.min_queries or audit.fraction (in triage mode also "
    "triage.zero_sample, so people grade more of the model's 0s) and start a new "
    "grading.round, whose audit sample is drawn before grading")

#: The agreement stage's reason for a kappa whose chance agreement is 1
#: (:func:`relgrade.protocol.agreement.agreement`'s notes).
_ONE_CATEGORY = re.compile(r"both raters gave every pair (?P<category>.+), so chance "
                           r"agreement is 1 and kappa is 0/0")


@dataclass(frozen=True)
class GateResult:
    """The outcome of :func:`check_gates`.

    Attributes
    ----------
    passed : bool
        Every gate holds.
    lines : tuple of str
        One line per failing measure, in the order of :data:`GATES`, e.g.
        ``"weighted_kappa 0.71 < 0.75"`` or ``"binary_kappa undefined: ..."``.
    advice : tuple of str
        What to do about the fail (empty on a pass).
    measures : dict
        The gated measures with ``pairs`` and ``missing``, as read.
    thresholds : dict
        The gates, as given (with :func:`check_audit_gates`: every gate in force, the audit
        gates included).
    coverage : dict
        The audit's coverage (:func:`relgrade.protocol.audit.audit_coverage`); empty when
        only agreement was checked.
    relaxed : tuple of str
        :func:`looser_than_protocol` of ``thresholds``: one line per relaxed gate.
    families : tuple of str
        :func:`family_warnings`: one line per break of the model-family rule.
    """

    passed: bool
    lines: tuple[str, ...]
    advice: tuple[str, ...] = ()
    measures: dict = field(default_factory=dict)
    thresholds: dict = field(default_factory=dict)
    coverage: dict = field(default_factory=dict)
    relaxed: tuple[str, ...] = ()
    families: tuple[str, ...] = ()

    def record(self, round: int | None = None) -> dict:
        """The pass record the gate stage writes (``paths.gate``).

        Parameters
        ----------
        round : int, optional
            The grading round the agreement was measured on.

        Returns
        -------
        dict
            ``{"passed": True, "measures": {...}, "thresholds": {...}, "round": round}``,
            followed, when :func:`check_audit_gates` made the result, by ``coverage``,
            ``relaxed_gates`` (lines, possibly empty) and ``family_warnings`` (lines).

        Raises
        ------
        ProtocolError
            The gate did not pass: there is no pass record to write.
        """
        from relgrade.errors import ProtocolError

        if not self.passed:
            raise ProtocolError("the agreement gate failed; there is no pass record to write")
        out = {"passed": True, "measures": dict(self.measures),
               "thresholds": dict(self.thresholds), "round": round}
        if self.coverage:
            out |= {"coverage": dict(self.coverage), "relaxed_gates": list(self.relaxed),
                    "family_warnings": list(self.families)}
        return out


def _number(value) -> float | None:
    if value is None or isinstance(value, bool):
        return None
    if not isinstance(value, (int, float)):
        return None
    value = float(value)
    return value if math.isfinite(value) else None


def _shown(value: float, other: float) -> str:
    """``value`` with enough digits that it never prints equal to ``other``."""
    for digits in (3, 4, 6, 10):
        text = f"{value:.{digits}f}".rstrip("0").rstrip(".")
        if text != f"{other:.{digits}f}".rstrip("0").rstrip("."):
            return text
    return repr(value)


def _note(name: str, measures: Mapping) -> str | None:
    for note in measures.get("notes") or []:
        if isinstance(note, str) and note.startswith(f"{name} is undefined: "):
            return note[len(f"{name} is undefined: "):]
    return None


def one_category(name: str, measures: Mapping) -> str | None:
    """The category both graders gave every audited pair, when that left ``name`` undefined.

    Parameters
    ----------
    name : str
        A kappa of the agreement metrics (``weighted_kappa``, ``binary_kappa``, ``kappa``).
    measures : mapping
        The agreement metrics, with their ``notes``.

    Returns
    -------
    str or None
        The category in the agreement stage's words (``"grade 2"``, ``"a relevant grade
        (>= 1)"``); None when ``name`` is defined, or undefined for another reason (no pair).

    Examples
    --------
    >>> one_category("binary_kappa", {"binary_kappa": None, "notes": [
    ...     "binary_kappa is undefined: both raters gave every pair a relevant grade (>= 1), "
    ...     "so chance agreement is 1 and kappa is 0/0"]})
    'a relevant grade (>= 1)'
    """
    if _number(measures.get(name)) is not None:
        return None
    found = _ONE_CATEGORY.fullmatch(_note(name, measures) or "")
    return found.group("category") if found else None


def _why_undefined(name: str, measures: Mapping) -> str:
    category = one_category(name, measures)
    if category is not None:
        pairs = measures.get("pairs")
        which = ("every audited pair" if not isinstance(pairs, int) or isinstance(pairs, bool)
                 else "the 1 audited pair" if pairs == 1 else f"all {pairs} audited pairs")
        return (f"both graders gave {which} {category}, so chance agreement is 1 and kappa "
                "is 0/0: chance-corrected agreement cannot be measured on a sample of one "
                "category")
    note = _note(name, measures)
    if note is not None:
        return note
    if measures.get("pairs") == 0:
        return "no pair has grades from both raters"
    return "the agreement stage reported no value"


def check_gates(measures: Mapping, gates: Mapping, *,
                sample_advice: str = ONE_CATEGORY_ADVICE,
                disagreements: str | None = None) -> GateResult:
    """Compare the agreement measures with the gates.

    Parameters
    ----------
    measures : mapping
        The agreement metrics (see :func:`relgrade.protocol.agreement.audit_agreement`): at least
        ``weighted_kappa``, ``binary_kappa``, ``disagreement``, ``two_step_disagreement``
        (float or None); optionally ``pairs``, ``missing``, ``notes``,
        ``relevant_split_share``, ``scale``, ``relevant_min``.
    gates : mapping
        params ``gates``: ``weighted_kappa_min``, ``binary_kappa_min``,
        ``disagreement_max``, ``two_step_max`` (numbers).
    sample_advice : str, default :data:`ONE_CATEGORY_ADVICE`
        The advice given when a kappa is undefined because both graders gave every audited
        pair one category (:func:`one_category`): the sample, not the rubric, is at fault.
    disagreements : str, optional
        The disagreements file as the user types it: named in the regrade advice in place of
        its params key (``paths.disagreements``).

    Returns
    -------
    GateResult
        ``passed`` when every measure is defined and on the right side of its threshold
        (a kappa equal to its minimum passes, a share equal to its maximum passes). A kappa
        left undefined by a sample of one category fails too (the protocol gates kappa
        itself, and perfect raw agreement on such a sample says nothing beyond chance); its
        line names the category and the number of pairs, and ``advice`` starts with
        ``sample_advice``, followed by the regrade advice only when another measure fails.

    Raises
    ------
    InputError
        ``gates`` lacks one of the four gates, names an unknown one or has a threshold that
        is not a number; ``measures`` lacks a gated measure.

    Notes
    -----
    Thresholds follow the protocol: quadratic weighted kappa >= 0.75 over the full scale,
    binary kappa (0 against relevant) >= 0.80, disagreement <= 10 % and two-step
    disagreement <= 2 %. The partial-regrade advice is given when binary kappa passes,
    weighted kappa fails and more than half of the disagreements
    (``relevant_split_share`` > 0.5) are splits between two relevant grades.

    Examples
    --------
    >>> r = check_gates({"weighted_kappa": 0.71, "binary_kappa": 0.9, "disagreement": 0.05,
    ...                  "two_step_disagreement": 0.0},
    ...                 {"weighted_kappa_min": 0.75, "binary_kappa_min": 0.8,
    ...                  "disagreement_max": 0.1, "two_step_max": 0.02})
    >>> r.passed, r.lines
    (False, ('weighted_kappa 0.71 < 0.75',))
    """
    if not isinstance(gates, Mapping):
        raise InputError("params `gates` must be a mapping",
                         found=type(gates).__name__)
    unknown = sorted(set(gates) - set(GATES) - set(AUDIT_GATES))
    if unknown:
        raise InputError("unknown gate in params `gates`", item=unknown[0],
                         fix=f"Use {', '.join((*GATES, *AUDIT_GATES))}")
    thresholds = {}
    for key in GATES:
        if key not in gates:
            raise InputError("params `gates` lacks a gate", item=key,
                             fix=f"Set all of {', '.join(GATES)}")
        t = _number(gates[key])
        if t is None:
            raise InputError("a gate threshold must be a number",
                             item=key, found=repr(gates[key]))
        thresholds[key] = gates[key]

    lines: list[str] = []
    values: dict[str, float | None] = {}
    for key, (name, side) in GATES.items():
        if name not in measures:
            raise InputError("the agreement metrics lack a gated measure", item=name,
                             fix="Rerun the agreement stage")
        v, t = _number(measures[name]), float(thresholds[key])
        values[name] = v
        if v is None:
            lines.append(f"{name} undefined: {_why_undefined(name, measures)} "
                         f"(gate {'>=' if side == 'min' else '<='} {t:g})")
        elif side == "min" and v < t:
            lines.append(f"{name} {_shown(v, t)} < {t:g}")
        elif side == "max" and v > t:
            lines.append(f"{name} {_shown(v, t)} > {t:g}")

    kept = {name: measures[name] for name, _ in GATES.values()}
    for extra in ("pairs", "missing"):
        if extra in measures:
            kept[extra] = measures[extra]

    if not lines:
        return GateResult(True, (), (), kept, thresholds)

    wk, bk = values["weighted_kappa"], values["binary_kappa"]
    share = _number(measures.get("relevant_split_share"))
    binary_passes = bk is not None and bk >= float(thresholds["binary_kappa_min"])
    weighted_fails = wk is not None and wk < float(thresholds["weighted_kappa_min"])
    if binary_passes and weighted_fails and share is not None \
            and share > RELEVANT_SPLIT_MAJORITY:
        relevant = _relevant_grades(measures)
        pairs = (f"{relevant[0]} versus {relevant[1]}" if len(relevant) == 2
                 else "among " + ", ".join(map(str, relevant)))
        advice = (f"binary_kappa passes and {share:.0%} of the disagreements are splits "
                  f"between two relevant grades ({pairs}): "
                  "tighten the query-form rules of the rubric, log the revision, and regrade "
                  f"only the chunks graded {' or '.join(map(str, relevant))} in a new "
                  "grading.round (a partial regrade)")
    else:
        advice = (GENERAL_ADVICE if disagreements is None
                  else GENERAL_ADVICE.replace("(paths.disagreements)", f"({disagreements})"))
    one = {name for name, _ in GATES.values() if one_category(name, measures) is not None}
    if not one:
        return GateResult(False, tuple(lines), (advice,), kept, thresholds)
    # a kappa undefined on a one-category sample: only a sample with both kinds of pairs helps
    others = [line for line in lines if line.split(" ", 1)[0] not in one]
    return GateResult(False, tuple(lines), (sample_advice, *((advice,) if others else ())),
                      kept, thresholds)


def _relevant_grades(measures: Mapping) -> list[int]:
    scale, rel = measures.get("scale"), measures.get("relevant_min")
    if isinstance(scale, list) and isinstance(rel, int) and not isinstance(rel, bool):
        grades = [g for g in scale if isinstance(g, int) and g >= rel]
        if len(grades) >= 2:
            return grades
    return [1, 2]


#: The protocol's own thresholds: a gate set looser than these is reported on every record.
PROTOCOL_GATES: Mapping[str, float] = {
    "weighted_kappa_min": 0.75,
    "binary_kappa_min": 0.80,
    "disagreement_max": 0.10,
    "two_step_max": 0.02,
    "audit_coverage_min": 1.0,
}


def looser_than_protocol(thresholds: Mapping) -> list[str]:
    """One warning line per gate set looser than the protocol's threshold.

    Parameters
    ----------
    thresholds : mapping
        Gate name (a key of :data:`PROTOCOL_GATES`) to its number; other keys are ignored.

    Returns
    -------
    list of str
        E.g. ``"gates.weighted_kappa_min 0.6 is looser than the protocol's 0.75"``, in the
        order of :data:`PROTOCOL_GATES`; empty when every gate is at least as strict.

    Examples
    --------
    >>> looser_than_protocol({"weighted_kappa_min": 0.6, "disagreement_max": 0.1})
    ["gates.weighted_kappa_min 0.6 is looser than the protocol's 0.75"]
    """
    lines = []
    for name, strict in PROTOCOL_GATES.items():
        value = _number(thresholds.get(name))
        if value is None:
            continue
        looser = value < strict if name.endswith("_min") else value > strict
        if looser:
            lines.append(f"gates.{name} {value:g} is looser than the protocol's {strict:g}")
    return lines


#: The family ``relgrade init`` gives people (graders of kind ``human``): not a model family,
#: so the family rule never compares it (people sharing it are no conflict).
PEOPLE_FAMILY = "human"


def family_warnings(*, key_grader: str, auditor: str, graders: Mapping[str, str | None],
                    arms: Mapping[str, str | None],
                    roles: Mapping[str, str] | None = None) -> list[str]:
    """Lines naming where the protocol's model-family rule is broken.

    The auditor should come from another model family than the graders (so their errors are
    not the same errors), and a model grader from another family than the arms it grades
    (so it does not favour its own family's retrieval). Undeclared families are not
    compared, nor :data:`PEOPLE_FAMILY` (``human``, case-insensitive): the rule is about
    model families, and people sharing it are no conflict.

    Parameters
    ----------
    key_grader, auditor : str
        The grader whose grades make the key, and the auditor.
    graders : mapping of str to (str or None)
        Every grader's declared ``family``.
    arms : mapping of str to (str or None)
        Every arm's declared ``family``.
    roles : mapping of str to str, optional
        Every grader's params ``role``. A grader of role ``auditor`` besides ``auditor`` (an
        extra auditor) is held to the auditor's rule, not compared as a grader: two auditors
        of one family are no conflict, an extra auditor of a grader's family is.

    Returns
    -------
    list of str
        One line per broken rule, e.g. ``"auditor auditor-b is of the same family as grader
        grader-a (claude)"``; empty when the rule holds.

    Examples
    --------
    >>> family_warnings(key_grader="g", auditor="a", graders={"g": "x", "a": "x"},
    ...                 arms={"bm25": None, "dense": "x"})
    ['auditor a is of the same family as grader g (x)', 'grader g is of the same family as arm dense (x)']
    >>> family_warnings(key_grader="g", auditor="a", graders={"g": "human", "a": "human"},
    ...                 arms={"bm25": None})
    []
    >>> family_warnings(key_grader="g", auditor="a", graders={"g": "y", "a": "x", "a2": "x"},
    ...                 arms={}, roles={"g": "grader", "a": "auditor", "a2": "auditor"})
    []
    """
    lines = []
    fam = {name: (str(f) if f and str(f).lower() != PEOPLE_FAMILY else None)
           for name, f in graders.items()}
    auditors = [auditor] + sorted(n for n, r in (roles or {}).items()
                                  if r == "auditor" and n != auditor and n in fam)
    for who in auditors:
        for name in sorted(fam):
            if name not in auditors and fam.get(who) and fam[name] == fam[who]:
                lines.append(f"auditor {who} is of the same family as grader {name} "
                             f"({fam[who]})")
    for name in [key_grader] + sorted(n for n in fam if n != key_grader and n not in auditors):
        if not fam.get(name):
            continue
        for arm, f in sorted(arms.items()):
            if f and str(f) == fam[name]:
                lines.append(f"grader {name} is of the same family as arm {arm} ({fam[name]})")
    return lines


def coverage_line(coverage: Mapping, *, key_grader: str, auditor: str) -> str:
    """The audit's coverage in words: what each grader has graded and which queries lack grades.

    Parameters
    ----------
    coverage : mapping
        :func:`relgrade.protocol.audit.audit_coverage`'s result.
    key_grader, auditor : str
        The two graders compared.

    Returns
    -------
    str
        E.g. ``"auditor-b has graded 5 of 95 audit pairs, grader-a 95 of 95 (queries kw02,
        qu05 incomplete)"``.

    Examples
    --------
    >>> coverage_line({"pairs": 4, "both": 2, "key_grader_missing": 0, "auditor_missing": 2,
    ...                "coverage": 0.5, "queries_incomplete": ["q2"]},
    ...               key_grader="g", auditor="a")
    'a has graded 2 of 4 audit pairs, g 4 of 4 (query q2 incomplete)'
    """
    pairs = int(coverage["pairs"])
    text = (f"{auditor} has graded {pairs - int(coverage['auditor_missing'])} of {pairs} audit "
            f"pairs, {key_grader} {pairs - int(coverage['key_grader_missing'])} of {pairs}")
    queries = list(coverage.get("queries_incomplete") or [])
    if queries:
        text += (f" (quer{'y' if len(queries) == 1 else 'ies'} {', '.join(queries)} "
                 "incomplete)")
    return text


def _coverage_fails(coverage: Mapping, minimum: float, *, key_grader: str,
                    auditor: str) -> tuple[str, str] | None:
    value = _number(coverage.get("coverage"))
    if value is not None and value >= minimum:
        return None
    owing = [name for name, k in ((auditor, "auditor_missing"), (key_grader, "key_grader_missing"))
             if coverage.get(k)]
    if value is None:
        line = "audit coverage undefined: the audited queries have no pooled pair"
        advice = "rerun the pool and audit stages (dvc repro audit)"
    else:
        line = (f"audit coverage {coverage['both']} of {coverage['pairs']} pairs "
                f"({_shown(value, minimum)}) < {minimum:g}: "
                + coverage_line(coverage, key_grader=key_grader, auditor=auditor))
        runs = " or ".join(f"`relgrade grade run --grader {name}`" for name in owing)
        advice = ("finish the audit before reading agreement: every pair of every audited "
                  f"query needs grades from both {key_grader} and {auditor}; grade the "
                  f"missing pairs ({runs or 'none owed'}, or `relgrade serve`), then "
                  "`dvc repro`")
    return line, advice


def check_audit_gates(measures: Mapping, gates: Mapping, *, coverage: Mapping,
                      key_grader: str, auditor: str,
                      families: list[str] | tuple[str, ...] = (),
                      sample_advice: str = ONE_CATEGORY_ADVICE,
                      disagreements: str | None = None) -> GateResult:
    """The whole gate: agreement (:func:`check_gates`), a complete audit, the family rule.

    Parameters
    ----------
    measures : mapping
        The agreement metrics (see :func:`check_gates`).
    gates : mapping
        params ``gates``: the four agreement gates, and optionally ``audit_coverage_min``
        (number in [0, 1], default 1.0) and ``require_distinct_families`` (bool, default
        False).
    coverage : mapping
        :func:`relgrade.protocol.audit.audit_coverage` of the current pool, the audit sample
        and the round's grades.
    key_grader, auditor : str
        The two graders compared (named in the coverage line and its advice).
    families : sequence of str, default ()
        :func:`family_warnings`' lines.
    sample_advice : str, default :data:`ONE_CATEGORY_ADVICE`
        As :func:`check_gates`.
    disagreements : str, optional
        As :func:`check_gates`.

    Returns
    -------
    GateResult
        ``passed`` when every agreement gate holds, ``coverage["coverage"] >=
        audit_coverage_min`` and, with ``require_distinct_families``, ``families`` is
        empty. ``thresholds`` holds all six gates in force; ``relaxed`` the gates looser
        than :data:`PROTOCOL_GATES`; ``families`` the family lines (kept, as warnings, when
        they do not fail the gate). A coverage failure comes first among ``lines`` and its
        advice (finish the audit) replaces the regrade advice: agreement on part of the
        sample says nothing about the rest.

    Raises
    ------
    InputError
        As :func:`check_gates`; ``audit_coverage_min`` is not a number in [0, 1] or
        ``require_distinct_families`` is not a bool.

    Examples
    --------
    >>> m = {"weighted_kappa": 0.9, "binary_kappa": 0.9, "disagreement": 0.05,
    ...      "two_step_disagreement": 0.0}
    >>> g = {"weighted_kappa_min": 0.75, "binary_kappa_min": 0.8, "disagreement_max": 0.1,
    ...      "two_step_max": 0.02}
    >>> c = {"pairs": 4, "both": 2, "key_grader_missing": 0, "auditor_missing": 2,
    ...      "coverage": 0.5, "queries_incomplete": ["q2"]}
    >>> r = check_audit_gates(m, g, coverage=c, key_grader="g", auditor="a")
    >>> r.passed, r.lines
    (False, ('audit coverage 2 of 4 pairs (0.5) < 1: a has graded 2 of 4 audit pairs, g 4 of 4 (query q2 incomplete)',))
    """
    agreement_gates = {k: v for k, v in gates.items() if k not in AUDIT_GATES}
    result = check_gates(measures, agreement_gates, sample_advice=sample_advice,
                         disagreements=disagreements)
    minimum = gates.get("audit_coverage_min", PROTOCOL_GATES["audit_coverage_min"])
    m = _number(minimum)
    if m is None or not 0 <= m <= 1:
        raise InputError("gates.audit_coverage_min must be a number in [0, 1]",
                         item="gates.audit_coverage_min", found=repr(minimum))
    require = gates.get("require_distinct_families", False)
    if not isinstance(require, bool):
        raise InputError("gates.require_distinct_families must be true or false",
                         item="gates.require_distinct_families", found=repr(require))
    lines, advice = list(result.lines), list(result.advice)
    failed = _coverage_fails(coverage, m, key_grader=key_grader, auditor=auditor)
    if failed is not None:
        lines.insert(0, failed[0])
        advice = [failed[1]]
    families = tuple(families)
    if require and families:
        lines += [f"family rule: {line}" for line in families]
        advice.append("the family rule is required (gates.require_distinct_families): grade "
                      "with an auditor of another model family than the graders, and graders "
                      "of another family than the arms")
    thresholds = dict(result.thresholds) | {"audit_coverage_min": minimum,
                                            "require_distinct_families": require}
    return GateResult(not lines, tuple(lines), tuple(advice), dict(result.measures),
                      thresholds, coverage=dict(coverage),
                      relaxed=tuple(looser_than_protocol(thresholds)), families=families)


#: The prefix of a pass record's ``relaxed_gates`` line for an agreement gate ppi mode
#: reports but does not apply (:func:`ppi_gate`); such a line relaxes nothing.
PPI_NOT_APPLIED = "not applied in ppi mode: "


def relaxed_lines(lines) -> tuple[list[str], list[str]]:
    """A pass record's ``relaxed_gates`` split into the gates set looser than the protocol's
    and the agreement gates ppi mode did not apply.

    Parameters
    ----------
    lines : iterable of str
        ``relaxed_gates`` (or :attr:`GateResult.relaxed`).

    Returns
    -------
    (list of str, list of str)
        The relaxed gates' lines as given; the not-applied lines without their
        :data:`PPI_NOT_APPLIED` prefix.

    Examples
    --------
    >>> relaxed_lines(["not applied in ppi mode: binary_kappa 0.2 < 0.8"])
    ([], ['binary_kappa 0.2 < 0.8'])
    """
    relaxed, not_applied = [], []
    for line in lines:
        if line.startswith(PPI_NOT_APPLIED):
            not_applied.append(line[len(PPI_NOT_APPLIED):])
        else:
            relaxed.append(line)
    return relaxed, not_applied


#: Why the agreement thresholds do not gate a prediction-powered experiment (recorded).
PPI_GATE_NOTE = ("grading.mode ppi: agreement on the human sample is reported, but the kappa "
                 "and disagreement thresholds do not gate the estimates: the prediction-powered "
                 "estimates and their intervals stay valid however biased the model grader is "
                 "(it is rectified on the human sample); a weak model only widens them. The "
                 "audit's completeness and the family rule still gate.")


def ppi_gate(result: GateResult, measures: Mapping, gates: Mapping) -> GateResult:
    """The gate of ``grading.mode: ppi``: :func:`check_audit_gates` without the agreement gates.

    Parameters
    ----------
    result : GateResult
        :func:`check_audit_gates` of the experiment.
    measures, gates : mapping
        As given to it.

    Returns
    -------
    GateResult
        ``passed`` unless the human sample is incompletely graded or a required family rule
        breaks. The agreement lines that would have failed move to ``relaxed`` (prefixed
        ``not applied in ppi mode:``), so the pass record keeps them next to
        :data:`PPI_GATE_NOTE`.

    Notes
    -----
    A prediction-powered estimate corrects the model key's mean by the mean human-minus-
    model difference on a uniform sample; its interval is valid for any model, so a low
    kappa is information (a wider interval, the judge audit's flags), not a reason to stop
    (Angelopoulos et al., Science 2023).
    """
    agreement_gates = {k: v for k, v in gates.items() if k not in AUDIT_GATES}
    agreement_lines = set(check_gates(measures, agreement_gates).lines)
    lines = tuple(x for x in result.lines if x not in agreement_lines)
    advice = result.advice if lines else ()
    relaxed = tuple(result.relaxed) + tuple(f"{PPI_NOT_APPLIED}{x}"
                                            for x in result.lines if x in agreement_lines)
    return dataclasses.replace(result, passed=not lines, lines=lines, advice=advice,
                               relaxed=relaxed)
