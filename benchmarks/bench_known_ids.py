"""The pool stage's known-id check against other ways of making it, in one process.

    python benchmarks/generate.py --seed 7 --only pooling
    python benchmarks/bench_pool.py --stage --rounds 1        # makes the stage's experiment
    python benchmarks/bench_known_ids.py [--rounds 6]

The pool stage checks every row of every arm's run against the corpus's chunk ids (and the
cut rows' query ids against the query table) in one DuckDB anti-join
(:func:`relgrade.tables.pooling.runs_naming_unknown_ids`). This script reads the ten TREC
runs of the experiment ``bench_pool.py --stage`` made (5M rows, a corpus of 2^21 chunk ids),
checks and cuts each arm as the stage does, and then times, in paired rounds in rotated
order, CPU seconds (user + sys of this process, DuckDB's threads included):

* ``duckdb, every row``: the stage's check (exact);
* ``duckdb, one count over all rows``: the chunk ids of all arms as one Arrow column and one
  ``count(*)`` of the rows the anti-join keeps (no per-run answer, no query check; exact);
* ``duckdb, ids cast to string_view``: the previous on the ids cast to Arrow's
  ``string_view`` (DuckDB's own string layout), the casts included (exact);
* ``duckdb, distinct ids first``: one ``SELECT DISTINCT`` of the 5M chunk ids of all arms,
  then the anti-join on the distinct ones (exact);
* ``duckdb, the 64-bit id hashes``: the anti-join on the chunk ids' 64-bit hashes, which the
  check and cut has already made (not exact: a hash collision would pass an unknown id;
  shown for what the join itself costs);
* ``duckdb, cut rows only``: the anti-join on the rows the cut keeps (0.5M), which is not
  the protocol's check (every row must name a known chunk); shown for what it would save;
* ``direct-mapped table``: the corpus's hashes in a numpy table of 4 slots per id (the
  ones that lose a slot in further, smaller tables), each row found by its hash and then
  compared with the corpus id as text (Arrow ``take`` and ``equal``; exact), built and
  probed.

Every exact contender must name the same runs (none on this workload), or the script stops.
"""

from __future__ import annotations

import argparse
import os
import resource
import sys
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from relgrade.io.files import read_column
from relgrade.io.runtable import read_run_table
from relgrade.protocol import pool as protocol
from relgrade.ranking import arrow_array, arrow_ids
from relgrade.tables.engine import connect
from relgrade.tables.pooling import runs_naming_unknown_ids


def cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


class DirectTable:
    """Known ids in direct-mapped numpy tables keyed by the top bits of their 64-bit hash.

    Level 1 has 4 slots per id; an id whose slot another id took goes to the next, smaller
    level (an id whose hash equals the slot holder's is dropped: a value with that hash is
    compared with the holder, and a mismatch is reported, not passed). ``holds_all`` finds
    each value's candidate by its hash and compares the ids as text, so it is exact.
    """

    def __init__(self, ids):
        self.ids = arrow_ids(ids).combine_chunks()
        h = protocol.text_hashes(self.ids)
        self.hashes = h
        self.levels = []
        idx = np.arange(len(h), dtype=np.int64)
        while len(idx):
            bits = int(len(idx) - 1).bit_length() + 2
            slot = (h[idx] >> np.uint64(64 - bits)).astype(np.intp)
            table = np.full(1 << bits, -1, dtype=np.int64)
            table[slot] = idx
            won = table[slot]
            self.levels.append((np.uint64(64 - bits), table))
            idx = idx[(won != idx) & (h[won] != h[idx])]

    def holds_all(self, values, hashes) -> bool:
        arr = arrow_ids(values)
        at = np.full(len(hashes), -1, dtype=np.int64)
        rows, h = np.arange(len(hashes)), hashes
        for shift, table in self.levels:
            cand = table[(h >> shift).astype(np.intp)]
            ok = (cand >= 0) & (self.hashes[cand] == h)
            at[rows[ok]] = cand[ok]
            rows = rows[~ok]
            if not len(rows):
                break
            h = hashes[rows]
        if len(rows):
            return False
        return bool(pc.all(pc.equal(arr, self.ids.take(arrow_array(at)))).as_py())


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--exp", type=Path,
                    default=Path("benchmarks/out/pool/stage-repo/experiments/pooling"))
    ap.add_argument("--rounds", type=int, default=6)
    args = ap.parse_args(argv)
    runs = sorted((args.exp / "data/runs").glob("*.trec"))
    if not runs:
        print(f"no runs under {args.exp}: run bench_pool.py --stage first", file=sys.stderr)
        return 1
    queries = read_column(args.exp / "data/queries/queries.parquet", "query_id") \
        if (args.exp / "data/queries/queries.parquet").exists() else None
    chunks = read_column(args.exp / "data/corpus/chunks.parquet", "chunk_id")
    tables = [read_run_table(p) for p in runs]
    chunk_ids = [t["chunk_id"] for t in tables]
    cuts = [protocol.arm_candidates(t, 10) for t in tables]
    hashes = [protocol.text_hashes(c) for c in chunk_ids]
    del tables
    every = pa.chunked_array([c for ids in chunk_ids for c in ids.chunks])

    def every_row():
        with connect() as con:
            return runs_naming_unknown_ids(con, query_ids=[c["query_id"] for c in cuts],
                                           chunk_ids=chunk_ids, queries=queries, chunks=chunks)

    def cut_rows():
        with connect() as con:
            return runs_naming_unknown_ids(con, query_ids=[c["query_id"] for c in cuts],
                                           chunk_ids=[c["chunk_id"] for c in cuts],
                                           queries=queries, chunks=chunks)

    def string_views():
        with connect() as con:
            con.register("relgrade_rows", pa.table({"c": every.cast(pa.string_view())}))
            con.register("relgrade_known", pa.table({"c": chunks.cast(pa.string_view())}))
            n = con.execute("SELECT count(*) FROM relgrade_rows AS r ANTI JOIN "
                            "relgrade_known AS k ON r.c = k.c").fetchone()[0]
        return [] if n == 0 else ["some"]

    def one_table():
        with connect() as con:
            con.register("relgrade_rows", pa.table({"c": every}))
            con.register("relgrade_known", pa.table({"c": chunks}))
            n = con.execute("SELECT count(*) FROM relgrade_rows AS r ANTI JOIN "
                            "relgrade_known AS k ON r.c = k.c").fetchone()[0]
        return [] if n == 0 else ["some"]

    def distinct_first():
        with connect() as con:
            con.register("relgrade_rows", pa.table({"c": every}))
            con.register("relgrade_known", pa.table({"c": chunks}))
            n = con.execute("SELECT count(*) FROM (SELECT DISTINCT c FROM relgrade_rows) AS d "
                            "ANTI JOIN relgrade_known AS k ON d.c = k.c").fetchone()[0]
        return [] if n == 0 else ["some"]

    def hash_join():
        with connect() as con:
            con.register("relgrade_rows", pa.table({"h": pa.chunked_array(
                [arrow_array(h) for h in hashes])}))
            con.register("relgrade_known", pa.table({"h": arrow_array(
                protocol.text_hashes(chunks))}))
            n = con.execute("SELECT count(*) FROM relgrade_rows AS r ANTI JOIN "
                            "relgrade_known AS k ON r.h = k.h").fetchone()[0]
        return [] if n == 0 else ["some"]

    def direct_table():
        known = DirectTable(chunks)
        return [i for i, (c, h) in enumerate(zip(chunk_ids, hashes))
                if not known.holds_all(c, h)]

    # the exact contenders refuse an unknown id, and a prefix of a known one, on a small case
    small = DirectTable(["c1", "c2", "é"])
    probe = arrow_ids(["c2", "é", "c1"])
    assert small.holds_all(probe, protocol.text_hashes(probe))
    for bad in (["c1", "c3"], ["c"], ["c22"]):
        assert not small.holds_all(arrow_ids(bad), protocol.text_hashes(arrow_ids(bad)))

    contenders = {"duckdb, every row (the stage)": (every_row, True),
                  "duckdb, one count over all rows": (one_table, True),
                  "duckdb, ids cast to string_view": (string_views, True),
                  "duckdb, distinct ids first": (distinct_first, True),
                  "duckdb, the 64-bit id hashes": (hash_join, False),
                  "duckdb, cut rows only": (cut_rows, False),
                  "direct-mapped table + text compare": (direct_table, True)}
    names = list(contenders)
    got = {n: [] for n in names}
    answers = {}
    print(f"{sum(len(c) for c in chunk_ids):,} run rows, {len(chunks):,} known chunk ids; "
          f"load average at start: {' '.join(f'{x:.2f}' for x in os.getloadavg())}",
          flush=True)
    for r in range(args.rounds):
        for name in names[r % len(names):] + names[:r % len(names)]:
            fn, exact = contenders[name]
            t = cpu()
            out = fn()
            got[name].append(cpu() - t)
            if exact:
                answers.setdefault(name, out)
    if len({repr(a) for a in answers.values()}) != 1:
        print(f"the exact contenders disagree: {answers}", file=sys.stderr)
        return 1
    print(f"load average at end: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    print(f"{args.rounds} rounds; every exact contender names the same runs: "
          f"{next(iter(answers.values()))}")
    base = got[names[0]]
    print(f"\n{'contender':40} {'CPU s (median)':>15} {'paired vs the stage':>20}  rounds")
    for name in names:
        diff = float(np.median(np.subtract(got[name], base)))
        print(f"{name:40} {np.median(got[name]):15.3f} {diff:+20.3f}  "
              + " ".join(f"{x:.2f}" for x in got[name]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
