"""Reading an A/B test's result: the online side of ``relgrade reconcile``.

The format (docs/formats.md, "A/B result"): JSON Lines, one object per line. One line
without ``segment`` is the overall result; lines with ``segment`` are per-segment results
of the same test::

    {"control": "bm25", "treatment": "hybrid", "metric": "CTR", "delta": 0.024, "low": 0.011, "high": 0.037}
    {"control": "bm25", "treatment": "hybrid", "metric": "CTR", "segment": "keyword", "delta": 0.05, "low": 0.02, "high": 0.08}

``delta``, ``low`` and ``high`` are the relative change of the treatment against the control
and its interval (0.024 is +2.4%); ``level`` (optional, default 0.95) is the interval's level.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Sequence

from relgrade.errors import InputError
from relgrade.io.files import iter_jsonl

#: Fields every line carries.
FIELDS = ("control", "treatment", "metric", "delta", "low", "high")
#: Fields a line may carry besides.
OPTIONAL = ("segment", "level")


def read_ab_result(path, *, arms: Sequence[str]) -> tuple[dict, list[dict]]:
    """The overall result and the per-segment results of an A/B result file.

    Parameters
    ----------
    path : str or os.PathLike
        The JSON Lines file (format above).
    arms : sequence of str
        The experiment's arms: ``control`` and ``treatment`` must be two of them.

    Returns
    -------
    overall : dict
        ``control``, ``treatment``, ``metric`` (str), ``delta``, ``low``, ``high``,
        ``level`` (float), ``line`` (int).
    segments : list of dict
        The same fields plus ``segment`` (str), in file order.

    Raises
    ------
    InputError
        Naming the file and line: the file is missing or empty; a line is not a JSON
        object; a field is missing, unknown, not text or not a finite number; ``low <=
        delta <= high`` fails; ``level`` is outside (0, 1); an arm is not an arm of the
        experiment, or the two arms are the same; a line names other arms or another metric
        than the first line; two overall lines, or none; a segment given twice.
    """
    path = Path(path)
    if not path.exists():
        raise InputError("A/B result file not found", path=path)
    known = sorted(map(str, arms))
    overall, segments, first, seen = None, [], None, set()
    for line, obj in iter_jsonl(path):
        missing = [f for f in FIELDS if f not in obj]
        if missing:
            raise InputError(f"an A/B result line needs {', '.join(FIELDS)}", path=path,
                             line=line, found="no " + ", ".join(missing))
        unknown = [k for k in obj if k not in FIELDS and k not in OPTIONAL]
        if unknown:
            raise InputError("unknown field in an A/B result line", path=path, line=line,
                             item=unknown[0], fix="Fields: " + ", ".join(FIELDS + OPTIONAL))
        row = {}
        for f in ("control", "treatment", "metric", "segment"):
            if f in obj:
                if not isinstance(obj[f], str) or not obj[f].strip():
                    raise InputError(f"{f} must be non-empty text", path=path, line=line,
                                     found=repr(obj[f]))
                row[f] = obj[f]
        for f in ("delta", "low", "high", "level"):
            if f in obj:
                v = obj[f]
                if isinstance(v, bool) or not isinstance(v, (int, float)) \
                        or not math.isfinite(v):
                    raise InputError(f"{f} must be a finite number (a relative change: "
                                     "0.024 is +2.4%)", path=path, line=line, found=repr(v))
                row[f] = float(v)
        row.setdefault("level", 0.95)
        if not 0 < row["level"] < 1:
            raise InputError("level must lie between 0 and 1", path=path, line=line,
                             found=repr(row["level"]))
        if not row["low"] <= row["delta"] <= row["high"]:
            raise InputError("the interval must hold the delta (low <= delta <= high)",
                             path=path, line=line,
                             found=f"delta {row['delta']}, [{row['low']}, {row['high']}]")
        for f in ("control", "treatment"):
            if row[f] not in known:
                raise InputError(f"{f} is not an arm of the experiment", path=path, line=line,
                                 item=row[f], fix="Arms: " + ", ".join(known))
        if row["control"] == row["treatment"]:
            raise InputError("control and treatment must be two different arms", path=path,
                             line=line, item=row["control"])
        same = (row["control"], row["treatment"], row["metric"])
        if first is None:
            first = same
        elif same != first:
            raise InputError("every line must name the first line's control, treatment and "
                             "metric", path=path, line=line,
                             found=f"{same[0]}, {same[1]}, {same[2]}")
        row["line"] = line
        if "segment" in row:
            if row["segment"] in seen:
                raise InputError("segment given twice", path=path, line=line,
                                 item=row["segment"])
            seen.add(row["segment"])
            segments.append(row)
        elif overall is not None:
            raise InputError("two overall results (lines without segment)", path=path,
                             line=line, fix=f"the first is line {overall['line']}")
        else:
            overall = row
    if overall is None:
        raise InputError("no overall result: one line must have no segment", path=path)
    return overall, segments
