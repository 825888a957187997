"""Stage `publish`: the public bundle (key, record, metrics), written only if it holds no private text.

Publishes the frozen key only, read with its qrels and record checked to have been written
together; post-hoc keys and their metrics stay out of the bundle (the decision is the frozen
key's). It publishes the metrics of exactly the arms of params ``arms``: another file in the
metrics folder is left out with a note, an arm without metrics stops the stage.

The bundle is streamed: the key is read in batches and its qrels written to the temporary
folder as they are made, each chunk scanned for private text as it is written (the scan's
state carried across chunks); the private texts are read in batches into the scan's index (each distinct
text once).
Nothing is swapped in unless every file was written and the scan found nothing.
"""

from relgrade.experiment.layout import stage_path
from relgrade.io import batches as stream
from relgrade.io import files as io
from relgrade.protocol import publish
from relgrade.protocol.private_scan import BundleScan, PrivateIndex


def _pairs(path, id_column: str, text_column: str):
    """``(id, text)`` of a table, read batch by batch."""
    for batch in stream.iter_table_batches(path, [id_column, text_column]):
        yield from zip(batch[id_column], batch[text_column])


def _reasons(path):
    """``("grader query_id chunk_id", reason)`` of the grades table, batch by batch."""
    for b in stream.iter_table_batches(path, ["grader", "query_id", "chunk_id", "reason"]):
        yield from zip(b["grader"] + " " + b["query_id"] + " " + b["chunk_id"], b["reason"])


def _ids(path, column: str):
    for batch in stream.iter_table_batches(path, [column]):
        yield from batch[column]


def arm_metrics(ex) -> tuple[dict, list[str]]:
    """The metrics the bundle publishes: exactly the arms of params ``arms``.

    Returns
    -------
    metrics : dict of str to dict
        Arm (in params order) → its metrics JSON, read from params ``paths.metrics``/ARM.json.
    left_out : list of str
        The other ``*.json`` files of that folder (sorted): a file no arm of params names,
        such as one left by an arm removed by hand, is not an arm's metrics and stays out.

    Raises
    ------
    ProtocolError
        An arm of params has no metrics file (the metrics stage has not run for it).
    InputError
        A metrics file is not valid JSON (naming the file and line).
    """
    from relgrade.errors import ProtocolError

    folder = ex.path("metrics")
    arms = [str(a) for a in ex.params.arms_dict()]
    missing = [a for a in arms if not (folder / f"{a}.json").is_file()]
    if missing:
        raise ProtocolError(f"{folder}: no metrics file for arm{'s' if len(missing) > 1 else ''} "
                            f"{', '.join(missing)} of params `arms`; run the metrics stage "
                            f"(`dvc repro`) first")
    left_out = sorted(p.name for p in folder.glob("*.json") if p.stem not in arms)
    return {a: io.read_json(folder / f"{a}.json") for a in arms}, left_out


def run(ex):
    metrics, left_out = arm_metrics(ex)
    if left_out:
        print(f"note: {stage_path(ex, ex.path('metrics'))}: {', '.join(left_out)} left out "
              f"of the bundle: not an arm of params `arms` (delete the "
              f"file{'s' if len(left_out) > 1 else ''} if no longer wanted)")
    record, key_batches, key_path = ex.key_batches()
    index = PrivateIndex(lambda: {  # read again only to name the owners of a leak
        "query": _pairs(ex.path("queries"), "query_id", "query"),
        "intent": _pairs(ex.path("intents"), "query_id", "intent"),
        "chunk": _pairs(ex.path("chunks"), "chunk_id", "text"),
        "reason": _reasons(ex.path("grades")),
    })
    scan = BundleScan(index, allowed=[*_ids(ex.path("queries"), "query_id"),
                                      *_ids(ex.path("chunks"), "chunk_id"), *metrics])
    out = ex.path("publish")
    names = []
    with io.atomic_dir(out) as tmp:  # built beside the old folder, then swapped in
        for name, parts in publish.bundle_parts(key_batches, record, metrics, source=key_path):
            if name in publish.LINE_FILES:
                lines = scan.lines(name)
                stream.write_chunks(tmp / name, _scanned(parts, lines))
                lines.close()
            else:
                data = b"".join(parts)
                scan.add_file(name, data)
                stream.write_chunks(tmp / name, [data])
            names.append(name)
        publish.refuse_leaks(scan.leaks())
    print(f"published {', '.join(names)} to {stage_path(ex, out)}")


def _scanned(parts, lines):
    """The chunks of ``parts``, each fed to the line scan ``lines`` as it passes."""
    for chunk in parts:
        lines.feed(chunk)
        yield chunk
