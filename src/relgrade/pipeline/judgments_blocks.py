"""The grades stage's table a block of whole queries at a time, for the common round.

:func:`relgrade.pipeline.judgments.judgments` reads every grader's round into one judgment
bank and :func:`relgrade.protocol.grades.current_table` makes it current over the whole
pool: memory grows with the bank. In the common case (one round, nothing shared from other
experiments, no triage or rater panel) every rule of both holds query by query, so
:func:`grades_by_blocks` walks the pool (written in query order) and each grader's round
file and sidecar (:class:`relgrade.protocol.bank_blocks.QueryCursor`) together, a block of
whole queries at a time. Per block it builds the bank's rows of those queries, today's
hashes of their chunks and queries (:class:`relgrade.experiment.made_on.MadeOnNow`), the
pending work and the current grades by the same functions as the whole path, and writes the
block's sorted grades rows; the manifest's counts are summed block by block.

Nothing is worded here. Whenever the block path cannot answer as the whole path would (a
file out of query order, a rule broken, a reader's refusal, work still owed, anything it
does not handle) it returns None before anything is written, and the stage runs the whole
path, which words every error and note as before.
"""

from __future__ import annotations

import pandas as pd

from relgrade.errors import InputError
from relgrade.experiment import revisions
from relgrade.experiment.made_on import MadeOnNow
from relgrade.io import files as io
from relgrade.io.batches import iter_query_blocks
from relgrade.pipeline.judgments import (Judgments, judgment_counts, judgments_made_of,
                                         others_pending, pending_status, round_modes)
from relgrade.protocol import bank, bank_blocks, bank_columns, grades, regrade
from relgrade.schema import PENDING


class _Whole(Exception):
    """The block path cannot answer: the whole path must."""


def eligible(ex) -> bool:
    """Whether the round is one the block path handles: one round merged (no partial
    regrade), no grades shared from other experiments, neither triage nor a rater panel.

    Parameters
    ----------
    ex : relgrade.experiment.files.Experiment

    Returns
    -------
    bool
    """
    grading = ex.params.grading
    if grading.mode in ("triage", "raters") or grading.share_from:
        return False
    current = int(grading.round)
    return regrade.round_chain(current, round_modes(ex, range(1, current + 1))) == [current]


#: Pool rows read at a time (each block then grows to its last query's end).
BLOCK_ROWS = 1 << 16


def grades_by_blocks(ex, out, *, audit_ids, intents_sha256,
                     rows: int = BLOCK_ROWS) -> dict | None:
    """The grades table of the current pool written a block of whole queries at a time.

    Parameters
    ----------
    ex : relgrade.experiment.files.Experiment
        The experiment (:func:`eligible`).
    out : pathlib.Path
        The grades table to write (Parquet, the bytes
        :func:`relgrade.protocol.grades.current_table`'s sorted table is written as).
    audit_ids : iterable of str
        The locked audit sample.
    intents_sha256 : str or None
        The frozen intent table's hash, for the manifest.
    rows : int, optional
        Pool rows read at a time (:func:`relgrade.io.batches.iter_query_blocks`).

    Returns
    -------
    dict or None
        The grades manifest, as the whole path makes it: the manifest of
        :func:`relgrade.protocol.grades.current_table` with ``judging``
        (:func:`relgrade.pipeline.judgments.judgment_counts`). None, with ``out`` left as
        it was, when the whole path must answer.
    """
    try:
        return _by_blocks(ex, out, audit_ids=audit_ids, intents_sha256=intents_sha256,
                          rows=rows)[0]
    except (_Whole, InputError):
        return None


def judgments_by_blocks(ex, *, audit_ids, visit,
                        rows: int = BLOCK_ROWS) -> tuple[Judgments, pd.DataFrame] | None:
    """The common round's judgments read a block of whole queries at a time, for counting
    (``relgrade status``): nothing is written.

    Parameters
    ----------
    ex : relgrade.experiment.files.Experiment
        The experiment (:func:`eligible`).
    audit_ids : iterable of str
        The locked audit sample.
    visit : callable
        ``visit(pool, table)``, called once per block in query order: ``pool`` the block's
        pool rows (``query_id``, ``chunk_id``), ``table`` its current grades
        (:func:`relgrade.protocol.grades.current_table`'s rows of those queries).
    rows : int, optional
        Pool rows read at a time.

    Returns
    -------
    (Judgments, pandas.DataFrame) or None
        The round's judgments without the bank (``pending`` empty, ``made``,
        ``made_by_round``, ``others_pending``, ``files`` names) and a table of one
        ``grader`` column, a row per current grade (what
        :func:`relgrade.pipeline.judgments.pending_status` counts); None when the whole path
        must answer (as :func:`grades_by_blocks`, also when any work is owed).
    """
    try:
        _, held, table = _by_blocks(ex, None, audit_ids=audit_ids, intents_sha256=None,
                                    rows=rows, visit=visit)
    except (_Whole, InputError):
        return None
    return held, table


class _NoWriter:
    """Where the blocks go when nothing is written."""

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False

    def write(self, table) -> None:
        pass


def _by_blocks(ex, out, *, audit_ids, intents_sha256, rows, visit=None):
    grading = ex.params.grading
    current = int(grading.round)
    graders = ex.params.graders_dict()
    round_files = ex.grader_round_files(current)
    if any(name not in graders for name in round_files):
        raise _Whole  # the whole path refuses the file
    made_on = MadeOnNow.load(ex)
    if made_on is None:
        raise _Whole
    scale = ex.params.need("scale").grades
    rules = dict(scale=scale, max_reason_words=grading.max_reason_words,
                 max_reason_chars=grading.max_reason_chars,
                 reasonless_formats=grades.REASONLESS_FORMATS)
    files, cursors = {}, {}
    for name, f in round_files.items():
        gf = ex.grader_file(f)
        if gf.blocks is None:
            raise _Whole
        files[name] = gf
        cursors[name] = bank_blocks.QueryCursor(gf.blocks, spec=graders[name], **rules)
    fixed = dict(rubric_sha256=made_on.rubric["rubric_sha256"],
                 rubric_version=grading.rubric_version, carry=revisions.carry(ex))
    key_grader = ex.params.need("grading.key_grader")
    auditor = ex.params.need("grading.auditor")
    audit = sorted({str(q) for q in audit_ids})
    entries: dict[str, dict] = {}
    others, counts, rounds = [], {name: 0 for name in sorted(graders)}, set()
    n_pairs = 0
    sink = _NoWriter() if out is None else io.ParquetBlocks(out)
    with sink as writer:  # an exception leaves ``out`` as it was
        for pool in iter_query_blocks(ex.path("pool"), ["query_id", "chunk_id"], rows=rows,
                                      writer="the pool stage"):
            if not len(pool):
                continue
            judged = _block_bank(cursors, str(pool["query_id"].iloc[-1]), current=current)
            if judged is None:
                raise _Whole
            now = {**made_on.series_for(judged["query_id"].unique(),
                                        judged["chunk_id"].unique()), **fixed}
            owed = bank.pending_work(pool, judged, key_grader=key_grader, auditor=auditor,
                                     audit_ids=audit, **now)
            if len(owed):
                raise _Whole  # the stage stops (or notes the audit): the whole path words it
            others.append(others_pending(ex, judged, pool, audit, now=now, regrade=None,
                                         key_pairs=None, skip={key_grader, auditor, None}))
            table, manifest = grades.current_table(
                judged, graders=graders, pool=pool, audit_query_ids=audit, round=current,
                intents_sha256=intents_sha256, files=files, **now)
            del judged
            for name, entry in manifest["graders"].items():
                entries[name] = bank_blocks.sum_entries(entries.get(name, {}), entry)
            rounds.update(manifest["rounds"])
            n_pairs += manifest["pool_pairs"]
            for name, n in table["grader"].value_counts().items():
                counts[str(name)] += int(n)
            if visit is not None:
                visit(pool, table)
            if len(table):
                writer.write(table)
            del table
        # the rows of queries after the pool's last: checked, counted, unused
        judged = _block_bank(cursors, None, current=current)
        if judged is None or not sum(counts.values()):
            raise _Whole
        for name, n in judged["grader"].value_counts().items():
            entries[str(name)]["bank_rows"] += int(n)
            entries[str(name)]["unused"] += int(n)
        rounds.update(int(r) for r in judged["round"].unique())
        del judged
        made = {(name, current): c.rows for name, c in cursors.items()}
        made_by_round = judgments_made_of(ex, made, rounds=[current])
        manifest = {"rubric_version": grading.rubric_version,
                    "rubric_sha256": fixed["rubric_sha256"], "round": current,
                    "rounds": sorted(rounds), "intents_sha256": intents_sha256,
                    "pool_pairs": n_pairs,
                    "graders": {n: entries[n] for n in sorted(graders)}}
        held = Judgments(
            bank=None, files={n: None for n in files}, rounds=[current], scope=None, now={},
            pending=pd.DataFrame(columns=PENDING), round_pairs=None,
            others_pending=pd.concat([pd.DataFrame(columns=PENDING), *others],
                                     ignore_index=True),
            made={g: sum(r.values()) for g, r in made_by_round.items()},
            made_by_round=made_by_round)
        names = list(counts)
        table = pd.DataFrame({"grader": pd.Categorical.from_codes(
            bank_blocks.grader_codes(names, [counts[n] for n in names]), categories=names)})
        # what each grader made and owes, counted as `relgrade status` counts it
        if out is not None:
            manifest["judging"] = judgment_counts(pending_status(ex, held=held, table=table,
                                                                 adjudication=False))
    return manifest, held, table


def _block_bank(cursors, last, *, current) -> pd.DataFrame | None:
    """The judgment bank's rows of every query up to ``last`` (all left when None), graders
    in name order, as :func:`relgrade.protocol.grades.judgment_bank` holds them; None when a
    cursor broke or a rule spanning a pair's rows is broken."""
    parts = []
    for name in sorted(cursors):
        got = cursors[name].upto(last)
        if got is None:
            return None
        rows, lines, first = got
        if not rows.num_rows:
            continue
        part = bank_columns.bank_frame(rows, lines, name=name, round=current, first=first)
        if part is None:
            return None
        parts.append(part)
    if not parts:
        return grades.judgment_bank({}, graders={}, scale=[], max_reason_words=0)
    return bank_columns.concat_bank(parts)
