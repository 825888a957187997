"""The rubric's revision chain and the disputes file of an experiment, as read from disk.

The rules are :mod:`relgrade.protocol.rubric` (sections, revisions, which grades a revision
makes stale) and :mod:`relgrade.protocol.disputes`; this module finds the files: the rubric
of params ``grading.rubric``, each version it revises (``VERSION.md`` in the same folder),
the revision log ``CHANGELOG.md`` beside them, and the disputes file (params
``paths.disputes``).
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pandas as pd

from relgrade.errors import InputError
from relgrade.io import files as io
from relgrade.protocol import disputes as dsp
from relgrade.protocol import rubric as rb

#: The longest chain of revisions followed (a loop of ``revises`` lines is refused).
MAX_CHAIN = 100


def disputes_path(ex) -> Path | None:
    """The disputes file (params ``paths.disputes``), or None when params name none."""
    return None if ex.params.paths.disputes is None else ex.path("disputes")


def read_disputes(ex) -> pd.DataFrame:
    """Every recorded dispute (:data:`relgrade.protocol.disputes.RECORDED` columns); empty
    when params name no disputes file or it does not exist yet.

    A last line without its line end (an append cut short by a crash, never acknowledged)
    is left out, as the next append cuts it away.

    Raises
    ------
    InputError
        A line of the file is not a JSON object (naming the file and line).
    """
    path = disputes_path(ex)
    if path is None or not path.exists():
        return dsp.table([])
    data = path.read_bytes()
    if data and not data.endswith(b"\n"):
        data = data[:data.rfind(b"\n") + 1]
    rows = []
    for n, line in enumerate(data.decode("utf-8").splitlines(), start=1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
        except json.JSONDecodeError as e:
            raise io.json_error(e, path=_rel(ex, path), line=n) from None
        if not isinstance(row, dict):
            raise InputError("a recorded dispute is a JSON object", path=_rel(ex, path),
                             line=n)
        rows.append(row)
    return dsp.table(rows)


def current_sections(ex) -> dict:
    """The current rubric's sections by id (:func:`relgrade.protocol.rubric.parse`)."""
    path = ex.rubric_path()
    if not path.exists():
        raise InputError("rubric file not found", path=path, item="grading.rubric")
    return rb.parse(io.read_utf8(path), source=_rel(ex, path)).sections


def file_disputes(ex, rows, *, source, via: str, lines=None) -> tuple[list, int]:
    """Check filed disputes and append the new ones to the disputes file, all or nothing.

    Parameters
    ----------
    ex : relgrade.experiment.files.Experiment
        The experiment.
    rows : sequence of mapping
        Filed disputes (:data:`relgrade.protocol.disputes.FILED` keys, in order).
    source : str
        The file (or ``the grading page``) named in errors; ``lines`` the rows' line numbers.
    via : str
        ``import`` or ``page``, recorded.

    Returns
    -------
    (list of str, int)
        The ids of the filed disputes, in order (one filed twice once), and how many of
        them were recorded before (same id: skipped).

    Raises
    ------
    InputError
        The first row that breaks a rule of
        :func:`relgrade.protocol.disputes.check_dispute` (nothing is recorded); params name
        no disputes file; no row.
    StorageError
        The disk did not take the whole write (the file is as before).
    """
    from relgrade.canonical import jsonl_bytes
    from relgrade.graders.store import append_lines, now_utc
    from relgrade.protocol import grades

    path = ex.path("disputes")
    if not ex.path("pool").is_file():  # a dispute is on a pair of the pool: it must exist
        name = Path(ex.root).resolve().relative_to(ex.working_tree().resolve()).as_posix()
        target = "dvc.yaml:pool" if name in ("", ".") else f"{name}/dvc.yaml:pool"
        raise InputError("a dispute is on a pair of the pool, and the pool is not built yet",
                         path=ex.path("pool"),
                         fix=f"Run `dvc repro {target}` (at the repository's top) first")
    pool = io.read_table(ex.path("pool"), columns=["query_id", "chunk_id"])
    rules = dict(pool_pairs=grades.pool_pairs_of(pool), graders=list(ex.params.graders_dict()),
                 scale=ex.params.need("scale").grades, sections=current_sections(ex))
    lines = list(lines) if lines is not None else [None] * len(rows)
    filed = [dsp.check_dispute(r, source=source, line=n, **rules) for r, n in zip(rows, lines)]
    if not filed:
        raise InputError("no dispute to file", path=source)
    when = now_utc()
    version = str(ex.params.grading.rubric_version)
    new = [dsp.recorded(f, rubric_version=version, filed_at=when, via=via) for f in filed]
    have = set(read_disputes(ex)["id"])
    fresh, ids = [], list(dict.fromkeys(r["id"] for r in new))
    for r in new:
        if r["id"] in have:
            continue
        have.add(r["id"])
        fresh.append(r)
    if fresh:
        path.parent.mkdir(parents=True, exist_ok=True)
        append_lines(path, jsonl_bytes(fresh))
    return ids, len(ids) - len(fresh)


def chain(ex) -> list[tuple[str, rb.Rubric, str]]:
    """The rubric of params ``grading.rubric`` and every version it revises, newest first.

    Returns
    -------
    list of (str, Rubric, str)
        ``(sha256 of the file's bytes, the parsed rubric, the file relative to the
        experiment)``.

    Raises
    ------
    InputError
        One line naming the file: a revised file's version line is not the version its
        revision names; a revised version's file is missing; a revision names no
        section, an unknown section, misses one it changed or names one it did not
        (:func:`relgrade.protocol.rubric.check_revision`); a settled dispute is not recorded
        or the changelog does not name it; the chain loops.
    """
    path = ex.rubric_path()
    if not path.exists():
        raise InputError("rubric file not found", path=path, item="grading.rubric")
    out = []
    seen = set()
    want = None  # the head file's version line is the params' business; older ones are checked
    recorded = None
    while True:
        name = _rel(ex, path)
        text = io.read_utf8(path)
        r = rb.parse(text, source=name)
        if want is not None and r.version is not None and str(r.version) != str(want):
            raise InputError(f"the rubric's version line says {r.version}, the revision "
                             f"chain expects {want}", path=name, line=1, item="version")
        out.append((io.sha256_file(path), r, name))
        prev = r.front.get("revises")
        if not prev:
            break
        if prev in seen or len(out) > MAX_CHAIN:
            raise InputError("the rubric's revisions loop", path=name, item="revises",
                             found=prev)
        seen.add(prev)
        older = path.parent / f"{prev}.md"
        if not older.exists():
            raise InputError(f"the revised rubric {prev} is kept beside its revision",
                             path=name, item="revises", found=f"no {_rel(ex, older)}",
                             fix=f"Keep the {prev} file in git (a grade made under it is "
                                 "judged against it)")
        rb.check_revision(rb.parse(io.read_utf8(older), source=_rel(ex, older)), r,
                          source=name, old_source=_rel(ex, older))
        if r.front.get("settles"):
            recorded = read_disputes(ex) if recorded is None else recorded
            _check_settles(ex, r, name, path.parent / "CHANGELOG.md", recorded)
        path, want = older, prev
    return out


def _check_settles(ex, r: rb.Rubric, name: str, changelog: Path, recorded) -> None:
    ids = set(recorded["id"])
    unknown = [d for d in r.front["settles"] if d not in ids]
    if unknown:
        raise InputError("a rubric revision settles only recorded disputes", path=name,
                         item="settles", found=", ".join(unknown),
                         fix="List the ids `relgrade disputes` prints")
    entry = _changelog_entry(changelog, str(r.version)) if changelog.exists() else None
    if entry is None:
        raise InputError(f"the revision log has an entry `## {r.version}` naming the disputes "
                         "it settles", path=_rel(ex, changelog), item=str(r.version),
                         fix=f"Add `## {r.version}` with what changed and why")
    missing = [d for d in r.front["settles"] if d not in entry]
    if missing:
        raise InputError(f"the revision log's entry for {r.version} names the disputes the "
                         "revision settles", path=_rel(ex, changelog), item=str(r.version),
                         found="not named: " + ", ".join(missing))


def _changelog_entry(path: Path, version: str) -> str | None:
    """The text of the changelog's ``## VERSION`` entry (up to the next ``## ``)."""
    text = io.read_utf8(path)
    m = re.search(rf"^## {re.escape(version)}\b.*?(?=^## |\Z)", text, flags=re.M | re.S)
    return None if m is None else m.group(0)


def _rel(ex, path: Path) -> str:
    try:
        return Path(path).relative_to(ex.root).as_posix()
    except ValueError:
        return Path(path).as_posix()


def carry(ex) -> rb.Carry:
    """What the experiment's earlier rubrics carry over (:func:`relgrade.protocol.rubric.carry`),
    with the disputes on record: their sections count as named by every grade of their pair.

    Raises
    ------
    InputError
        As :func:`chain`.
    """
    found = chain(ex)
    c = rb.carry(found)
    return c.with_disputes(read_disputes(ex)) if c.touched else c


def carried_check(ex):
    """For a grade store (:class:`relgrade.graders.store.GradeStore`'s ``carried``): whether
    a recorded grade made under an earlier rubric is still current; None when the rubric
    revises none (then any other rubric is outdated, as :func:`carry` would say too).

    Raises
    ------
    InputError
        As :func:`chain`.
    """
    c = carry(ex)
    if not c.touched:
        return None

    def carried(row: dict, made: dict) -> bool:
        one = pd.DataFrame({"query_id": [str(row.get("query_id"))],
                            "chunk_id": [str(row.get("chunk_id"))],
                            "reason": [str(row.get("reason") or "")],
                            "rubric_sha256": [str(made.get("rubric_sha256"))]})
        return bool(c.carried(one).iat[0])

    return carried
