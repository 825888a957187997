"""``relgrade grade ...``: record grades.

``grade import`` adds existing judgments to a grader's round file, validated as the grades
stage validates it; with ``--batch`` it reads a provider's batch results file.
``grade export --batch`` writes the batches a grader owes as a provider's batch requests
(see :mod:`relgrade.graders.batchfiles`); they are planned exactly as ``relgrade grade run``
plans them (same batches, same prompts).
"""

from __future__ import annotations

import sys
from pathlib import Path

import click

from relgrade.cli.options import params_option
from relgrade.cli.render import handle_errors
from relgrade.errors import InputError


@click.group("grade")
def grade_cmd():
    """Record grades for the pool, only ever adding to what is already recorded."""


@grade_cmd.command("import")
@click.argument("file", type=click.Path(dir_okay=False, path_type=Path), required=False)
@click.option("--batch", "batch", type=click.Path(dir_okay=False, exists=True, path_type=Path),
              default=None,
              help="A provider's batch results file (OpenAI or Anthropic JSON Lines) for the "
                   "requests `relgrade grade export --batch` wrote; instead of FILE.")
@click.option("--grader", required=True, help="The grader (a key of params `graders`).")
@click.option("--round", "round_", type=int, default=None,
              help="Grading round (default: params grading.round).")
@click.option("--format", "fmt", type=click.Choice(["jsonl", "qrels", "label-studio"]),
              default=None,
              help="jsonl grade rows, TREC qrels (any grader; their grades carry no "
                   "reasons), or a Label Studio JSON export of tasks from `relgrade packets "
                   "export --format label-studio`. Default: qrels for a .qrels file, else "
                   "jsonl.")
@click.option("--partial", is_flag=True,
              help="With --batch: record every valid answer of a batch still owed, list each "
                   "refused line with its rule, and exit 1 when any was refused (default: one "
                   "refused line refuses the whole file).")
@click.option("--recheck", "recheck", default=None, metavar="JUDGE",
              help="People's grades of the judge re-check drawn for model grader JUDGE's "
                   "identity now: checked against the drawn pairs and recorded in the "
                   "re-check's own file, never in the round's (the key, the audit and the "
                   "ppi human sample stay as they are).")
@params_option
@handle_errors
def import_cmd(file, batch, grader, round_, fmt, partial, recheck, params_path):
    """Validate FILE against the pool and append its grades to the grader's round file.

    FILE is checked exactly as the grades stage checks a grader's file. A row recorded before
    byte for byte (the same grade and reason, e.g. from a file exported with every pair) is
    skipped with a note. Pairs the grader already graded in that round with another grade
    or reason are refused, so nothing recorded is replaced, unless the recorded grade is
    stale (its chunk, intent or rubric changed since): then the imported
    row is recorded as a new grade made on what the pool shows now, beside the old one. Only
    FILE's rows are checked against the current pool and audit sample: recorded grades of
    pairs that have since left the pool stay in the file, unused. The merged file is written
    atomically. Each imported grade's bank line names the file it
    came from, its sha256 and its format (imported_from). TREC qrels are taken for a grader
    of any kind; they carry no reasons, so their grades have none, and the bank line is what
    excuses them from the reason a model or human grader's grades carry. With --batch
    RESULTS instead of FILE, a provider's batch results are parsed like a command grader's
    output and recorded for the batches still owed (the rest stay owed); a malformed line, a
    batch not owed or a refused answer refuses the whole file. With --partial, each such line
    is listed (file:line: rule) and skipped, every other answer is recorded, and the command
    exits 1 when any line was refused.
    """
    if (file is None) == (batch is None):
        raise click.UsageError("give either FILE or --batch RESULTS")
    if partial and batch is None:
        raise click.UsageError("--partial applies to --batch RESULTS only")
    if recheck is not None and (batch is not None or round_ is not None):
        raise click.UsageError("--recheck takes FILE, without --batch or --round")
    if batch is not None:
        if fmt is not None or round_ is not None:
            raise click.UsageError("--batch takes neither --format nor --round (it records "
                                   "the current round's owed batches)")
        _import_batch(batch, grader, params_path, partial=partial)
        return
    from relgrade.experiment.files import Experiment
    from relgrade.graders import labelstudio
    from relgrade.graders.store import FrameRows, GradeStore, read_bank
    from relgrade.io import files as io
    from relgrade.io.grade_columns import read_grade_columns
    from relgrade.io.judgments import judgment_objects, judgment_rows
    from relgrade.protocol import bank_columns, grades
    from relgrade.schema import ROW_COLUMNS

    ex = Experiment.load(params_path)
    spec = ex.params.grader(grader)
    stale = ex.packets_rubric_stale() if recheck is None else None
    if stale is not None:  # grades of the old packets would be stale as soon as recorded
        raise stale
    fmt = fmt or ("qrels" if file.suffix.lower() == ".qrels" else "jsonl")
    grading = ex.params.grading
    rnd = grading.round if round_ is None else round_
    # a JSON Lines file is read and checked a block of rows at a time, the pool and what
    # each grade is made on held as codes (:func:`_blocks_checked`); any row that breaks a
    # rule (or anything those readers do not model) goes to the whole-file paths below,
    # which word the error
    by_blocks = (fmt == "jsonl" and recheck is None and file.is_file()
                 and ex.path("pool").is_file())
    pool = None if by_blocks else io.read_table(ex.path("pool"),
                                                columns=["query_id", "chunk_id"])
    check = dict(name=grader, spec=spec, scale=ex.params.need("scale").grades,
                 max_reason_words=ex.params.need("grading.max_reason_words"),
                 max_reason_chars=grading.max_reason_chars,
                 audit_query_ids=ex.audit_ids(), pool_pairs=None)
    target = ex.grader_files(grader, rnd).grades
    new = None
    blocks = None
    if by_blocks:
        blocks = _blocks_checked(ex, file, spec=spec, check=check)
        if blocks is None:
            pool = io.read_table(ex.path("pool"), columns=["query_id", "chunk_id"])
    if blocks is None and fmt == "jsonl" and recheck is None and file.is_file():
        # JSONL grade rows as columns, read in blocks and checked over columns; any row
        # that breaks a rule (or a file only the row reader reads) goes to the rows below,
        # which name it
        table = read_grade_columns(file, digests=False)
        if table is not None:
            new = bank_columns.rows_of_columns(
                table, spec=spec, pool=pool, audit_query_ids=check["audit_query_ids"],
                scale=check["scale"], max_reason_words=check["max_reason_words"],
                max_reason_chars=check["max_reason_chars"])
        del table
    recheck_made_on = None
    if blocks is None and new is None:
        check["pool_pairs"] = grades.pool_pairs_of(pool)
        reasonless: frozenset = frozenset()
        if fmt == "qrels":
            rows = judgment_rows(file, fmt="qrels", scale=check["scale"])
            reasonless = frozenset(line for line, _ in rows)  # TREC qrels carry no reasons
        elif fmt == "label-studio":
            rows, _ = labelstudio.annotation_rows(io.read_json(file), source=file.as_posix())
        else:
            rows = judgment_objects(file)
        if recheck is not None:
            check["pool_pairs"], target, recheck_made_on = _recheck_target(ex, recheck,
                                                                           grader, spec)
            check["audit_query_ids"] = None
        new = grades.validate_grader_file(rows, source=file.as_posix(),
                                          reasonless=reasonless, **check)
        del rows  # the parsed lines: the validated table holds what is recorded
        check["pool_pairs"] = None
    if blocks is not None:
        rows, made_on, digest = blocks
        n_new = len(rows)
    else:
        del pool
        if new.empty:
            raise InputError("no grade rows to import", path=file)
        rows = FrameRows(new[ROW_COLUMNS])  # one block's dicts at a time
        n_new = len(new)
        del new
        digest = io.sha256_file(file)
        # The bank records what each imported grade is made on: the chunk and intent line as
        # the pool shows them now, and the rubric file as it is now.
        made_on = ex.made_on_now() if recheck_made_on is None else recheck_made_on
    manifest = ex.path("intents_manifest")
    intents_sha256 = io.read_json(manifest).get("sha256") if manifest.exists() else None
    skipped: list = []
    total = GradeStore(target, made_on=made_on).import_rows(
        rows, source=file, note=grades.imported_from(file, digest, fmt),
        skipped=skipped,  # rows recorded before, byte for byte: a re-export, not a change
        # a pair graded again after its chunk, intent or rubric changed holds two rows; a
        # grade imported from qrels before has no reason, as its bank line says; a recorded
        # pair that has left the pool (or an audit query no longer audited) stays, unused:
        # only the incoming rows answer to the pool and the audit sample now
        check=lambda recorded: grades.validate_grader_file(
            recorded, source=target.as_posix(), allow_repeats=True,
            reasonless=grades.imported_without_reasons(recorded, read_bank(target)),
            **{**check, "pool_pairs": None, "audit_query_ids": None}))
    # The round's sidecar names the intents and rubric graded from now; each grade's own
    # made-on line (in the bank) is what decides whether it is current.
    if rnd == grading.round and intents_sha256 and recheck is None:
        ex.ensure_meta(ex.grader_files(grader, rnd),
                       {"intents_sha256": intents_sha256,
                        "rubric_version": str(grading.rubric_version), "round": rnd})
    n = n_new - len(skipped)
    click.echo(f"imported {n} grade{'s' if n != 1 else ''} for {grader} (round {rnd}) into "
               f"{target.as_posix()}: {total} row{'s' if total != 1 else ''}")
    if skipped:
        k = len(skipped)
        click.echo(f"Note: skipped {k} row{'s' if k != 1 else ''} of {file.name} already "
                   f"recorded byte for byte in {target.as_posix()} (the same grade and reason)")


def _blocks_checked(ex, file: Path, *, spec, check: dict):
    """A JSON Lines grade file checked a block of rows at a time, for ``grade import``.

    The file is read twice, a block of lines at a time
    (:class:`relgrade.io.grade_columns.GradeBlocks`): once to check it
    (:class:`relgrade.protocol.grade_blocks.BlockCheck`: the row rules, the audit sample,
    the pool and what each grade is made on, as codes; one row per pair by a sort of the
    pairs' codes), once more as the import writes it. Nothing pool- or file-sized is held
    as Python objects.

    Parameters
    ----------
    ex : relgrade.experiment.files.Experiment
    file : pathlib.Path
        The grade file (it exists).
    spec : mapping
        The grader's params entry.
    check : dict
        ``import_cmd``'s checks (``scale``, ``max_reason_words``, ``max_reason_chars``,
        ``audit_query_ids``).

    Returns
    -------
    tuple of (relgrade.graders.store.TableRows, relgrade.experiment.made_on.MadeOnNow, str)
    or None
        The rows (read again from the file block by block; a file that changed since it was
        checked is refused then), what each is made on, and the file's sha256. None when
        the whole-file paths must take the file: a row breaks a rule, a pair is given twice
        or is outside the pool, the file holds no rows or what the column reader does not
        read, or the corpus, intents or pool are not what these read (see
        :meth:`relgrade.experiment.made_on.MadeOnNow.load`); those paths word the error.
    """
    import pyarrow.parquet as pq

    from relgrade.experiment.made_on import MadeOnNow
    from relgrade.graders.store import TableRows
    from relgrade.io.grade_columns import GradeBlocks
    from relgrade.protocol.grade_blocks import BlockCheck, pool_codes
    from relgrade.schema import ROW_COLUMNS

    pool_path = ex.path("pool")
    if not pool_path.is_file() or pool_path.suffix.lower() != ".parquet":
        return None
    made_on = MadeOnNow.load(ex)
    if made_on is None:
        return None
    try:
        with pq.ParquetFile(pool_path) as f:
            if not {"query_id", "chunk_id"} <= set(f.schema_arrow.names):
                return None
            pool = pool_codes(f.iter_batches(batch_size=1 << 17,
                                             columns=["query_id", "chunk_id"],
                                             use_threads=False),
                              queries=made_on.queries, chunks=made_on.chunks)
    except (OSError, ValueError):
        return None
    rules = BlockCheck(spec=spec, queries=made_on.queries, chunks=made_on.chunks, pool=pool,
                       audit_query_ids=check["audit_query_ids"], scale=check["scale"],
                       max_reason_words=check["max_reason_words"],
                       max_reason_chars=check["max_reason_chars"])
    blocks = GradeBlocks(file)
    for block in blocks:
        if block is None or not rules.add(block):
            return None
    n_rows = rules.n_rows
    if not n_rows or not rules.finish():
        return None
    del pool, rules
    digest = blocks.sha256

    def again():
        """The file's blocks as checked, or a refusal when it changed since."""
        for block in blocks:
            if block is None:
                break
            yield block
        if blocks.sha256 != digest:
            raise InputError("the file changed while it was imported; nothing was recorded",
                             path=file, fix="Import it again once nothing writes to it")

    class _Again:
        def __iter__(self):
            blocks.sha256 = None
            return again()

    return TableRows(_Again(), n_rows, ROW_COLUMNS), made_on, digest


def _recheck_target(ex, judge_grader, people, spec):
    """The drawn re-check pairs of ``judge_grader``'s identity now, the file ``people``'s
    re-check grades go to, and what each is made on (what the re-check's packets show).

    Raises
    ------
    InputError
        ``people`` is not a human grader, or no re-check is drawn.
    """
    from relgrade.experiment import recheck as rc

    if spec.get("kind") != "human":
        raise InputError("a re-check is graded by people: --grader must be a human grader",
                         path=ex.params.source, item=f"graders.{people}",
                         found=str(spec.get("kind")))
    judge, d = rc.drawn(ex, judge_grader)
    pairs = {(str(p["query_id"]), str(p["chunk_id"])) for p in d["pairs"]}
    return (pairs, rc.grade_path(ex, judge_grader, judge, people),
            ex.made_on(rc.recheck_packets(ex, judge_grader, d)))


# --- provider batch files --------------------------------------------------------

def _owed(ex, grader, provider, store):
    """The grader's owed batches as ``provider`` requests, and the packets."""
    from relgrade.graders import command as graderun
    from relgrade.graders.batchfiles import batch_settings, owed_batches
    from relgrade.graders.exchange import prompt_template, prompt_template_text
    from relgrade.graders.store import read_bank

    spec = ex.params.grader(grader)
    settings = batch_settings(spec, grader, provider, path=ex.params.source)
    grading = ex.params.grading
    scale = ex.params.need("scale").grades
    max_reason_words = ex.params.need("grading.max_reason_words")
    packets = ex.grader_packets(grader)
    graderun.check_packets(packets, batch_size=grading.batch_size,
                           source=str(ex.grader_packets_folder(grader)))
    recorded = graderun.recorded_pairs(
        store.rows, packets=packets, scale=scale, max_reason_words=max_reason_words,
        kind=spec["kind"], role=spec["role"], source=store.path, grader=grader,
        max_reason_chars=grading.max_reason_chars,
        bank=read_bank(store.path)) & set(store.current_keys())
    tasks = graderun.plan(packets, recorded=recorded)
    owed = owed_batches(tasks, settings=settings, grader=grader, kind=spec["kind"],
                        role=spec["role"], rubric=ex.rubric(), scale=scale,
                        max_reason_words=max_reason_words, template=prompt_template(),
                        template_text=prompt_template_text(),
                        identity_settings=identity_settings(spec, grader, ex.params.source))
    return owed, packets, spec


def identity_settings(spec, grader, path) -> dict:
    """The settings a grader's entry names in ``identity_keys``, with their values.

    Raises
    ------
    InputError
        A name the entry does not set.
    """
    from relgrade.errors import InputError

    out = {}
    for k in spec.get("identity_keys") or ():
        if k not in spec:
            raise InputError(f"graders.{grader}.identity_keys names {k}, which the grader's "
                             "entry does not set", path=path, item=grader, found=repr(k),
                             fix=f"Set graders.{grader}.{k} or remove it from identity_keys")
        out[str(k)] = spec[k]
    return out


@grade_cmd.command("export")
@click.option("--batch", "provider", type=click.Choice(["openai", "anthropic"]), required=True,
              help="Whose batch-request format to write.")
@click.option("--grader", required=True, help="The grader (params `graders`) whose owed "
                                              "batches to write.")
@click.option("-o", "--output", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help="The file to write (default: standard output).")
@params_option
@handle_errors
def export_cmd(provider, grader, output, params_path):
    """Write the batches GRADER still owes as a provider's batch-request JSON Lines.

    One request per batch of at most five chunks, holding the prompt a command grader gets;
    custom_id is the batch's call-cache key. The model and settings come from
    graders.NAME.model_id, max_tokens (default 1024) and temperature. Send the file to the
    provider's batch API and bring its results back with
    `relgrade grade import --batch RESULTS --grader NAME`.
    """
    from relgrade.experiment.files import Experiment
    from relgrade.graders.batchfiles import request_lines
    from relgrade.graders.store import GradeStore
    from relgrade.experiment import revisions
    from relgrade.io.files import write_bytes

    ex = Experiment.load(params_path, resolve=True)
    files = ex.grader_files(grader)
    with GradeStore(files.grades, made_on=ex.made_on(ex.grader_packets(grader)),
                    carried=revisions.carried_check(ex)) as store:
        owed, _, _ = _owed(ex, grader, provider, store)
    data = request_lines(owed, provider)
    pairs = sum(len(b.chunks) for b in owed)
    if output is None:
        sys.stdout.buffer.write(data)
        sys.stdout.flush()
    else:
        write_bytes(output, data)
    click.echo(f"{grader}: {len(owed)} {provider} batch requests for {pairs} owed pairs"
               + ("" if output is None else f" written to {output.as_posix()}"), err=True)


def _provider_judge(ex, grader, provider, spec) -> str:
    """A provider grader's judge identity (:func:`relgrade.graders.batchfiles.batch_identity`)."""
    from relgrade.graders.batchfiles import batch_identity, batch_settings
    from relgrade.graders.cache import judge_identity
    from relgrade.graders.exchange import prompt_template_text

    settings = batch_settings(spec, grader, provider, path=ex.params.source)
    return judge_identity(batch_identity(
        settings, grader=grader, role=spec["role"], template_text=prompt_template_text(),
        rubric=ex.rubric(), identity_settings=identity_settings(spec, grader, ex.params.source)))


def _import_batch(results: Path, grader: str, params_path, *, partial: bool = False) -> None:
    """Record a provider's batch results file for ``grader`` (``grade import --batch``).

    With ``partial``, refused lines are listed on stderr after the valid answers are
    recorded, and the command exits 1 when there is any.

    Raises
    ------
    InputError
        Any refusal of :func:`relgrade.graders.batchfiles.read_results` (nothing recorded),
        without ``partial``.
    ProtocolError
        A grading run holds the grade file.
    """
    from relgrade.experiment.files import Experiment
    from relgrade.graders import command as graderun
    from relgrade.graders.batchfiles import read_results, results_provider
    from relgrade.canonical import sha256_bytes
    from relgrade.graders.cache import MISS, CallCache, answer_digest
    from relgrade.graders.exchange import prompt_template_text
    from relgrade.graders.store import GradeStore
    from relgrade.experiment import revisions
    from relgrade.text import inert

    ex = Experiment.load(params_path, resolve=True)
    cache_path = ex.call_cache()  # refused before anything is read or recorded
    data = Path(results).read_bytes()
    provider = results_provider(data, source=results)
    files = ex.grader_files(grader)
    packets = ex.grader_packets(grader)
    with GradeStore(files.grades, made_on=ex.made_on(packets),
                    carried=revisions.carried_check(ex)) as store:
        owed, packets, spec = _owed(ex, grader, provider, store)
        judge = _provider_judge(ex, grader, provider, spec)
        got = read_results(data, source=results, owed=owed, grader=grader, kind=spec["kind"],
                           role=spec["role"], scale=ex.params.need("scale").grades,
                           max_reason_words=ex.params.need("grading.max_reason_words"),
                           max_reason_chars=ex.params.grading.max_reason_chars,
                           partial=partial)
        if got.answered:
            if cache_path is not None:
                CallCache(cache_path).put_many(
                    (b.key, text) for b, _, text in got.answered)
            ex.ensure_meta(files, graderun.packet_meta(packets))
            # the prompt template the judge identity names (its `template` digest)
            template = sha256_bytes(prompt_template_text().encode("utf-8"))
            notes = [{"judge": judge, "template_sha256": template, "cache": MISS,
                      "via": f"{provider} batch", "answer_sha256": answer_digest(b.key, text)}
                     for b, _, text in got.answered]
            results_of = store.append_many([rows for _, rows, _ in got.answered],
                                           notes=notes)
            for r in results_of:
                if isinstance(r, Exception):
                    raise r
        left = sum(len(b.chunks) for b in owed) - sum(len(rows) for _, rows, _ in got.answered)
    pairs = sum(len(rows) for _, rows, _ in got.answered)
    batches, unanswered = len(got.answered), len(got.unanswered)
    click.echo(f"imported {pairs} grade{'s' if pairs != 1 else ''} in {batches} "
               f"batch{'es' if batches != 1 else ''} for {grader} from "
               f"{Path(results).as_posix()} ({provider} results); {unanswered} "
               f"request{'s' if unanswered != 1 else ''} unanswered; {left} "
               f"pair{'s' if left != 1 else ''} still owed")
    for line, cid, why in got.unanswered[:10]:
        click.echo(f"unanswered: line {line} custom_id {cid}: {why}", err=True)
    if got.refused:
        n = len(got.refused)
        for e in got.refused:
            click.echo(f"refused: {inert(str(e))}", err=True)
        raise click.ClickException(
            f"{n} line{'s' if n != 1 else ''} of {Path(results).as_posix()} refused (listed "
            "above, not recorded; their batches stay owed); every other answer was recorded")
