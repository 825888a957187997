"""The judge probe's report on disk, as the ppi stage reads it.

``relgrade judge probe`` writes ``judges/probe-GRADER.json`` in the experiment's folder
(:mod:`relgrade.experiment.probe`). The ppi stage reads the report of the key grader, when
there is one, through :func:`ppi_paraphrase_source`: the report counts only when it was
measured under the key grader's judge identity now and on the rubric now, and holds the
paraphrase probe's answers; otherwise it is ignored and the reason recorded.
"""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd

from relgrade.canonical import sha256_bytes
from relgrade.errors import InputError
from relgrade.experiment.calibration import _latest, judges_params
from relgrade.experiment.judges import current_judge
from relgrade.experiment.layout import probe_report_file

#: The report's format version.
PROBE_FORMAT = "relgrade-judge-probe/1"

#: The columns of the paraphrase probe's ``answer_rows`` in the report.
ANSWER_COLUMNS = ("query_id", "chunk_id", "prompt", "sample", "grade")


def report_path(ex, grader: str) -> Path:
    """Where the probe report of ``grader`` goes: ``judges/probe-GRADER.json`` in the
    experiment's folder (:func:`relgrade.experiment.layout.probe_report_file`)."""
    return probe_report_file(ex.root, grader)


def _answers(report: dict, path: Path) -> pd.DataFrame | None:
    para = (report.get("probes") or {}).get("paraphrase")
    if not isinstance(para, dict) or "answer_rows" not in para:
        return None
    a = para["answer_rows"]
    if not isinstance(a, dict) or list(a.get("columns") or []) != list(ANSWER_COLUMNS) \
            or not isinstance(a.get("rows"), list):
        raise InputError("the probe report's paraphrase answers are not in the written form",
                         path=path, item="probes.paraphrase.answer_rows",
                         fix="run relgrade judge probe again (it writes the report anew)")
    for i, row in enumerate(a["rows"]):
        ok = isinstance(row, list) and len(row) == 5 and all(
            isinstance(x, str) for x in row[:2]) and all(
            isinstance(x, int) and not isinstance(x, bool) for x in row[2:])
        if not ok:
            raise InputError("a paraphrase answer is not [query_id, chunk_id, prompt, sample, "
                             "grade]", path=path, item=f"probes.paraphrase.answer_rows.rows[{i}]",
                             found=repr(row)[:80],
                             fix="run relgrade judge probe again (it writes the report anew)")
    return pd.DataFrame(a["rows"], columns=list(ANSWER_COLUMNS)).astype(
        {"prompt": "int64", "sample": "int64", "grade": "int64"})


def ppi_paraphrase_source(ex, grader: str) -> dict | None:
    """The key grader's probe report as the ppi stage uses it, or None when there is none.

    Parameters
    ----------
    ex : relgrade.experiment.files.Experiment
    grader : str
        The key grader (params ``grading.key_grader``).

    Returns
    -------
    dict or None
        None when ``judges/probe-GRADER.json`` does not exist. Else ``source`` (the path
        relative to the experiment's folder, POSIX), ``sha256`` (of the file's bytes),
        ``judge`` (the identity the report was measured under), ``judge_now``, ``used``
        (bool: measured under the identity now, on the rubric now, with paraphrase
        answers), ``note`` (why it is ignored, None when used), ``widen`` (params
        ``judges.probe.widen``), ``paraphrases`` (int) and ``answers`` (a DataFrame of
        :data:`ANSWER_COLUMNS`, None unless used).

    Raises
    ------
    InputError
        The file is not JSON, is not a probe report of ``grader``, or its answers are not
        in the written form.
    """
    path = report_path(ex, grader)
    if not path.is_file():
        return None
    data = path.read_bytes()
    try:
        report = json.loads(data.decode("utf-8"))
    except (UnicodeDecodeError, ValueError) as e:
        raise InputError("the probe report is not JSON", path=path, found=str(e)[:80],
                         fix="run relgrade judge probe again (it writes the report anew)")
    if not isinstance(report, dict) or report.get("format") != PROBE_FORMAT \
            or report.get("grader") != grader:
        raise InputError("the file is not a probe report of the key grader", path=path,
                         found=f"format {report.get('format') if isinstance(report, dict) else None!r}",
                         fix=f"run relgrade judge probe --grader {grader}")
    rel = path.relative_to(Path(ex.root)).as_posix()
    now = current_judge(ex, grader)
    out = {"source": rel, "sha256": sha256_bytes(data), "judge": report.get("judge"),
           "judge_now": now, "used": False, "note": None,
           "widen": bool(judges_params(ex).probe.widen),
           "paraphrases": int((report.get("params") or {}).get("paraphrases") or 0),
           "answers": None}
    answers = _answers(report, path)
    if report.get("judge") != now:
        out["note"] = (f"ignored: measured under judge identity "
                       f"{str(report.get('judge'))[:12]}, the key grader's identity now is "
                       f"{now[:12]} (run relgrade judge probe again)")
    elif report.get("rubric_sha256") != ex.rubric_sha256():
        out["note"] = ("ignored: measured on another rubric than the rubric now "
                       "(run relgrade judge probe again)")
    elif answers is None:
        out["note"] = ("ignored: the report holds no paraphrase answers (run relgrade judge "
                       "probe with the paraphrase probe)")
    else:
        out.update(used=True, answers=answers)
    return out


def prompt_draws(ex, grader: str, sample) -> int:
    """How many independent prompt draws lie behind the model term of a PPI++ estimate: 1
    when ``grader``'s latest grades of every pair were made under one judge identity, 2
    when they were made under more than one (the human sample's pairs, or some of them,
    under another identity than the rest, so the prompt effect no longer cancels between
    the mean over all queries and the mean over the sample; docs/ppi.md).

    Parameters
    ----------
    ex : relgrade.experiment.files.Experiment
    grader : str
    sample : iterable of str
        The human-sample query ids (the identities on them and on the rest are compared).
    """
    _, bank = _latest(ex, grader)
    wanted = set(map(str, sample))
    inside = {b.get("judge") for (q, _), b in bank.items() if q in wanted}
    outside = {b.get("judge") for (q, _), b in bank.items() if q not in wanted}
    return 1 if len(inside | outside) <= 1 else 2
