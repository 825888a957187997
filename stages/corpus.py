"""Stage `corpus`: the pinned source archive (or a chunks file) → the chunks table + manifest.

A source spec (.yaml) is downloaded with pip (or read from a local path), checked against its
sha256, read in memory and chunked; a chunks file (.jsonl/.parquet) is validated. Both
outputs are written only after everything succeeded.
"""

import subprocess
import sys
import tempfile
from pathlib import Path

import pandas as pd

from relgrade.errors import InputError
from relgrade.experiment.stage import run_stage
from relgrade.io.files import (
    iter_jsonl,
    read_table,
    read_yaml,
    sha256_file,
    write_json,
    write_parquet,
)
from relgrade.protocol import corpus


def fetch_sdist(spec: dict, spec_path: Path) -> bytes:
    """The archive's bytes: a local file, or `pip download` of the pinned sdist (not run)."""
    if spec["kind"] == "sdist-file":
        local = spec_path.parent / spec["path"]
        if not local.is_file():
            raise InputError("source archive not found", path=spec_path, item=str(local))
        return local.read_bytes()
    with tempfile.TemporaryDirectory() as tmp:
        cmd = [sys.executable, "-m", "pip", "download", "--no-deps", "--no-binary", ":all:",
               "--disable-pip-version-check", "--no-input", spec["requirement"], "-d", tmp]
        try:
            proc = subprocess.run(cmd, capture_output=True, text=True, timeout=900,
                                  stdin=subprocess.DEVNULL)
        except subprocess.TimeoutExpired:
            proc = None
        if proc is None or proc.returncode != 0:
            lines = [ln.strip() for ln in (proc.stderr if proc else "").splitlines() if ln.strip()]
            errors = [ln for ln in lines if ln.startswith("ERROR")] or lines or ["timed out"]
            raise InputError(f"pip could not download {spec['requirement']}", path=spec_path,
                             found=errors[0][:300],
                             fix="Check the network and package index, or use kind: sdist-file")
        got = Path(tmp) / spec["filename"]
        if not got.is_file():
            names = ", ".join(sorted(p.name for p in Path(tmp).iterdir())) or "nothing"
            raise InputError(f"pip did not produce {spec['filename']}", path=spec_path,
                             found=names)
        return got.read_bytes()


def main(ex):
    cfg = ex.params.need("corpus")
    src = ex.file(cfg.input)
    if src.suffix.lower() in (".yaml", ".yml"):
        spec = corpus.parse_source_spec(read_yaml(src), path=src)
        chunks, manifest = corpus.corpus_from_sdist(fetch_sdist(spec, src), spec=spec, path=src,
                                                    allow_empty=cfg.allow_empty)
    else:
        if src.suffix.lower() == ".jsonl":
            rows = list(iter_jsonl(src))
            table, lines = pd.DataFrame([r for _, r in rows]), [n for n, _ in rows]
        else:
            table, lines = read_table(src), None
        chunks, manifest = corpus.corpus_from_table(table, sha256=sha256_file(src), path=src,
                                                    lines=lines, allow_empty=cfg.allow_empty)
    write_parquet(ex.path("chunks"), chunks)
    write_json(ex.path("corpus_manifest"), manifest)


if __name__ == "__main__":
    run_stage(main)
