"""``relgrade corpus``: pin a PyPI package's source as a corpus, and export the chunk table
for retrieval systems outside relgrade."""

from __future__ import annotations

from pathlib import Path

import click

from relgrade.cli.options import params_option
from relgrade.cli.render import counted, handle_errors

_FILE = click.Path(dir_okay=False, path_type=Path)


@click.group("corpus")
def corpus_cmd():
    """The corpus: pin a source archive (spec), write the chunk table (export), or edit one
    chunk's text (edit)."""


@corpus_cmd.command("spec")
@click.argument("requirement")
@click.option("--out", "out", required=True, type=_FILE,
              help="The source spec to write (.yaml); refused if it exists.")
@handle_errors
def spec_cmd(requirement, out):
    """Download REQUIREMENT's source distribution from the package index (e.g.
    "itsdangerous==2.2.0"; pip download, never installed or run) and write a source spec
    pinning it by file name and sha256: the file `relgrade init --corpus` takes."""
    import yaml

    from relgrade.canonical import sha256_bytes
    from relgrade.errors import InputError
    from relgrade.io.files import write_text
    from relgrade.io.sdist import download_sdist

    if "==" not in requirement:
        raise InputError("a corpus is pinned to one version", item="REQUIREMENT",
                         found=repr(requirement), fix="Write NAME==VERSION, e.g. attrs==24.2.0")
    if out.suffix.lower() not in (".yaml", ".yml"):
        raise InputError("a source spec is a .yaml file", path=out, found=repr(out.suffix))
    if out.exists():
        raise InputError("the file exists; relgrade does not overwrite a source spec", path=out,
                         fix="Choose another --out, or delete the file first")
    filename, data = download_sdist(requirement)
    spec = {"kind": "pypi-sdist", "requirement": requirement, "filename": filename,
            "sha256": sha256_bytes(data)}
    write_text(out, f"# {requirement}'s source distribution, pinned by its sha256.\n"
               + yaml.safe_dump(spec, sort_keys=False))
    click.echo(f"Wrote {out.as_posix()}: {filename}, {len(data):,} bytes, sha256 "
               f"{spec['sha256']}")


@corpus_cmd.command("export")
@click.option("--out", "out", required=True, type=_FILE,
              help="The file to write: .jsonl or .parquet.")
@click.option("--beir", is_flag=True,
              help="Write BEIR's corpus.jsonl form (_id, title, text) instead.")
@click.option("--corpus", "corpus_input", type=_FILE, default=None,
              help="Build the chunks from this corpus input (a source spec or a chunks file) "
                   "instead of an experiment's: for a run made before `relgrade init`.")
@params_option
@handle_errors
def export_cmd(out, beir, corpus_input, params_path):
    """Write the chunk table (chunk_id, header, text, source, line numbers) so an external
    system can index it and return a run over the same chunk ids. Reads the experiment's
    built chunks when its corpus stage has run, else builds them in memory from its corpus
    input (or from --corpus), exactly as the corpus stage would."""
    from relgrade.errors import InputError
    from relgrade.pipeline.stages.corpus import build_corpus
    from relgrade.experiment.files import Experiment
    from relgrade.io.files import read_table, write_jsonl, write_parquet

    suffix = out.suffix.lower()
    if not (suffix == ".jsonl" or (suffix == ".parquet" and not beir)):
        raise InputError("the export is written as .jsonl (or .parquet without --beir)",
                         path=out, found=repr(out.suffix))
    if corpus_input is not None:
        if not corpus_input.is_file():
            raise InputError("corpus input not found", path=corpus_input)
        chunks, _ = build_corpus(corpus_input)
        built = f"built from {corpus_input.as_posix()}"
    else:
        ex = Experiment.load(params_path)
        src = ex.path("chunks")
        if src.exists():
            chunks, built = read_table(src), f"from {src.as_posix()}"
        else:
            cfg = ex.params.need("corpus")
            chunks, _ = build_corpus(ex.file(cfg.input), allow_empty=cfg.allow_empty)
            built = f"built from {ex.file(cfg.input).as_posix()} (the corpus stage has not run)"
    if beir:
        chunks = chunks.rename(columns={"chunk_id": "_id", "header": "title"})[
            ["_id", "title", "text"]]
    if suffix == ".jsonl":
        write_jsonl(out, chunks.to_dict("records"))
    else:
        write_parquet(out, chunks)
    click.echo(f"Wrote {len(chunks)} chunks to {out.as_posix()}, {built}")


@corpus_cmd.command("edit")
@click.argument("chunk_id")
@click.option("--text-file", "text_file", required=True,
              type=click.Path(exists=True, dir_okay=False, path_type=Path),
              help="A UTF-8 file holding the chunk's new text, exactly.")
@params_option
@handle_errors
def edit_cmd(chunk_id, text_file, params_path):
    """Replace the text of chunk CHUNK_ID in the experiment's corpus input. A source spec is
    first exported once to an editable chunks.jsonl beside it (chunks.origin.json records the
    spec's sha256) and params corpus.input is pointed at it; a chunks file is edited in place.
    Prints what `dvc repro` will then owe: the pool pairs of that chunk, per grader, and
    the grading owed before the edit, which stops it too."""
    from relgrade.errors import InputError
    from relgrade.experiment import chunk_edit
    from relgrade.experiment.files import Experiment
    from relgrade.experiment.layout import grade_commands, repro_command
    from relgrade.io.files import read_table, read_utf8, write_text
    from relgrade.pipeline.judgments import judgments
    from relgrade.pipeline.stages.corpus import build_corpus
    from relgrade.protocol.bank import pending_message

    text = read_utf8(text_file)
    ex = Experiment.load(params_path)
    cfg = ex.params.need("corpus")
    src = ex.file(cfg.input)
    if not src.is_file():
        raise InputError("corpus input not found", path=src, item="corpus.input")
    rows_src = src
    if src.suffix.lower() in (".yaml", ".yml"):
        chunks, _ = build_corpus(src, allow_empty=cfg.allow_empty)
        # check before anything is written: a refused edit leaves the experiment as it was
        chunk_edit.replace_text(chunks.to_dict("records"), chunk_id, text, path=src)
        rows_src, origin = chunk_edit.export_spec(src, chunks)
        relative = Path(cfg.input).with_name(rows_src.name).as_posix()
        write_text(params_path, chunk_edit.set_corpus_input(
            Path(params_path).read_text("utf-8"), relative, path=params_path))
        click.echo(f"Exported {len(chunks)} chunks of {src.as_posix()} (spec sha256 "
                   f"{origin['source_spec_sha256'][:12]}) to {rows_src.as_posix()}; params "
                   f"corpus.input is now {relative}")
    rows = chunk_edit.replace_text(chunk_edit.read_rows(rows_src), chunk_id, text,
                                   path=rows_src)
    chunk_edit.write_rows(rows_src, rows, edited=chunk_id)
    click.echo(f"Edited chunk {chunk_id} in {rows_src.as_posix()}")

    pool_path, chunks_path = ex.path("pool"), ex.path("chunks")
    if not (pool_path.is_file() and chunks_path.is_file()):
        _without_pool(ex, chunk_id, pool_path if not pool_path.is_file() else chunks_path)
        return
    built = read_table(chunks_path, columns=["chunk_id", "header", "text"])
    # the corpus as the next dvc repro builds it: this edit and any made before it since
    edited = {str(r["chunk_id"]): r["text"] for r in rows}
    ids = built["chunk_id"].astype(str)
    built["text"] = [edited.get(c, t) for c, t in zip(ids, built["text"])]
    pool = read_table(pool_path, columns=["query_id", "chunk_id"])
    every = judgments(ex, pool, ex.audit_ids() or [], chunks=built).pending
    mine = every["chunk_id"].astype(str) == chunk_id
    owed = every[mine]
    repro = repro_command(ex)
    # grading owed before the edit (other chunks' pairs) stops dvc repro too: say both
    before = int((~mine).sum())
    if owed.empty:
        click.echo(f"Chunk {chunk_id} is in no pool pair: `{repro}` owes no grading for it."
                   + (f" It still stops on the {counted(before, 'pair')} owed before the "
                      "edit: " + pending_message(every, how=grade_commands(ex))
                      if before else ""))
    elif before:
        click.echo(f"`{repro}` will then stop on {len(every)} pairs, {len(owed)} of chunk "
                   f"{chunk_id} and {before} of other chunks owed before the edit: "
                   + pending_message(every, how=grade_commands(ex)))
    else:
        click.echo(f"`{repro}` will then stop on: "
                   + pending_message(owed, how=grade_commands(ex)))
    # the forecast holds for today's pool; new text can move the chunk in the arms' runs
    click.echo("If the new text changes what an arm retrieves, the pool changes too: pairs "
               "may leave it or join it, `dvc repro` names what is owed then, and the key it "
               "freezes is a new pool version (not a revision of this one).")


def _without_pool(ex, chunk_id: str, missing) -> None:
    """What an edit owes when the pool or the chunk table is not on disk: a pool never built
    owes nothing, but outputs DVC removed (a stage that failed after DVC cleared them) leave
    the grades in the bank, and the edited chunk's grades turn stale when the pool is built
    again."""
    import pyarrow.compute as pc

    from relgrade.experiment.layout import repro_command
    from relgrade.io.files import read_jsonl
    from relgrade.io.grade_columns import read_grade_columns

    repro = repro_command(ex)
    # the round's grade files alone: without the chunk table nothing can be judged current,
    # and a grade of the chunk is what its new text makes stale
    per = {}
    for name, files in ex.grader_round_files().items():
        t = read_grade_columns(files.grades, digests=False)
        n = (int(pc.sum(pc.equal(t.column("chunk_id"), chunk_id)).as_py() or 0)
             if t is not None else
             sum(1 for r in read_jsonl(files.grades) if str(r.get("chunk_id")) == chunk_id))
        if n:
            per[name] = n
    if not per:
        click.echo(f"No pool built yet, and no grade of chunk {chunk_id}: nothing graded is "
                   f"affected; `{repro}` builds on the edited corpus.")
        return
    where = Path(missing).resolve().relative_to(ex.working_tree()).as_posix()
    graded = ", ".join(f"{n} by {g}" for g, n in per.items())
    click.echo(f"{where} is not on disk, but chunk {chunk_id} has grades ({graded}): with its "
               f"new text they are stale once `{repro}` builds the pool again, and it stops "
               "on them, naming the graders and the commands.")
