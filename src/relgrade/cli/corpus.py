"""``relgrade corpus export``: the chunk table, for retrieval systems outside relgrade."""

from __future__ import annotations

from pathlib import Path

import click

from relgrade.cli.options import params_option
from relgrade.cli.render import handle_errors


@click.group("corpus")
def corpus_cmd():
    """The experiment's corpus: its chunks, as the corpus stage built them."""


@corpus_cmd.command("export")
@click.option("--out", "out", required=True, type=click.Path(dir_okay=False, path_type=Path),
              help="The file to write: .jsonl or .parquet.")
@click.option("--beir", is_flag=True,
              help="Write BEIR's corpus.jsonl form (_id, title, text) instead.")
@params_option
@handle_errors
def export_cmd(out, beir, params_path):
    """Write the chunk table (chunk_id, header, text, source, line numbers) so an external
    system can index it and return a run over the same chunk ids. Run `dvc repro` up to the
    corpus stage first (`dvc repro corpus`, or `dvc repro experiments/NAME/dvc.yaml:corpus`)."""
    from relgrade.errors import InputError
    from relgrade.experiment.files import Experiment
    from relgrade.io.files import read_table, write_jsonl, write_parquet

    ex = Experiment.load(params_path)
    src = ex.path("chunks")
    if not src.exists():
        raise InputError("the corpus is not built yet", path=src,
                         fix="Run the corpus stage first (dvc repro ... corpus)")
    chunks = read_table(src)
    if beir:
        chunks = chunks.rename(columns={"chunk_id": "_id", "header": "title"})[
            ["_id", "title", "text"]]
    suffix = out.suffix.lower()
    if suffix == ".jsonl":
        write_jsonl(out, chunks.to_dict("records"))
    elif suffix == ".parquet" and not beir:
        write_parquet(out, chunks)
    else:
        raise InputError("the export is written as .jsonl (or .parquet without --beir)",
                         path=out, found=repr(out.suffix))
    click.echo(f"Wrote {len(chunks)} chunks to {out.as_posix()}")
