"""``relgrade grade correct``: a post-hoc correction of one grade of the frozen key.

The correction is appended (durably, as the grade store appends) to the key grader's
``round-N.corrections.jsonl`` beside its round file; the frozen key is never touched. The
next ``dvc repro`` writes the corrected key beside the frozen one as a post-hoc key, and
each arm's post-hoc numbers beside the frozen ones (:mod:`relgrade.protocol.corrections`).
"""

from __future__ import annotations

import click

from relgrade.cli.options import params_option
from relgrade.cli.render import handle_errors


@click.command("correct")
@click.argument("query_id")
@click.argument("chunk_id")
@click.option("--grade", type=int, required=True, help="The corrected grade (on the scale).")
@click.option("--reason", required=True, help="Why the grade is corrected (not empty).")
@click.option("--by", "by", default=None,
              help="Who makes the correction (a person's name), recorded beside it and named "
                   "in the report's post-hoc section.")
@click.option("--grader", default=None,
              help="The grader whose grade is corrected (default and only choice: params "
                   "grading.key_grader, whose grades make the key).")
@params_option
@handle_errors
def correct_cmd(query_id, chunk_id, grade, reason, by, grader, params_path):
    """Record a post-hoc correction of QUERY_ID/CHUNK_ID's grade in the frozen key.

    The frozen key, its metrics and the decision stay as they are: the correction (grade
    before and after, reason, time, who made it (--by), the frozen key's hash and the chunk,
    intent and rubric it was made on) is appended to the key grader's round-N.corrections.jsonl. `dvc repro` then
    writes the corrected key beside the frozen one, labelled post-hoc, and each arm's
    post-hoc numbers, and the report a post-hoc section beside its verdicts. Refused: a pair
    outside the pool or the key, a grade off the scale, an empty reason, a blank --by, a
    grade equal to the one recorded, and no frozen key yet.
    """
    from relgrade.canonical import jsonl_bytes
    from relgrade.errors import InputError
    from relgrade.experiment.files import Experiment
    from relgrade.experiment.layout import repro_command
    from relgrade.graders.store import append_lines, now_utc
    from relgrade.io import files as io
    from relgrade.protocol.corrections import correction_row

    ex = Experiment.load(params_path)
    key_grader = ex.params.need("grading.key_grader")
    if grader is not None and grader != key_grader:
        raise InputError("only the key grader's grades are corrected post hoc", item="--grader",
                         found=grader,
                         fix=f"Leave --grader out or name {key_grader} (params "
                             "grading.key_grader): a correction changes the key")
    if not ex.key_files().record.exists():
        raise InputError("no frozen key to correct yet", path=ex.key_files().record,
                         fix="Run dvc repro until the key is frozen; a correction is "
                             "post-hoc, made after the key")
    table, record = ex.read_key()
    files = ex.grader_files(key_grader)
    earlier = io.read_jsonl(files.corrections) if files.corrections.exists() else []
    earlier = [c for c in earlier if c.get("key_sha256") == record["key_sha256"]]
    row = correction_row(
        key=table, pool=io.read_table(ex.path("pool"), columns=["query_id", "chunk_id"]),
        earlier=earlier, query_id=query_id, chunk_id=chunk_id, grade=grade, reason=reason,
        scale=ex.params.need("scale").grades, grader=key_grader, round=ex.params.grading.round,
        corrected_at=now_utc(), corrected_by=by, key_sha256=record["key_sha256"],
        made_on=ex.made_on_now()({"query_id": query_id, "chunk_id": chunk_id}),
        source=files.corrections.as_posix())
    files.corrections.parent.mkdir(parents=True, exist_ok=True)
    append_lines(files.corrections, jsonl_bytes([row]))
    click.echo(f"corrected {row['query_id']}/{row['chunk_id']}: grade {row['grade_before']} -> "
               f"{row['grade']} (post-hoc, beside the frozen key {record['key_sha256'][:12]}), "
               f"recorded in {files.corrections.as_posix()}; run {repro_command(ex)} for the "
               "post-hoc key and metrics")

