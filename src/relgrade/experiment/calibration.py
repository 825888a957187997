"""An experiment's model judges against people, and the repository's calibration ledger.

``relgrade judge record`` measures a model grader's grades made under its judge identity
*now* against people's grades of the same pairs (same chunk, same rubric) and appends the
measurement to the ledger (:mod:`relgrade.io.judge_ledger`); ``relgrade judge status`` and
``relgrade status`` say, per model grader, whether its identity now has a calibration that
still holds (:func:`relgrade.protocol.calibration.calibration_state`).

The ledger is written by that command, never by a DVC stage: it is one file for every
experiment of the repository and only grows, while a stage's outputs are rebuilt from its
deps on every run (see docs/judges.md).
"""

from __future__ import annotations

from datetime import datetime, timezone
from pathlib import Path

import pandas as pd

from relgrade.errors import InputError, PendingWork, RelgradeError
from relgrade.experiment import recheck
from relgrade.experiment.judges import current_judge
from relgrade.experiment.layout import key_judges, model_judges  # noqa: F401 (their home)
from relgrade.io import files as io
from relgrade.io.judge_ledger import LEDGER, append_entry, read_ledger
from relgrade.experiment.params import Judges
from relgrade.graders.cache import JUDGE_FIELDS, NOT_RECORDED, judge_counts
from relgrade.protocol.calibration import calibration_state, measure_calibration
from relgrade.protocol.recheck import leniency_shift
from relgrade.protocol.reliability import Resampling
from relgrade.rng import derive_seed

#: How the gate and ppi stages print a calibration owed when it is not required.
PENDING_GOES_ON = ("Pending, the stage goes on (judges.require_calibration is false): "
                   "judge calibration: ")

#: What people's grades of a pair are compared with: the model grade under the judge now.
_PAIR = ("query_id", "chunk_id")


def ledger_path(ex) -> Path:
    """The repository's ledger: ``judges/ledger.jsonl`` at the top of the working tree."""
    return ex.working_tree() / LEDGER


def experiment_name(ex) -> str:
    """The experiment's folder relative to the repository's top, POSIX (``.`` at the top)."""
    rel = Path(ex.root).resolve().relative_to(ex.working_tree())
    return rel.as_posix() or "."


#: The state of a judge in an experiment that declares no human grader: nothing to measure
#: it against, so nothing is owed (a simulated panel, say).
NO_PEOPLE = "no people"


def people(ex) -> list[str]:
    """The experiment's human graders (params ``graders.NAME.kind: human``), in params order."""
    return [n for n, g in ex.params.graders.items() if g.kind == "human"]


def people_grader(ex, grader: str) -> str:
    """Whose grades grader ``grader`` is measured against: the first of params
    ``grading.key_grader``, ``grading.auditor`` that is a human grader (the people's key in
    triage mode, the human sample's grader in ppi mode, the auditor of a model key).

    Raises
    ------
    InputError
        Neither is a human grader.
    """
    g = ex.params.grading
    for name in (g.key_grader, g.auditor):
        if name and name != grader and name in ex.params.graders \
                and ex.params.graders[name].kind == "human":
            return name
    raise InputError("a judge is calibrated against people: neither grading.key_grader nor "
                     "grading.auditor is a human grader", path=ex.params.source,
                     item=f"graders.{grader}",
                     fix="name the human grader with --against NAME")


def _latest(ex, grader: str) -> tuple[dict, dict]:
    """Grader ``grader``'s latest grade row and latest bank line per pair (current round)."""
    files = ex.grader_files(grader)
    if not files.grades.exists():
        return {}, {}
    rows = {(str(r["query_id"]), str(r["chunk_id"])): r for _, r in io.iter_jsonl(files.grades)}
    bank = {(str(r["query_id"]), str(r["chunk_id"])): r for _, r in ex.read_bank(files) or ()}
    return rows, bank


def paired_grades(ex, grader: str, against: str, *, judge: str,
                  rubric_sha256: str) -> tuple[pd.DataFrame, str | None]:
    """The pairs both graded: grader ``grader``'s latest grade made under judge identity
    ``judge`` on rubric ``rubric_sha256``, and ``against``'s latest grade of the same chunk
    content on the same rubric.

    Returns
    -------
    (pandas.DataFrame, str or None)
        Columns ``query_id``, ``chunk_id`` (str), ``model``, ``human`` (int64), sorted by
        pair; and the latest ``graded_at`` (ISO 8601) of the bank lines used, None when no
        pair qualifies.
    """
    m_rows, m_bank = _latest(ex, grader)
    h_rows, h_bank = _latest(ex, against)
    out, times = [], []
    for pair, mb in m_bank.items():
        hb = h_bank.get(pair)
        if mb.get("judge") != judge or mb.get("rubric_sha256") != rubric_sha256 \
                or hb is None or hb.get("rubric_sha256") != rubric_sha256 \
                or hb.get("content_sha256") != mb.get("content_sha256") \
                or pair not in m_rows or pair not in h_rows:
            continue
        out.append((*pair, int(m_rows[pair]["grade"]), int(h_rows[pair]["grade"])))
        times += [str(mb.get("graded_at") or ""), str(hb.get("graded_at") or "")]
    table = pd.DataFrame(out, columns=["query_id", "chunk_id", "model", "human"])
    table = table.astype({"model": "int64", "human": "int64"})
    times = [t for t in times if t]
    return table.sort_values(list(_PAIR), ignore_index=True), max(times) if times else None


def pair_families(ex, paired: pd.DataFrame) -> pd.DataFrame | None:
    """Which arm families retrieved each pair (the private provenance table and params
    ``arms.NAME.family``); None without provenance or without any arm family."""
    families = {a: arm.family for a, arm in (ex.params.arms or {}).items()
                if getattr(arm, "family", None)}
    if not families or not ex.params.paths.provenance:
        return None
    path = ex.path("provenance")
    if not path.exists():
        return None
    prov = io.read_table(path, columns=["query_id", "chunk_id", "arm"])
    prov = prov[prov["arm"].astype(str).isin(families)]
    return pd.DataFrame({"query_id": prov["query_id"].astype(str),
                         "chunk_id": prov["chunk_id"].astype(str),
                         "family": prov["arm"].astype(str).map(families)})


def measure(ex, grader: str, *, against: str | None = None, judge: str | None = None) -> dict:
    """The ledger entry ``relgrade judge record`` would append for ``grader`` now.

    ``judge`` (64 hex) measures the grades made under that identity instead of the identity
    now (``judge record --identity``: a key graded before the template changed).

    Returns
    -------
    dict
        ``experiment``, ``grader``, ``judge`` (the identity now), ``against``, ``round``,
        ``rubric_version``, ``rubric_sha256``, ``measured_at`` (the latest ``graded_at`` of
        the grades it rests on: the measurement is dated by its data, so the same grades
        give the same entry), the measurement of
        :func:`relgrade.protocol.calibration.measure_calibration`, ``self_consistency``
        (the grader's ``samples`` agreement of the round when it samples more than once,
        else None) and ``interval`` (seed, stream, resamples, level).

    Raises
    ------
    InputError
        ``grader`` is not a model grader with a command, ``against`` is not a human grader,
        or no pair has both a grade of the judge now and a grade of people.
    """
    if grader not in model_judges(ex):
        raise InputError("only a model grader with a command has a judge identity to "
                         "calibrate", path=ex.params.source, item=f"graders.{grader}",
                         found=", ".join(model_judges(ex)) or "no such grader")
    against = against or people_grader(ex, grader)
    if against not in ex.params.graders or ex.params.graders[against].kind != "human":
        raise InputError("a judge is calibrated against a human grader",
                         path=ex.params.source, item=f"graders.{against}")
    judge, rubric = judge or current_judge(ex, grader), ex.rubric_sha256()
    paired, measured_at = paired_grades(ex, grader, against, judge=judge,
                                        rubric_sha256=rubric)
    if paired.empty:
        where = recheck.experiment_option(ex)
        fix = (f"Its grades of the pairs {against} graded were made under another identity "
               "(or before identities were recorded), and grade run does not ask again for a "
               "current grade: draw the targeted re-check, relgrade judge recheck --grader "
               f"{grader}{where}" if grader in key_judges(ex) else
               f"Grade with the judge now pairs that {against} graded (relgrade grade run "
               f"--grader {grader}{where} asks for the pairs it has no current grade of)")
        raise InputError("no pair has both a grade made under the judge now and a grade of "
                         "people on the same chunk and rubric", path=ex.grader_files(grader).bank,
                         item=f"judge {judge[:12]}", fix=fix)
    scale, rnd = ex.params.need("scale"), ex.params.grading.round
    boot, seed = ex.params.agreement, derive_seed(ex.params.need("seed"), "judge-calibration",
                                                  rnd)
    resampling = Resampling(seed=seed, resamples=boot.bootstrap, level=boot.level)
    result = measure_calibration(paired, scale=scale.grades, relevant_min=scale.relevant_min,
                                 resampling=resampling, families=pair_families(ex, paired))
    samples = int(ex.params.grader(grader).get("samples", 1) or 1)
    return {"experiment": experiment_name(ex), "grader": grader, "judge": judge,
            "against": against, "round": rnd,
            "rubric_version": ex.params.grading.rubric_version, "rubric_sha256": rubric,
            "measured_at": measured_at} | result | {
        "self_consistency": ex.consistency(grader) if samples > 1 else None,
        "interval": {"seed": seed, "stream": "judge-calibration", "resamples": boot.bootstrap,
                     "level": boot.level}}


def record(ex, grader: str, *, against: str | None = None, judge: str | None = None,
           entries: list[dict] | None = None) -> tuple[dict, bool]:
    """Measure ``grader`` (:func:`measure`) and append it to the ledger unless its newest
    entry for the same experiment, judge and people grader holds the same measurement.
    ``entries``: the ledger's entries, read already (None: the ledger is read here); an
    entry appended is appended to the list too, so that a caller reads the ledger once.

    Returns
    -------
    (dict, bool)
        The entry (as written, or the one already there) and whether it was appended.

    Raises
    ------
    InputError
        As :func:`measure`, or the ledger does not read
        (:func:`relgrade.io.judge_ledger.read_ledger`).
    """
    path = ledger_path(ex)
    if entries is None:
        entries = read_ledger(path)
    entry = None
    if judge is None and grader in model_judges(ex):
        entry = measure_from_recheck(ex, grader, against=against, entries=entries)
    if entry is None:
        entry = measure(ex, grader, against=against, judge=judge)
    same = [e for e in entries if (e.get("experiment"), e.get("judge"), e.get("against"))
            == (entry["experiment"], entry["judge"], entry["against"])]
    if same and {k: v for k, v in same[-1].items() if k not in ("prev", "sha256")} == entry:
        return same[-1], False
    written = append_entry(path, entry)
    entries.append(written)
    return written, True


def measure_from_recheck(ex, grader: str, *, against: str | None,
                         entries: list[dict]) -> dict | None:
    """The ledger entry of ``grader``'s identity now measured on its drawn re-check
    (:func:`relgrade.experiment.recheck.measure_recheck`), or None when no re-check is drawn
    for it. The entry adds ``leniency_shift``: the leniency now minus that of the grader's
    newest entry under another identity in this experiment
    (:func:`relgrade.protocol.recheck.leniency_shift`; None without one).

    Raises
    ------
    InputError
        A re-check is drawn but no drawn pair is graded by both the judge now and people.
    """
    judge = current_judge(ex, grader)
    d = recheck.latest_draw(ex, grader, judge)
    if d is None:
        return None
    against = against or people_grader(ex, grader)
    got = recheck.measure_recheck(ex, grader, judge, against, d)
    if got is None:
        raise InputError("no pair of the re-check is graded by both the judge now and "
                         f"{against}", path=recheck.draw_path(ex, grader, judge, d["tag"]),
                         item=f"judge {judge[:12]}",
                         fix=f"Grade the re-check: relgrade grade run --grader {grader} "
                             f"--recheck, and people's grades imported with --recheck {grader}")
    name = experiment_name(ex)
    before = [e for e in entries if e.get("experiment") == name and e.get("grader") == grader
              and e.get("judge") != judge]
    shift = None if not before else leniency_shift(got["leniency"], before[-1]["leniency"],
                                                   level=d["params"]["level"])
    return {"experiment": name, "grader": grader, "judge": judge, "against": against,
            "round": ex.params.grading.round,
            "rubric_version": ex.params.grading.rubric_version,
            "rubric_sha256": ex.rubric_sha256()} | got | {
        "leniency_shift": None if shift is None else shift | {
            "against_judge": before[-1]["judge"]},
        "self_consistency": None,
        "interval": {"method": "stratified-delta", "level": d["params"]["level"],
                     "seed": d["seed"], "stream": d["stream"]}}


def judge_states(ex, *, now: datetime | None = None, seconds_of=None) -> list[dict]:
    """Per model grader with a command: its identity now and its calibration's state.

    Parameters
    ----------
    now : datetime.datetime, optional
        The time calibrations are aged against (default: the clock now, UTC).

    Returns
    -------
    list of dict
        ``grader``, ``judge`` (64 hex, None when it cannot be computed), ``state``
        (``calibrated``, ``none``, ``stale``, :data:`NO_PEOPLE` when the experiment declares
        no human grader, so nothing can be owed, or ``unknown`` when the identity cannot be
        computed), ``why`` (words), ``latest`` (the newest entry of this experiment for the
        identity, or None), ``entries`` (every ledger entry of the grader in this
        experiment, any identity, oldest first), ``owed`` (the command that records a
        calibration, None when calibrated), ``ready`` (when owed: ``{"against": the human
        grader, "pairs": pairs both graded under the identity now}``, what ``owed`` would
        measure; None when calibrated or no human grader is named).

    Raises
    ------
    InputError
        The ledger does not read.
    """
    now = now or datetime.now(timezone.utc)
    entries = read_ledger(ledger_path(ex))
    name = experiment_name(ex)
    out = []
    for grader in model_judges(ex):
        mine = [e for e in entries if e.get("experiment") == name and e.get("grader") == grader]
        try:
            judge = current_judge(ex, grader)
            rubric = ex.rubric_sha256()
        except RelgradeError as e:
            out.append({"grader": grader, "judge": None, "state": "unknown",
                        "why": f"identity cannot be computed: {e}", "latest": None,
                        "entries": mine, "owed": None, "ready": None})
            continue
        out.append(identity_state(ex, grader, judge, entries=mine, rubric_sha256=rubric,
                                  now=now, current=True, seconds_of=seconds_of))
    return out


def identity_calibration(ex, grader: str, judge: str, *, now: datetime | None = None,
                         entries: list[dict] | None = None) -> tuple[str, str]:
    """Whether ``grader``'s identity ``judge`` has a calibration that holds in this
    experiment (:func:`relgrade.protocol.calibration.calibration_state` over the ledger's
    entries of this experiment, grader and identity, aged by params ``judges.max_age_days``).
    ``entries``: the ledger's entries, read already (None: the ledger is read here).

    Returns
    -------
    (str, str)
        The state (``calibrated``, ``stale`` or ``none``) and why in words
        (``"measured 0 days ago"``).

    Raises
    ------
    InputError
        The ledger does not read.
    """
    name = experiment_name(ex)
    every = read_ledger(ledger_path(ex)) if entries is None else entries
    mine = [e for e in every if e.get("experiment") == name
            and e.get("grader") == grader and e.get("judge") == judge]
    j = judges_params(ex)
    state, why, _ = calibration_state(mine, rubric_sha256=ex.rubric_sha256(),
                                      now=now or datetime.now(timezone.utc),
                                      max_age_days=j.max_age_days,
                                      min_pairs=j.recheck.min_pairs)
    return state, why


def identity_state(ex, grader: str, judge: str, *, entries, rubric_sha256: str,
                   now: datetime, current: bool, seconds_of=None) -> dict:
    """One judge identity's calibration state, as :func:`judge_states` gives it (and
    ``entries``: the ledger entries of ``grader`` in this experiment). ``current`` False
    (an identity that is not the grader's now) adds ``--identity`` to the owed command.

    For a key judge's identity now (:func:`key_judges`) whose calibration is stale, or
    missing with no pair people graded that it graded too, or whose re-check is drawn, the
    state adds ``recheck``: what the targeted re-check owes
    (:func:`relgrade.experiment.recheck.owed`, with ``words``), priced by ``seconds_of``
    (grader name -> seconds per judgment; without it no re-check is described)."""
    j = judges_params(ex)
    state, why, latest = calibration_state(
        [e for e in entries if e.get("judge") == judge], rubric_sha256=rubric_sha256, now=now,
        max_age_days=j.max_age_days, min_pairs=j.recheck.min_pairs)
    owed, ready = None, None
    if state != "calibrated" and not people(ex):
        # no command could pay it: not owed work, a fact about the experiment
        return {"grader": grader, "judge": judge, "state": NO_PEOPLE,
                "why": f"{why}, and no people's grades to calibrate against: the experiment "
                       "declares no human grader",
                "latest": latest, "entries": entries, "owed": None, "ready": None}
    if state != "calibrated":
        owed = owed_command(ex, grader) + ("" if current else f" --identity {judge[:12]}")
        try:
            ready = {"against": (against := people_grader(ex, grader)),
                     "pairs": len(paired_grades(ex, grader, against, judge=judge,
                                                rubric_sha256=rubric_sha256)[0])}
        except InputError:
            ready = None  # no human grader to measure against: judge record says so
    out = {"grader": grader, "judge": judge, "state": state, "why": why, "latest": latest,
           "entries": entries, "owed": owed, "ready": ready, "min_pairs": j.recheck.min_pairs}
    if state != "calibrated" and current and seconds_of is not None \
            and grader in key_judges(ex):
        out["recheck"] = recheck_state(ex, grader, judge, state=state, ready=ready,
                                       seconds_of=seconds_of, min_pairs=j.recheck.min_pairs)
    return out


def recheck_state(ex, grader: str, judge: str, *, state: str, ready, seconds_of,
                  min_pairs: int) -> dict | None:
    """The re-check owed by ``grader``'s identity now ``judge`` (see :func:`identity_state`),
    or None when the calibration can be recorded from pairs people already graded (a first
    calibration on the audit or human sample, when they are at least ``min_pairs``, params
    ``judges.recheck.min_pairs``: fewer would not count as a calibration)."""
    drawn = recheck.read_draw(ex, grader, judge) is not None
    if not drawn and state == "none" and ready and ready["pairs"] >= min_pairs:
        return None
    against = ready["against"] if ready else None
    try:
        o = recheck.owed(ex, grader, judge, against, seconds=seconds_of(against or ""))
    except InputError as e:
        return {"error": str(e)}
    return o | {"words": recheck.owed_words(ex, grader, o)}


def made_under(ex, grader: str) -> list[str]:
    """The judge identities ``grader``'s grades of the round were made under (each pair's
    latest bank line; lines that name none left out), most used first."""
    files = ex.grader_files(grader)
    if not files.grades.exists():
        return []
    counts = judge_counts(ex.bank_table(files, JUDGE_FIELDS))
    counts.pop(NOT_RECORDED, None)
    return sorted(counts, key=lambda j: -counts[j])


def resolve_identity(ex, grader: str, prefix: str) -> str:
    """The full judge identity ``prefix`` names among ``grader``'s grades of the round and
    its identity now.

    Raises
    ------
    InputError
        No identity, or more than one, starts with ``prefix``.
    """
    known = set(made_under(ex, grader)) | {current_judge(ex, grader)}
    hits = sorted(j for j in known if j.startswith(prefix.lower()))
    if len(hits) != 1:
        raise InputError("--identity must name one judge identity of the grader's grades "
                         "of the round", item=f"graders.{grader}", found=prefix,
                         fix="use a prefix of an identity `relgrade status` prints for it")
    return hits[0]


def judges_params(ex) -> Judges:
    """Params ``judges`` (its defaults when the section is absent)."""
    return ex.params.judges or Judges()


def owed_calibrations(ex, graders, *, seconds_of=None) -> list[str]:
    """What the gate and ppi stages print as pending: per model grader of ``graders``, per
    judge identity its grades of the round were made under (its identity now when none
    names one) that has no calibration, or a stale one, the line that names the re-check
    owed (``model-m identity a06abfe96163: no calibration recorded; owed: ...``). The key is
    judged by the identities that graded it: a template changed after grading owes nothing
    here until the new judge grades.

    With params ``judges.require_calibration`` such a grader is not printed but stops the
    stage: :class:`~relgrade.errors.PendingWork` (exit 3, ``Pending: ...``).

    The ledger is read as a witness, not a dep of the stage: the stage's outputs never
    depend on it (see docs/judges.md).

    Returns
    -------
    list of str
        Empty when every such judge is calibrated.

    Raises
    ------
    PendingWork
        ``judges.require_calibration`` is true and a line would be printed.
    InputError
        The ledger does not read.
    """
    wanted = [g for g in dict.fromkeys(graders) if g in model_judges(ex)]
    if not wanted:
        return []
    now = datetime.now(timezone.utc)
    entries = read_ledger(ledger_path(ex))
    name = experiment_name(ex)
    lines = []
    for grader in wanted:
        try:
            current = current_judge(ex, grader)
            rubric = ex.rubric_sha256()
        except RelgradeError:
            continue  # no identity to check: `relgrade status` says why
        mine = [e for e in entries if e.get("experiment") == name and e.get("grader") == grader]
        for judge in dict.fromkeys(made_under(ex, grader) + [current]):
            s = identity_state(ex, grader, judge, entries=mine, rubric_sha256=rubric, now=now,
                               current=judge == current, seconds_of=seconds_of)
            if s["state"] in ("none", "stale"):
                lines.append(state_line(s).removeprefix("judge: "))
    if lines and judges_params(ex).require_calibration:
        raise PendingWork("judge calibration: " + "; ".join(lines))
    return lines


def owed_command(ex, grader: str) -> str:
    """The command that records ``grader``'s calibration in this experiment."""
    name = experiment_name(ex)
    where = "" if name == "." else f" --experiment {name}"
    return f"relgrade judge record --grader {grader}{where}"


# --- in words -------------------------------------------------------------------------

def _f(x, signed: bool = False) -> str:
    if x is None:
        return "undefined"
    return f"{x:+.2f}" if signed else f"{x:.2f}"


def entry_line(e: dict) -> str:
    """One ledger entry in words (judge identity, when, against whom, on what, kappas and
    leniency with their intervals, leniency per arm family, self-consistency)."""
    wk, bk, le = e["weighted_kappa"], e["binary_kappa"], e["leniency"]
    text = (f"{e['judge'][:12]} measured {e['measured_at']} against {e['against']} on "
            f"{e['pairs']} pairs ({e['queries']} queries), rubric {e.get('rubric_version')} "
            f"{e['rubric_sha256'][:12]}: weighted kappa {_f(wk['value'])} "
            f"[{_f(wk['low'])}, {_f(wk['high'])}], binary kappa {_f(bk['value'])} "
            f"[{_f(bk['low'])}, {_f(bk['high'])}], leniency {_f(le['mean'], True)} "
            f"[{_f(le['low'], True)}, {_f(le['high'], True)}]")
    fam = e.get("leniency_by_family") or {}
    if fam:
        text += "; by arm family: " + ", ".join(
            f"{name} {_f(v['mean'], True)} [{_f(v['low'], True)}, {_f(v['high'], True)}]"
            for name, v in fam.items())
    sc = e.get("self_consistency")
    if sc:
        text += (f"; self-consistency over {sc.get('samples')} samples: Fleiss kappa "
                 f"{_f(sc.get('fleiss_kappa'))}")
    return text


def state_line(s: dict) -> str:
    """A grader's judge identity now and its calibration's state, with the owed command."""
    if s["judge"] is None:
        return f"judge: {s['grader']} {s['why']}"
    head = f"judge: {s['grader']} identity {s['judge'][:12]}: "
    if s["state"] == "calibrated":
        return head + f"calibrated ({s['why']})"
    if s["state"] == NO_PEOPLE:
        return head + f"{s['why']}; nothing owed (declare a grader of kind human to measure it)"
    r = s.get("recheck")
    if r:
        stale = 'calibration stale, ' if s['state'] == 'stale' else ''
        if "error" in r:
            return head + (f"{stale}{s['why']}; owed: a re-check against people, which "
                           f"cannot be planned yet: {r['error']}")
        return head + f"{stale}{s['why']}; owed: {r['words']}"
    ready = s.get("ready")
    basis = (" (neither grading.key_grader nor grading.auditor is a human grader: name one "
             "with --against NAME)") if not ready else (
        f" ({ready['pairs']} pairs graded by {ready['against']} have a grade of this identity"
        + ("; grade some with it first" if not ready["pairs"] else
           f"; a calibration rests on at least {s['min_pairs']} (judges.recheck.min_pairs): "
           "grade more with it first" if ready["pairs"] < s["min_pairs"] else "")
        + ")")
    return (head + f"{'calibration stale, ' if s['state'] == 'stale' else ''}{s['why']}; "
                   f"owed: a re-check against people, {s['owed']}{basis}")
