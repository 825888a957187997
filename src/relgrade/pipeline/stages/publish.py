"""Stage `publish`: the public bundle (key, record, metrics), written only if it holds no private text.

Publishes the frozen key only, read with its qrels and record checked to have been written
together; post-hoc keys and their metrics stay out of the bundle (the decision is the frozen
key's).
"""

from relgrade.io import files as io
from relgrade.protocol import publish


def run(ex):
    read = lambda name: io.read_table(ex.path(name))  # noqa: E731
    metrics = {p.stem: io.read_json(p) for p in sorted(ex.path("metrics").glob("*.json"))}
    key, record = ex.read_key()
    files = publish.bundle_files(key, record, metrics)
    queries, intents, chunks, grades = read("queries"), read("intents"), read("chunks"), read("grades")
    publish.scan_private(files, {
        "query": zip(queries["query_id"], queries["query"]),
        "intent": zip(intents["query_id"], intents["intent"]),
        "chunk": zip(chunks["chunk_id"], chunks["text"]),
        "reason": zip(grades["grader"] + " " + grades["query_id"] + " " + grades["chunk_id"],
                      grades["reason"]),
    }, allowed=[*queries["query_id"], *chunks["chunk_id"], *metrics])
    out = ex.path("publish")
    with io.atomic_dir(out) as tmp:  # built beside the old folder, then swapped in
        for name, data in files.items():
            io.write_bytes(tmp / name, data)
    print(f"published {', '.join(files)} to {out}")

