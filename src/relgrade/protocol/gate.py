"""The agreement gate: no key and no arm metric until the audit agreement passes.

:func:`check_gates` compares the agreement measures (the agreement stage's metrics) with the
thresholds in params ``gates`` and returns a :class:`GateResult`: whether it passed, one line
per failing measure (``weighted_kappa 0.71 < 0.75``), and what to do next. An undefined
measure fails, with a line saying it is undefined and why.

On a fail the protocol reads the disagreements with their reasons, names the cause (an
ambiguous intent, a missing boundary rule, or drift), revises the rubric or the intents, logs
the revision and regrades the whole pool in a new round from fresh orders. One case has a
narrower remedy: when binary kappa passes and weighted kappa fails mostly on splits between
two relevant grades (1 versus 2), only the query-form rules need tightening, and only the
chunks graded relevant are regraded (a partial regrade in a new ``grading.round``).
"""

from __future__ import annotations

import math
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

#: Above this share of disagreements between relevant grades, weighted kappa is said to
#: fail "mostly on 1-versus-2 splits".
RELEVANT_SPLIT_MAJORITY = 0.5

GENERAL_ADVICE = (
    "read the disagreements (paths.disagreements) with both reasons and name the cause: an "
    "ambiguous intent, a missing boundary rule, or drift; revise the rubric or the intents, "
    "log the revision, and regrade the whole pool from fresh orders in a new grading.round")


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
        The gates, as given.
    """

    passed: bool
    lines: tuple[str, ...]
    advice: tuple[str, ...] = ()
    measures: dict = field(default_factory=dict)
    thresholds: dict = field(default_factory=dict)

    def record(self, round: int | None = None) -> dict:
        """The pass record the gate stage writes (``paths.gate``).

        Parameters
        ----------
        round : int, optional
            The grading round the agreement was measured on.

        Returns
        -------
        dict
            ``{"passed": True, "measures": {...}, "thresholds": {...}, "round": round}``.

        Raises
        ------
        ProtocolError
            The gate did not pass: there is no pass record to write.
        """
        from relgrade.errors import ProtocolError

        if not self.passed:
            raise ProtocolError("the agreement gate failed; there is no pass record to write")
        return {"passed": True, "measures": dict(self.measures),
                "thresholds": dict(self.thresholds), "round": round}


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


def _why_undefined(name: str, measures: Mapping) -> str:
    notes = measures.get("notes") or []
    for note in notes:
        if isinstance(note, str) and note.startswith(f"{name} is undefined: "):
            return note[len(f"{name} is undefined: "):]
    if measures.get("pairs") == 0:
        return "no pair has grades from both raters"
    return "the agreement stage reported no value"


def check_gates(measures: Mapping, gates: Mapping) -> GateResult:
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

    Returns
    -------
    GateResult
        ``passed`` when every measure is defined and on the right side of its threshold
        (a kappa equal to its minimum passes, a share equal to its maximum passes).

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
    unknown = sorted(set(gates) - set(GATES))
    if unknown:
        raise InputError("unknown gate in params `gates`", item=unknown[0],
                         fix=f"Use {', '.join(GATES)}")
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
        advice = GENERAL_ADVICE
    return GateResult(False, tuple(lines), (advice,), kept, thresholds)


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


def family_warnings(*, key_grader: str, auditor: str, graders: Mapping[str, str | None],
                    arms: Mapping[str, str | None]) -> list[str]:
    """Lines naming where the protocol's model-family rule is broken.

    The auditor should come from another model family than the graders (so their errors are
    not the same errors), and a model grader from another family than the arms it grades
    (so it does not favour its own family's retrieval). Undeclared families are not compared.

    Parameters
    ----------
    key_grader, auditor : str
        The grader whose grades make the key, and the auditor.
    graders : mapping of str to (str or None)
        Every grader's declared ``family``.
    arms : mapping of str to (str or None)
        Every arm's declared ``family``.

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
    """
    lines = []
    fam = {name: (str(f) if f else None) for name, f in graders.items()}
    audit_family = fam.get(auditor)
    for name in sorted(fam):
        if name != auditor and audit_family and fam[name] == audit_family:
            lines.append(f"auditor {auditor} is of the same family as grader {name} ({audit_family})")
    for name in [key_grader] + sorted(n for n in fam if n not in (key_grader, auditor)):
        if not fam.get(name):
            continue
        for arm, f in sorted(arms.items()):
            if f and str(f) == fam[name]:
                lines.append(f"grader {name} is of the same family as arm {arm} ({fam[name]})")
    return lines
