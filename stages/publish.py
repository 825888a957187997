"""Stage `publish`: the public bundle (key, record, metrics), written only if it holds no private text."""

import shutil
import tempfile
from pathlib import Path

from relgrade.experiment.stage import path_of, run_stage
from relgrade.io import files as io
from relgrade.protocol import publish


def main(params):
    read = lambda name: io.read_table(path_of(params, name))  # noqa: E731
    metrics = {p.stem: io.read_json(p) for p in sorted(path_of(params, "metrics").glob("*.json"))}
    files = publish.bundle_files(read("key"), io.read_json(path_of(params, "record")), metrics)
    queries, intents, chunks, grades = read("queries"), read("intents"), read("chunks"), read("grades")
    publish.scan_private(files, {
        "query": zip(queries["query_id"], queries["query"]),
        "intent": zip(intents["query_id"], intents["intent"]),
        "chunk": zip(chunks["chunk_id"], chunks["text"]),
        "reason": zip(grades["grader"] + " " + grades["query_id"] + " " + grades["chunk_id"],
                      grades["reason"]),
    }, allowed=[*queries["query_id"], *chunks["chunk_id"], *metrics])
    out = path_of(params, "publish")
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{out.name}.", dir=out.parent))
    old = out.with_name(f".{out.name}.old")
    try:  # build the folder beside the old one, then swap it in
        for name, data in files.items():
            io.write_bytes(tmp / name, data)
        shutil.rmtree(old, ignore_errors=True)
        if out.exists():
            out.rename(old)
        tmp.rename(out)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
        shutil.rmtree(old, ignore_errors=True)
    print(f"published {', '.join(files)} to {out}")


if __name__ == "__main__":
    run_stage(main)
