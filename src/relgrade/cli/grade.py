"""``relgrade grade ...``: record grades.

``grade import`` adds existing judgments to a grader's round file, validated as the grades
stage validates it.
"""

from __future__ import annotations

from pathlib import Path

import click

from relgrade.cli.options import params_option
from relgrade.cli.render import handle_errors
from relgrade.errors import InputError


@click.group("grade")
def grade_cmd():
    """Record grades for the pool, only ever adding to what is already recorded."""


@grade_cmd.command("import")
@click.argument("file", type=click.Path(dir_okay=False, path_type=Path))
@click.option("--grader", required=True, help="The grader (a key of params `graders`).")
@click.option("--round", "round_", type=int, default=None,
              help="Grading round (default: params grading.round).")
@click.option("--format", "fmt", type=click.Choice(["jsonl", "qrels", "label-studio"]),
              default=None,
              help="jsonl grade rows, TREC qrels (graders of kind import only), or a Label "
                   "Studio JSON export of tasks from `relgrade packets export --format "
                   "label-studio`. Default: qrels for a .qrels file, else jsonl.")
@params_option
@handle_errors
def import_cmd(file, grader, round_, fmt, params_path):
    """Validate FILE against the pool and append its grades to the grader's round file.

    FILE is checked exactly as the grades stage checks a grader's file. Pairs the grader
    already graded in that round are refused, so nothing recorded is replaced, unless the
    recorded grade is stale (its chunk, intent or rubric changed since): then the imported
    row is recorded as a new grade made on what the pool shows now, beside the old one. The
    merged file is written atomically.
    """
    from relgrade.experiment.files import Experiment
    from relgrade.graders import labelstudio
    from relgrade.graders.store import GradeStore
    from relgrade.io import files as io
    from relgrade.io.judgments import judgment_objects, judgment_rows
    from relgrade.protocol import grades
    from relgrade.schema import ROW_COLUMNS

    ex = Experiment.load(params_path)
    spec = ex.params.grader(grader)
    fmt = fmt or ("qrels" if file.suffix.lower() == ".qrels" else "jsonl")
    if fmt == "qrels" and spec["kind"] != "import":
        raise InputError("TREC qrels carry no reasons: only a grader of kind `import` takes "
                         "them", path=file, item=grader, found=f"kind {spec['kind']}",
                         fix="Declare a grader with `kind: import` for these judgments")
    grading = ex.params.grading
    rnd = grading.round if round_ is None else round_
    audit_path = ex.path("audit")
    check = dict(name=grader, spec=spec, scale=ex.params.need("scale").grades,
                 max_reason_words=ex.params.need("grading.max_reason_words"),
                 max_reason_chars=grading.max_reason_chars,
                 audit_query_ids=([r["query_id"] for r in io.read_jsonl(audit_path)]
                                  if audit_path.exists() else None),
                 pool_pairs=grades.pool_pairs_of(io.read_table(
                     ex.path("pool"), columns=["query_id", "chunk_id"])))
    if fmt == "qrels":
        rows = judgment_rows(file, fmt="qrels", scale=check["scale"])
    elif fmt == "label-studio":
        rows, _ = labelstudio.annotation_rows(io.read_json(file), source=file.as_posix())
    else:
        rows = judgment_objects(file)
    new = grades.validate_grader_file(rows, source=file.as_posix(), **check)
    if new.empty:
        raise InputError("no grade rows to import", path=file)
    target = ex.grader_files(grader, rnd).grades
    manifest = ex.path("intents_manifest")
    intents_sha256 = io.read_json(manifest).get("sha256") if manifest.exists() else None
    rows = new[ROW_COLUMNS].to_dict("records")
    # The bank records what each imported grade is made on: the chunk and intent line as the
    # pool shows them now, and the rubric file as it is now.
    made_on = ex.made_on_now()
    total = GradeStore(target, made_on=made_on).import_rows(
        rows, source=file,
        # a pair graded again after its chunk, intent or rubric changed holds two rows
        check=lambda recorded: grades.validate_grader_file(recorded, source=target.as_posix(),
                                                           allow_repeats=True, **check))
    # The round's sidecar names the intents and rubric graded from now; each grade's own
    # made-on line (in the bank) is what decides whether it is current.
    if rnd == grading.round and intents_sha256:
        ex.ensure_meta(ex.grader_files(grader, rnd),
                       {"intents_sha256": intents_sha256,
                        "rubric_version": str(grading.rubric_version), "round": rnd})
    click.echo(f"imported {len(new)} grades for {grader} (round {rnd}) into "
               f"{target.as_posix()}: {total} rows")
