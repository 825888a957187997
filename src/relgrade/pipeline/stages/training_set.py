"""Stage `training_set` (click experiments): the key's grades and the click pairs, together.

Reads the frozen key (``clicks.key``: a key folder holding key.jsonl and record.json, this
experiment's or another's ``data/key/``; its sha256 is checked against the record) and the
pairs (``paths.click_pairs``), and writes under ``paths.training_set``:

* ``training.parquet``: every row (see :mod:`relgrade.clicks.training`);
* ``key.tsv`` + ``key.query``: the graded rows (label, query_id, chunk_id) and LightGBM's
  group file (one group size per line, in row order);
* ``clicks.tsv`` + ``clicks.query``: the preference rows (query_id, chunk_id,
  other_chunk_id, weight) and their per-query group sizes;
* ``manifest.json``: counts, the leakage rule applied, and whether the key is simulated.
"""

import pandas as pd

from relgrade.clicks import training
from relgrade.errors import ProtocolError
from relgrade.io import files as io
from relgrade.io.judgments import read_judgments


def run(ex):
    c = ex.params.need("clicks")
    key_dir = ex.file(ex.params.need("clicks.key"))
    record = io.read_json(key_dir / "record.json")
    found = io.sha256_file(key_dir / "key.jsonl")
    if record.get("key_sha256") != found:
        raise ProtocolError(f"{(key_dir / 'key.jsonl').as_posix()}: the key's sha256 is not "
                            f"the one its record froze (found {found[:12]}..., record "
                            f"{str(record.get('key_sha256'))[:12]}...); rebuild the key")
    key = read_judgments(key_dir / "key.jsonl")
    pairs = pd.read_parquet(ex.path("click_pairs"), columns=list(training.PAIR_INPUT))
    rows, summary = training.training_set(key, pairs,
                                          exclude_eval_queries=c.exclude_eval_queries)
    graded = rows[rows["source"] == "key"]
    prefs = rows[rows["source"] == "clicks"]
    with io.atomic_dir(ex.path("training_set")) as out:
        rows.to_parquet(out / "training.parquet", index=False)
        graded[["label", "query_id", "chunk_id"]].astype({"label": "int64"}).to_csv(
            out / "key.tsv", sep="\t", index=False, lineterminator="\n")
        (out / "key.query").write_text(
            "".join(f"{n}\n" for n in training.group_sizes(graded)), encoding="utf-8")
        prefs[["query_id", "chunk_id", "other_chunk_id", "weight"]].to_csv(
            out / "clicks.tsv", sep="\t", index=False, lineterminator="\n",
            float_format="%.10g")
        (out / "clicks.query").write_text(
            "".join(f"{n}\n" for n in training.group_sizes(prefs)), encoding="utf-8")
        manifest = {"key": ex.params.need("clicks.key"), "key_sha256": found,
                    "key_simulated": bool(record.get("simulated", False)),
                    "pairs": ex.params.paths.click_pairs,
                    "rule": "human grades for evaluation, clicks for training, never the "
                            "reverse", **summary}
        io.write_json(out / "manifest.json", manifest)
    print(f"training set: {summary['key_rows']:,} graded rows, {summary['click_rows']:,} "
          f"preference rows ({summary['pairs_excluded']:,} pairs of "
          f"{summary['queries_excluded']:,} key queries left out)")

