"""What an agreement value means for the grades: the three bands of the judgment program.

Agreement bounds what the grades can tell apart. The program that relgrade implements reads
a chance-corrected agreement (a kappa or Krippendorff's alpha) in three bands:

* below 0.4 (``"fix-guideline"``): the rubric leaves the grade to each grader's own reading;
  revise the rubric and its examples before collecting more grades;
* from 0.4 to 0.6 (``"training"``): consistent enough to train a ranker on, not to decide
  between arms;
* above 0.6 (``"evaluation"``): consistent enough for a frozen evaluation set.

0.4 and 0.6 themselves fall in the middle band. A verdict reads the point value; with an
interval it also says whether the interval lies inside that band or crosses into another,
so a value just above 0.6 on few pairs is not mistaken for a settled one.
"""

from __future__ import annotations

#: The band boundaries: below ``LOW`` fix the guideline, above ``HIGH`` an evaluation set.
LOW = 0.4
HIGH = 0.6

#: Each band's name and what it means for the grades.
MEANINGS = {
    "fix-guideline": "below 0.4: graders read the rubric differently; revise the rubric "
                     "and its examples before collecting more grades",
    "training": "0.4 to 0.6: consistent enough for training data, not for an evaluation set",
    "evaluation": "above 0.6: consistent enough for a frozen evaluation set",
}


def band(value: float | None) -> str | None:
    """The band of one agreement value.

    Parameters
    ----------
    value : float or None
        A kappa or alpha (at most 1); ``None`` when the statistic is undefined.

    Returns
    -------
    str or None
        ``"fix-guideline"`` (``value < 0.4``), ``"training"`` (``0.4 <= value <= 0.6``) or
        ``"evaluation"`` (``value > 0.6``); ``None`` for an undefined value.

    Examples
    --------
    >>> band(0.39), band(0.4), band(0.6), band(0.61), band(None)
    ('fix-guideline', 'training', 'training', 'evaluation', None)
    """
    if value is None:
        return None
    if value < LOW:
        return "fix-guideline"
    if value <= HIGH:
        return "training"
    return "evaluation"


def verdict(name: str, value: float | None, low: float | None = None,
            high: float | None = None, *, level: float | None = None,
            units: int | None = None) -> dict:
    """The band of a statistic, its meaning, and whether its interval stays in the band.

    Parameters
    ----------
    name : str
        The statistic (``"weighted_kappa"``, ``"fleiss_kappa"``, ...), used in the text.
    value : float or None
        Its point value; ``None`` when undefined.
    low, high : float or None, optional
        Its confidence interval (relgrade's take the audited query as the unit: the
        jackknife t over queries, see :mod:`relgrade.protocol.reliability`).
    level : float, optional
        The interval's confidence level, named in the sentence when given.
    units : int, optional
        How many queries the interval rests on, named in the sentence when given.

    Returns
    -------
    dict
        ``band`` (str or None, see :func:`band`), ``meaning`` (str), ``settled`` (bool or
        None: both ends of the interval in the value's band; ``None`` without an interval)
        and ``verdict`` (one sentence).

    Examples
    --------
    >>> verdict("fleiss_kappa", 0.65, 0.55, 0.74)["settled"]
    False
    >>> verdict("weighted_kappa", 0.7, 0.62, 0.78, level=0.95, units=10)["verdict"][-66:]
    'the 95% interval over 10 queries [0.620, 0.780] stays in this band'
    """
    b = band(value)
    if b is None:
        return {"band": None, "meaning": "undefined", "settled": None,
                "verdict": f"{name} is undefined: no band"}
    settled = None
    text = f"{name} {value:.3f}: {MEANINGS[b]}"
    if low is not None and high is not None:
        ends = {band(low), band(high)}
        settled = ends == {b}
        what = "the" + (f" {level:.0%}" if level is not None else "") + " interval"
        if units is not None:
            what += f" over {units} quer{'y' if units == 1 else 'ies'}"
        text += (f"; {what} [{low:.3f}, {high:.3f}] stays in this band" if settled else
                 f"; {what} [{low:.3f}, {high:.3f}] reaches into "
                 f"{' and '.join(sorted(ends - {b}))}, so the band is not settled")
    return {"band": b, "meaning": MEANINGS[b], "settled": settled, "verdict": text}
