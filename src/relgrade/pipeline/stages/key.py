"""Stage `key`: after a passed gate, freeze the key grader's grades as the hashed key.

Refuses (nothing written) when the gate has not passed, when the ledger lacks a use of a
key that metrics files show (deleted, truncated or edited ledger), when a round-N grade
file is a copy of round N-1, and when the key is void (a different key was already used
for metrics on the same pool, rubric and round, and params neither raise the round nor
allow a post-hoc key). A key that differs from the frozen one only on pairs whose chunk,
intent line or rubric changed since is a revision: frozen in its place, its record naming
the pairs regraded and the content they were regraded on.

Writes the key, its qrels and its record as one unit: the record last, holding the sha256
of the other two, so a process killed between the writes leaves files every reader
refuses, never a silent mix. A post-hoc key (``grading.post_hoc: true`` and a changed key)
is written beside the frozen one, in ``paths.key_post_hoc`` (one folder swap); the frozen
key, its metrics and the decision stay in place.

In triage mode (``grading.mode: triage``) the key is the people's grade of every pair in
their triage queue and the model's 0 everywhere else; the record holds the triage design,
its counts and the model's miss rate on 0s with its interval, and ``paths.triage_key`` says
who graded each pair and with which inclusion probability.

When a new frozen key replaces one that metrics used (a new pool version or query set, a
new round, a revision), the replaced key's four files are first copied, as one folder swap,
to ``paths.key_previous``: the report scores every arm under both keys for this one cycle,
and the next replacement drops it. Without such a key the folder holds a note.

With params ``grading.share_from``, the record's ``shared`` section names, per source
experiment, the pairs reused per grader and how many key pairs' grades came from it.
"""

import shutil
from datetime import datetime, timezone
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa

from relgrade.errors import InputError, ProtocolError
from relgrade.experiment.layout import stage_path
from relgrade.experiment.progress import QUIET_SECONDS, step_printer
from relgrade.io import files as io
from relgrade.graders.cache import (NOT_RECORDED, TEMPLATE_FIELDS,
                                    TEMPLATE_NOT_RECORDED, judge_counts, template_counts)
from relgrade.io.grade_columns import bank_blocks, read_grade_columns
from relgrade.io.trec import check_qrels_ids, qrels_lines, write_trec_qrels
from relgrade.pipeline.memory import arrow_from_jemalloc
from relgrade.experiment.key_blocks import KeyBlocks, NotInBlocks
from relgrade.protocol.key_blocks import KeyDigest, latest_value_counts
from relgrade.protocol import corrections as corrections_mod
from relgrade.experiment import revisions
from relgrade.protocol import key, ledger, triage
from relgrade.protocol import rubric as rubric_mod

#: What the post-hoc folder holds while no post-hoc key stands beside the frozen one.
NO_POST_HOC = ("No post-hoc key: the frozen key ({frozen}) is the only key of pool {pool}, "
               "rubric {rubric}, round {round}.\n")


def _check_rounds(ex, grades_manifest, rnd):
    """Refuse a round-N grade file copied from the same grader's round N-1."""
    if rnd < 2:
        return
    for name, entry in sorted(grades_manifest.get("graders", {}).items()):
        now, before = ex.grader_files(name, rnd), ex.grader_files(name, rnd - 1)
        if not entry.get("file") or not now.grades.exists() or not before.grades.exists():
            continue
        meta = io.read_json(now.meta) if now.meta.exists() else None
        if not ledger.round_to_check(rnd, meta):
            continue  # the sidecar records the round: neither file is read
        identical = io.sha256_file(now.grades) == io.sha256_file(before.grades)
        rows, previous = _reasons(now.grades), _reasons(before.grades)
        if rows is None or previous is None:  # a file only the row reader reads
            rows, previous = io.read_jsonl(now.grades), io.read_jsonl(before.grades)
        ledger.check_fresh_round(
            rows, previous, round=rnd, identical=identical, meta=meta, grader=name,
            source=now.grades.as_posix(), previous_source=before.grades.as_posix())


def _reasons(path):
    """A grade file's ``query_id``, ``chunk_id`` and ``reason`` as string columns (Arrow's
    reader, no line hashes), or None when the column reader leaves the file to the rows."""
    table = read_grade_columns(path, digests=False)
    if table is None:
        return None
    return table.select(["query_id", "chunk_id", "reason"]).to_pandas(
        types_mapper={pa.string(): pd.StringDtype("pyarrow", na_value=np.nan)}.get)


def _provenance(ex, gate, qrels_sha256):
    rubric = ex.params.grading.rubric
    rubric_path = ex.file(rubric) if rubric else None
    lock = getattr(ex.params.paths, "audit_lock", None)
    lock_path = ex.file(lock) if lock else None
    out = _provenance_of(ex, gate, qrels_sha256, rubric_path, lock_path)
    chain = revisions.carry(ex) if rubric_path is not None and rubric_path.exists() else None
    if chain is not None and chain.revisions:  # the rubric's revisions since the first: changes, disputes settled
        out["rubric_revisions"] = rubric_mod.revision_record(chain)
    return out


def _provenance_of(ex, gate, qrels_sha256, rubric_path, lock_path):
    # the prompt template(s) the grades were made with, as their bank lines name them: not
    # the template file now, which a grade made before an edit of it never saw
    judges, templates = _judges_and_templates(ex)
    template, note = key.grades_template(templates, not_recorded=TEMPLATE_NOT_RECORDED)
    out = key.record_provenance(
        qrels_sha256=qrels_sha256,
        rubric_sha256=io.sha256_file(rubric_path) if rubric_path and rubric_path.exists() else None,
        prompt_template_sha256=template, prompt_templates=templates,
        prompt_template_note=note,
        graders=ex.params.graders_dict(), gate=gate,
        audit_lock_sha256=io.sha256_file(lock_path) if lock_path and lock_path.exists() else None,
        judges=judges)
    _commands_that_made(ex, out)
    return out


def _commands_that_made(ex, record):
    """Make ``record["grader_commands"]`` name the commands that made the key's grades.

    A model grader's command in params may have changed since its grades were made (a judge
    swapped after the key was frozen): its judge identity now is then none of those in
    ``record["judges"]``. Its entry keeps the standing record's command when that record
    counts the same grades per identity, else it is None and ``grader_commands_note`` says
    what params name now. In place; ``record`` as :func:`relgrade.protocol.key.record_provenance`
    returns it."""
    judges = record.get("judges") or {}
    commands = record["grader_commands"]
    swapped = {}
    for name, counts in judges.items():
        if commands.get(name) is None:
            continue
        from relgrade.experiment.judges import current_judge
        try:
            now = current_judge(ex, name)
        except InputError:
            continue  # a command whose files cannot be read now: grade run names that
        if now not in counts:
            swapped[name] = now
    if not swapped:
        return
    standing = ex.key_files().record
    try:
        old = io.read_json(standing) if standing.exists() else {}
    except InputError:
        old = {}
    notes = {}
    for name, now in swapped.items():
        before = (old.get("grader_commands") or {}).get(name)
        if before is not None and (old.get("judges") or {}).get(name) == judges[name]:
            commands[name] = before
            continue
        notes[name] = (f"params now name {commands[name]!r} (judge {now[:12]}), which made "
                       "none of the key's grades; the command that made them is not known "
                       "here (see params.yaml's git history)")
        commands[name] = None
    if notes:
        record["grader_commands_note"] = notes


def _judges_and_templates(ex):
    """From each grader's bank sidecar, read once: per grader whose bank names a judge
    identity, the round's grades per identity (None without ``grades_in``); and per model
    grader whose grades make the key (not an auditor; ``kind: model`` in params, or a bank
    naming a judge identity), its grades per prompt template sha256. A model grader whose
    grades have no bank sidecar names no template."""
    if not ex.params.paths.grades_in:
        return None, {}
    graders = ex.params.graders
    judges, templates = {}, {}
    for name, files in ex.grader_round_files().items():
        counts = _bank_counts(files)
        if counts is None:  # the sidecar whole (or the grade file's rows), as before
            bank = ex.bank_table(files, TEMPLATE_FIELDS)
            counts = {"judge": judge_counts(bank), "template_sha256": template_counts(bank)}
        judges[name] = counts["judge"]
        named = set(judges[name]) - {NOT_RECORDED}
        if name in graders and graders[name].role == "auditor":
            continue  # the auditor's grades are compared with the key, never part of it
        if (name in graders and graders[name].kind == "model") or named:
            templates[name] = counts["template_sha256"] or {TEMPLATE_NOT_RECORDED: 0}
    return {k: v for k, v in judges.items() if set(v) - {NOT_RECORDED}}, templates


def _bank_counts(files):
    """A grader's grades per judge identity and per prompt template
    (:func:`judge_counts`, :func:`template_counts`) from its bank sidecar read a block at a
    time, holding a hash per line and a count per value; None when the whole sidecar must be
    counted (no sidecar, one the column reader refuses, a pair on two lines)."""
    if not files.bank.is_file():
        return None
    # the three fields counted (and the pair), as the whole count reads them: not every field
    blocks = bank_blocks(files.bank, fields=TEMPLATE_FIELDS)
    if blocks is None:
        return None
    return latest_value_counts(blocks, {"judge": NOT_RECORDED,
                                        "template_sha256": TEMPLATE_NOT_RECORDED})


def _write(files, table, record, gate, ex, made_on):
    """Key, qrels and made-on table, then the record holding their hashes (written last).
    ``table`` is the key whole, or its blocks (:class:`KeyBlocks`: the three files written
    together, a block at a time)."""
    if isinstance(table, KeyBlocks):
        _write_blocks(files, table)
    else:
        _write_whole(files, table, made_on)
    record |= _provenance(ex, gate, io.sha256_file(files.qrels))
    if files.made_on is not None:
        record["made_on_sha256"] = io.sha256_file(files.made_on)
    io.write_json(files.record, record)
    return record


def _write_blocks(files, blocks):
    """The key's, qrels' and made-on file's lines, each block's as it is made."""
    paths = [files.key, files.qrels] + ([files.made_on] if files.made_on is not None else [])

    def lines():
        for block in blocks:
            out = [key.key_lines(block.table), qrels_lines(block.table, files.qrels)]
            if files.made_on is not None:
                out.append(key.made_on_lines(block.table, block.made_on))
            yield out
    io.write_blocks_together(paths, lines())


def _write_whole(files, table, made_on):
    io.write_bytes(files.key, key.key_bytes(table))
    write_trec_qrels(files.qrels, key.qrels_frame(table))
    if files.made_on is not None:
        io.write_blocks(files.made_on, key.made_on_blocks(table, made_on))


NO_PREVIOUS = ("No previous key: the frozen key ({frozen}) of pool {pool} replaced no key "
               "that metrics used.\n")
#: The note kept beside a previous key (the folder's README.md stays in git either way).
PREVIOUS = ("The previous key ({previous}): the frozen key that metrics used before the key "
            "that replaced it; kept one cycle for the report's translation.\n")
#: The note kept beside a post-hoc key.
POST_HOC = ("A post-hoc key ({post_hoc}) beside the frozen key ({frozen}) of pool {pool}, "
            "rubric {rubric}, round {round}: every number made with it is labelled post-hoc.\n")
POST_HOC_ALONE = ("A post-hoc key ({post_hoc}) of pool {pool}, rubric {rubric}, round {round} "
                  "(params grading.post_hoc): every number made with it is labelled "
                  "post-hoc.\n")


def _keep_previous(ex, key_sha256, used):
    """Copy the standing frozen key to ``paths.key_previous`` (one folder swap) when the key
    ``key_sha256`` is about to replace it and the ledger shows metrics used it; the key kept
    there before is dropped. Returns the replaced key's hash, or None."""
    if not getattr(ex.params.paths, "key_previous", None):
        return None
    files = ex.key_files()
    if not files.record.exists():
        return None
    try:
        _, old = ex.checked_key()  # the hashes first: a rerun's key is the standing one
        old_sha256 = old.get("key_sha256")
        if old_sha256 == key_sha256 or not any(e.get("key_sha256") == old_sha256
                                               for e in used):
            return None
        ex.read_key()  # a key kept as a reference must read as one
    except (InputError, ProtocolError):
        return None  # a torn key is rewritten, never kept as a reference
    kept = ex.key_files(previous=True)
    with io.atomic_dir(ex.path("key_previous")) as tmp:
        for name in ("key", "qrels", "made_on", "record"):
            source = getattr(files, name)
            if source is not None and source.exists():
                shutil.copyfile(source, tmp / getattr(kept, name).name)
        io.write_text(tmp / "README.md", PREVIOUS.format(previous=old_sha256))
    return old_sha256


def _note_previous(ex, record):
    """Leave a note in ``paths.key_previous`` when it holds no previous key."""
    if not getattr(ex.params.paths, "key_previous", None):
        return
    folder = ex.path("key_previous")
    if ex.key_files(previous=True).record.exists() or (folder / "README.md").exists():
        return
    with io.atomic_dir(folder) as tmp:
        io.write_text(tmp / "README.md", NO_PREVIOUS.format(frozen=record["key_sha256"],
                                                          pool=record["pool_version"]))


def _frozen_at(ex, key_sha256, *, post_hoc):
    """When this key was first frozen: the standing record's time when it holds the same
    key (a rerun re-freezes nothing), else now."""
    files = ex.key_files(post_hoc=post_hoc)
    if files.record.exists():
        try:
            old = io.read_json(files.record)
        except InputError:
            old = None
        if isinstance(old, dict) and old.get("key_sha256") == key_sha256 and old.get("frozen_at"):
            return str(old["frozen_at"])
    return datetime.now(timezone.utc).isoformat(timespec="seconds")


def _made_on(ex, table):
    """What each key pair's grade was made on: the grades stage let only current grades
    through, so that is the chunk, intent line and rubric as they are now."""
    return ex.made_on_now_table(table[["query_id", "chunk_id"]])


def _revision(ex, table, made_on):
    """The frozen key's hash when ``table`` differs from it only on pairs graded on changed
    content (a revision), with the pairs; else (None, None)."""
    files = ex.key_files()
    if not files.record.exists() or not files.key.exists():
        return None, None
    try:
        old_made_on = ex.read_key_made_on()
        if old_made_on is None:
            return None, None
        old, record = ex.read_key()
    except ProtocolError:
        # a torn frozen key (killed between its writes) is rewritten by this stage; it cannot
        # vouch for a revision, so the ledger alone decides
        return None, None
    regraded = key.revision_pairs(key.content_revision(old, old_made_on, table, made_on))
    if regraded is None:
        return None, None
    return record["key_sha256"], regraded


def _clear_post_hoc(ex, record):
    """Leave a note in the post-hoc folder unless it holds a post-hoc key of this frozen key's
    pool, rubric and round (a post-hoc key of an earlier one no longer stands beside it)."""
    if not getattr(ex.params.paths, "key_post_hoc", None):
        return
    folder = ex.path("key_post_hoc")
    files = ex.key_files(post_hoc=True)
    if files.record.exists():
        old = io.read_json(files.record)
        if all(str(old.get(k)) == str(record[k])
               for k in ("pool_version", "rubric_version", "round")):
            return
    elif (folder / "README.md").exists():
        return
    with io.atomic_dir(folder) as tmp:
        io.write_text(tmp / "README.md", NO_POST_HOC.format(
            frozen=record["key_sha256"], pool=record["pool_version"],
            rubric=record["rubric_version"], round=record["round"]))


def _triage(ex, grades_table):
    """Triage mode: the people's grades merged with the model's unsampled 0s (as the key
    grader's rows, which build_key reads), the design with the miss rate, and who graded
    each pair with its inclusion probability."""
    p, grading = ex.params, ex.params.grading
    people_name, model_name = p.need("grading.key_grader"), p.triage_grader_name()
    path = ex.path("triage_queue")
    queue = triage.typed_queue(io.read_table(path), path=path)
    now = grades_table[grades_table["round"].astype("int64") == int(grading.round)]
    people = now[now["grader"].astype(str) == people_name][["query_id", "chunk_id", "grade"]]
    merged = triage.merge_key(queue, people, model_grader=model_name, people_grader=people_name)
    rate = triage.miss_rate(queue, people, relevant_min=p.need("scale").relevant_min,
                            level=p.need("triage").level)
    design = triage.design_record(model_grader=model_name, people_grader=people_name,
                                  zero_sample=p.need("triage").zero_sample,
                                  seed=p.need("seed"), round=grading.round, rate=rate)
    rows = merged.assign(grader=people_name, round=int(grading.round))
    provenance = merged.merge(queue[["query_id", "chunk_id", "inclusion_probability"]],
                              on=["query_id", "chunk_id"], how="left")
    print(rate.line())
    return rows[["query_id", "chunk_id", "grader", "round", "grade"]], design, provenance


def _shared(ex, shared, grades_table, table):
    """The record's ``shared`` section: per source (as params ``grading.share_from`` names
    it), the pairs reused per grader (from the grades manifest) and the key pairs whose
    grade came from it."""
    key_grader = ex.params.need("grading.key_grader")
    rows = grades_table[grades_table["grader"].astype(str) == key_grader]
    if "origin" not in rows.columns:  # triage: the key rows are the people's, rebuilt
        rows = rows.assign(origin="")
    pairs = table[["query_id", "chunk_id"]].astype(str).merge(
        rows[["query_id", "chunk_id", "origin"]].astype(str), on=["query_id", "chunk_id"],
        how="left")
    return {entry: {**section, "key_pairs": int((pairs["origin"] == entry).sum())}
            for entry, section in shared.items()}


def _ppi_design(ex, gate):
    """The prediction-powered design the key serves: who grades what, the locked human
    sample, and how the gate treated agreement."""
    lock = io.read_json(ex.path("audit_lock"))
    p = ex.params
    return {"key_grader": p.need("grading.key_grader"), "human_grader": p.need("grading.auditor"),
            "key_is": "the model grader's grades of every pool pair; people's grades of the "
                      "human sample rectify the estimates in the ppi stage",
            "human_sample": [str(q["query_id"]) for q in lock["queries"]],
            "human_fraction": p.need("ppi").human_fraction,
            "human_queries": p.need("ppi").human_queries, "seed": p.need("seed"),
            "sample_lock_sha256": lock["sha256"],
            "gate": (gate or {}).get("note"),
            "agreement_not_applied": [x for x in (gate or {}).get("relaxed_gates", [])
                                      if x.startswith("not applied in ppi mode")]}


def run(ex):
    # the key is made twice a block at a time (hashed, then written) and the sidecar
    # counted by blocks: Arrow's default pool would keep much of what they free
    with arrow_from_jemalloc():
        _run(ex)


def _run(ex):
    gate_path, grading = ex.path("gate"), ex.params.grading
    step = step_printer("key", 3, quiet=QUIET_SECONDS)
    step("the key from the key grader's grades")
    rubric_version = ex.params.need("grading.rubric_version")
    gate = io.read_json(gate_path) if gate_path.exists() else None
    key.require_gate(gate, source=gate_path)
    manifests = {name: io.read_json(ex.path(f"{name}_manifest"))
                 for name in ("corpus", "queries", "intents", "pool", "grades")}
    blocked = _key_in_blocks(ex, manifests)
    grades_table = design = provenance = made_on = None
    if blocked is not None:  # the usual case: the key made a block of whole queries at a time
        table, totals, dropped = blocked.blocks, blocked.totals, blocked.dropped
        step("the ledger, the rounds and what the key revises")
        used = ex.ledger()
        _check_rounds(ex, manifests["grades"], grading.round)
        revises, regraded = blocked.revision(ex)
    else:
        table, dropped, grades_table, design, provenance = _whole_key(ex, manifests)
        step("the ledger, the rounds and what the key revises")
        used = ex.ledger()
        _check_rounds(ex, manifests["grades"], grading.round)
        made_on = _made_on(ex, table)
        revises, regraded = _revision(ex, table, made_on)
        pa.default_memory_pool().release_unused()  # the frozen key's and the comparison's
        totals = key.KeyTotals(key.key_sha256(table), int(len(table)),
                               int(table["query_id"].nunique()))
    status = ledger.check_void(used, pool_version=manifests["pool"]["pool_version"],
                               rubric_version=rubric_version, round=grading.round,
                               key_sha256=totals.sha256, post_hoc=grading.post_hoc,
                               revises=revises)
    record = key.build_record(
        totals, frozen_at=_frozen_at(ex, totals.sha256, post_hoc=status == ledger.POST_HOC),
        rubric_version=rubric_version, round=grading.round, manifests=manifests,
        pool_sha256=io.sha256_file(ex.path("pool")), dropped_queries=dropped,
        post_hoc=status == ledger.POST_HOC, deviations=grading.deviations)
    if "shared" in manifests["grades"]:  # grades reused from other experiments' banks
        record["shared"] = _shared(ex, manifests["grades"]["shared"], grades_table, table)
    if manifests["grades"].get("regrade"):  # a partial regrade: the rounds merged
        record["regrade"] = manifests["grades"]["regrade"]
    if design is not None:  # who graded each key row, beside the key; its hash in the record
        io.write_tsv(ex.path("triage_key"), provenance)
        record["triage"] = design | {"provenance_sha256": io.sha256_file(ex.path("triage_key"))}
    if grading.mode == "ppi":  # the key is the model's; the human sample and the gate's rule
        record["ppi"] = _ppi_design(ex, gate)
    if status == ledger.REVISED:
        # the pairs regraded because what they show changed, with the content now graded
        record |= {"revises": revises, "regraded": regraded}
    step("writing the key, the qrels and the record")
    corrections = _corrections(ex)
    if status == ledger.POST_HOC:
        record, where = _write_post_hoc(ex, table, record, gate, made_on, corrections)
    else:
        replaced = _keep_previous(ex, record["key_sha256"], used)
        record = _write(ex.key_files(), table, record, gate, ex, made_on)
        _note_previous(ex, record)
        where = f"in {stage_path(ex, ex.path('key'))}"
        if replaced:
            where += (f"; the key it replaced, {replaced}, kept in "
                      f"{stage_path(ex, ex.path('key_previous'))}")
        if corrections:  # the frozen key stands; the corrected one beside it, post-hoc
            _, beside = _write_post_hoc(ex, table, dict(record), gate, made_on, corrections,
                                        frozen=record["key_sha256"])
            where += f"; {beside}"
        else:
            _clear_post_hoc(ex, record)
    print(f"key {record['key_sha256']} ({status}) {where}: {record['pairs']} pairs, "
          f"{record['queries']} queries, dropped {', '.join(dropped) or 'none'}")


def _whole_key(ex, manifests):
    """The key built whole from the grades table (the path for triage, shared grades,
    corrections, and wherever the blocks do not hold): the key, its dropped queries, the
    grades table (kept only for the shared counts) and triage's design and provenance."""
    grading = ex.params.grading
    if "shared" in manifests["grades"]:  # the shared counts read each row's origin too
        grades_table = io.read_table(ex.path("grades"))
    else:  # the columns the key and triage read: not the reasons
        grades_table = io.read_table(ex.path("grades"), only=True, columns=[
            "query_id", "chunk_id", "grader", "round", "grade"])
    design, provenance = None, None
    if grading.mode == "triage":
        grades_table, design, provenance = _triage(ex, grades_table)
    table, dropped = key.build_key(
        grades_table, key_grader=ex.params.need("grading.key_grader"),
        round=grading.round,
        pool=io.read_table(ex.path("pool"), columns=["query_id", "chunk_id"], only=True),
        relevant_min=ex.params.need("scale").relevant_min, source=ex.path("grades"))
    if "shared" not in manifests["grades"]:
        grades_table = None  # read again by nothing below
    pa.default_memory_pool().release_unused()  # the grades' and the joins' blocks
    return table, dropped, grades_table, design, provenance


class _Blocked:
    """The key made a block at a time (:class:`KeyBlocks`), hashed and counted, with how it
    stands against the frozen key."""

    def __init__(self, blocks, totals, dropped, compared):
        self.blocks, self.totals, self.dropped = blocks, totals, dropped
        self._compared = compared  # None (nothing to compare), True (same bytes), an error

    def revision(self, ex):
        """What :func:`_revision` says of this key: (None, None) when there is no frozen
        key to compare with or it is this key byte for byte (its made-on file too); else
        the frozen key is compared whole, as before."""
        if isinstance(self._compared, Exception):
            raise self._compared  # the frozen key's record unreadable: where _revision met it
        if self._compared is None or self._compared is True:
            return None, None
        table = key.qrels_frame(pa.concat_tables([b.table for b in self.blocks]).to_pandas())
        return _revision(ex, table, _made_on(ex, table))


def _key_in_blocks(ex, manifests):
    """The key made, hashed and compared with the frozen one a block of whole queries at a
    time, as a :class:`_Blocked`; None when the whole path must build it: triage, grades
    shared from other experiments, post-hoc corrections, a table out of query order, or
    anything the whole path refuses (it words the error)."""
    grading = ex.params.grading
    files = ex.key_files()
    if grading.mode == "triage" or "shared" in manifests["grades"] or files.qrels is None \
            or ex.grader_files(ex.params.need("grading.key_grader")).corrections.exists():
        return None
    blocks = KeyBlocks.open(ex)
    if blocks is None:
        return None
    try:
        standing = _standing(ex)
    except InputError as e:
        standing = e
    streams = standing if isinstance(standing, tuple) else ()
    digest = KeyDigest()
    try:
        for block in blocks:
            lines = digest.add(block.table, block.dropped)
            made = key.made_on_lines(block.table, block.made_on)
            check_qrels_ids(block.table, files.qrels)
            if streams:
                streams[0].take(lines)
                streams[1].take(made)
    except (InputError, NotInBlocks):
        return None
    finally:
        same = all([s.finish() for s in streams])
        pa.default_memory_pool().release_unused()
    if not digest.totals().pairs:
        return None  # the empty key: refused by the whole path
    compared = standing if isinstance(standing, Exception) else (
        None if standing is None else same or False)
    return _Blocked(blocks, digest.totals(), digest.dropped, compared)


def _standing(ex):
    """The frozen key's and its made-on file's bytes, to compare with the new key's as its
    blocks are made: a pair of :class:`relgrade.io.files.SameBytes`; None where
    :func:`_revision` finds nothing to compare with (no frozen key, no made-on file or
    hash, a torn key).

    Raises
    ------
    InputError
        The record is unreadable (as :meth:`Experiment.read_key_made_on` says it).
    """
    files = ex.key_files()
    if not files.record.exists() or not files.key.exists():
        return None
    if files.made_on is None or not files.made_on.exists():
        return None
    want = io.read_json(files.record).get("made_on_sha256")
    if want is None or io.sha256_file(files.made_on) != want:
        return None  # no made-on hash, or a torn made-on file: no revision
    try:
        ex.checked_key()
    except ProtocolError:
        return None  # a torn frozen key cannot vouch for a revision
    return io.SameBytes(files.key), io.SameBytes(files.made_on)


def _corrections(ex):
    """The key grader's post-hoc corrections of this round (``relgrade grade correct``), in
    the order recorded; empty without a corrections file."""
    f = ex.grader_files(ex.params.need("grading.key_grader")).corrections
    return io.read_jsonl(f) if f.exists() else []


def _write_post_hoc(ex, table, record, gate, made_on, corrections, *, frozen=None):
    """Write the post-hoc key (``table`` with ``corrections`` applied) beside the frozen one,
    in ``paths.key_post_hoc`` (one folder swap); its record says ``post_hoc: true`` and
    lists the corrections applied (and those set aside: made on other content, or of a pair
    the key no longer holds) and, beside a frozen key, the hash it ``corrects``. Returns the
    record written and where it went, for the stage's line."""
    notes = {}
    if corrections:
        table, applied, aside = corrections_mod.apply_corrections(table, corrections,
                                                                  made_on=made_on)
        notes = {"corrections": applied, "corrections_set_aside": aside}
        if frozen is not None:
            notes["corrects"] = frozen
        if aside:
            print(f"note: {len(aside)} correction{'s' if len(aside) != 1 else ''} made on "
                  "other content, or of pairs the key no longer holds, set aside")
    folder = ex.path("key_post_hoc")
    # a key in blocks has no corrections (those take the whole path): its hash is the record's
    sha256 = record["key_sha256"] if isinstance(table, KeyBlocks) else key.key_sha256(table)
    record = record | {"key_sha256": sha256, "post_hoc": True,
                       "frozen_at": _frozen_at(ex, sha256, post_hoc=True), **notes}
    with io.atomic_dir(folder) as tmp:  # the files swapped in as one folder
        names = ex.key_files(post_hoc=True)
        record = _write(type(names)(key=tmp / names.key.name, qrels=tmp / names.qrels.name,
                                    record=tmp / names.record.name,
                                    made_on=tmp / names.made_on.name),
                        table, record, gate, ex, made_on)
        # the folder's note stays (in git), saying what the folder now holds
        note = POST_HOC if frozen is not None else POST_HOC_ALONE
        io.write_text(tmp / "README.md", note.format(
            post_hoc=record["key_sha256"], frozen=frozen, pool=record["pool_version"],
            rubric=record["rubric_version"], round=record["round"]))
    where = f"beside the frozen key, in {stage_path(ex, folder)}"
    if notes:
        n = len(notes["corrections"])
        where = (f"a post-hoc key {record['key_sha256']} with {n} correction"
                 f"{'s' if n != 1 else ''} {where}")
    return record, where
