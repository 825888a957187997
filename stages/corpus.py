"""Stage `corpus`: the pinned source archive (or a chunks file) → the chunks table + manifest.

A source spec (.yaml) is downloaded with pip (or read from a local path), checked against its
sha256, read in memory and chunked; a chunks file (.jsonl/.parquet) is validated. Both
outputs are written only after everything succeeded.
"""

from relgrade.experiment.corpus import build_corpus
from relgrade.experiment.stage import run_stage
from relgrade.io.files import write_json, write_parquet


def main(ex):
    cfg = ex.params.need("corpus")
    chunks, manifest = build_corpus(ex.file(cfg.input), allow_empty=cfg.allow_empty)
    write_parquet(ex.path("chunks"), chunks)
    write_json(ex.path("corpus_manifest"), manifest)


if __name__ == "__main__":
    run_stage(main)
