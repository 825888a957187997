"""`relgrade clicks propensity` and `relgrade clicks pairs`: printed curves, the JSON file, the
pairs file, the three log formats, and errors that name the file and leave no output."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest
from click.testing import CliRunner

from relgrade.cli import main
from relgrade.clicks import LOG_COLUMNS, ClickLog
from relgrade.clicks import propensity as PR
from relgrade.rng import derive_seed
from tests.test_clicks_pairs import HAND, HAND_PAIRS, HAND_PROPENSITY
from tests.test_clicks_propensity import HAND_HARVEST, HAND_RANDOMIZED


def run(*args):
    return CliRunner().invoke(main, ["clicks", *map(str, args)])


def write_log(path, rows):
    df = pd.DataFrame(rows, columns=list(LOG_COLUMNS))
    if path.suffix == ".csv":
        df.to_csv(path, index=False)
    else:
        df.to_parquet(path, index=False)
    return path


def write_propensity(path, propensity):
    path.write_text(json.dumps({"positions": [{"position": k, "propensity": p}
                                              for k, p in propensity.items()]}))
    return path


def table_rows(output):
    lines = output.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("position"))
    rows = []
    for line in lines[start + 1:]:
        if not line[:1].isdigit():
            break
        rows.append(line.split())
    return rows


def test_propensity_prints_the_curve_with_intervals_and_writes_it_as_json(tmp_path):
    log = write_log(tmp_path / "log.parquet", HAND_RANDOMIZED)
    out = tmp_path / "p.json"
    res = run("propensity", log, "--max-position", 3, "--seed", 7, "--bootstrap", 200,
              "--out", out)
    assert res.exit_code == 0, res.output
    lines = res.output.splitlines()
    assert lines[0] == ("propensity by randomization: 14 impressions, 6 sessions in the "
                        "randomized slice; 95% percentile intervals from 200 resamples of "
                        "sessions (seed 7)")
    assert lines[1].split() == ["position", "propensity", "ci_low", "ci_high", "support"]
    rows = table_rows(res.output)
    assert [r[0] for r in rows] == ["1", "2", "3"]
    assert [r[1] for r in rows] == ["1.0000", "0.5000", "0.1667"]  # 1, 1/2, 1/6
    assert [r[4] for r in rows] == ["-", "3", "3"]
    assert lines[-1] == f"wrote {out.as_posix()}"
    doc = json.loads(out.read_text())
    # The interval draws come from default_rng(derive_seed(seed, "clicks", "propensity",
    # method)), as docs/clicks.md says.
    expected = PR.randomization(
        ClickLog.from_frame(pd.DataFrame(HAND_RANDOMIZED, columns=list(LOG_COLUMNS))),
        rng=np.random.default_rng(derive_seed(7, "clicks", "propensity", "randomization")),
        max_position=3, n_boot=200).to_dict()
    assert doc == {"log": log.as_posix(), "log_rows": 14, "log_sessions": 6, "seed": 7,
                   **expected}
    assert [r[2] for r in rows] == [f"{p['ci_low']:.4f}" for p in doc["positions"]]


def test_the_same_seed_writes_the_same_file_and_another_seed_other_intervals(tmp_path):
    log = write_log(tmp_path / "log.parquet", HAND_RANDOMIZED)
    for name, seed in (("a.json", 1), ("b.json", 1), ("c.json", 2)):
        assert run("propensity", log, "--max-position", 3, "--seed", seed,
                   "--out", tmp_path / name).exit_code == 0
    a, b, c = ((tmp_path / n).read_bytes() for n in ("a.json", "b.json", "c.json"))
    assert a == b
    assert a != c
    pa, pc = json.loads(a)["positions"], json.loads(c)["positions"]
    assert [p["propensity"] for p in pa] == [p["propensity"] for p in pc]


def test_parquet_csv_and_a_folder_of_parquet_files_give_the_same_curve(tmp_path):
    write_log(tmp_path / "log.csv", HAND_RANDOMIZED)
    write_log(tmp_path / "log.parquet", HAND_RANDOMIZED)
    folder = tmp_path / "parts"
    folder.mkdir()
    write_log(folder / "part-0.parquet", HAND_RANDOMIZED[:7])
    write_log(folder / "part-1.parquet", HAND_RANDOMIZED[7:])
    docs = []
    for source in ("log.csv", "log.parquet", "parts"):
        out = tmp_path / f"{source}.json"
        res = run("propensity", tmp_path / source, "--max-position", 3, "--out", out)
        assert res.exit_code == 0, res.output
        doc = json.loads(out.read_text())
        docs.append({k: v for k, v in doc.items() if k != "log"})
    assert docs[0] == docs[1] == docs[2]


def test_harvesting_method_from_the_command_line(tmp_path):
    log = write_log(tmp_path / "log.parquet", HAND_HARVEST)
    res = run("propensity", log, "--method", "harvesting", "--max-position", 3)
    assert res.exit_code == 0, res.output
    assert res.output.splitlines()[0].startswith(
        "propensity by harvesting: 21 impressions, 1 queries with an interventional pair; "
        "95% percentile intervals from 1,000 resamples of queries")
    assert table_rows(res.output) == [["1", "1.0000", "1.0000", "1.0000", "-"],
                                      ["2", "0.6000", "0.6000", "0.6000", "2"],  # 3/5
                                      ["3", "undefined", "undefined", "undefined", "0"]]
    assert ("Note: positions 2-3: no interventional pair; p(3) and every position below it "
            "are undefined") in res.output


def test_pairs_writes_the_weighted_skip_above_pairs_and_a_summary(tmp_path):
    log = write_log(tmp_path / "log.parquet", HAND)
    prop = write_propensity(tmp_path / "p.json", HAND_PROPENSITY)
    out = tmp_path / "pairs.parquet"
    res = run("pairs", log, "--propensity", prop, "--out", out)
    assert res.exit_code == 0, res.output
    assert res.output == (
        f"wrote 6 pairs to {out.as_posix()} from 5 clicks in 3 sessions (11 impressions)\n"
        "Note: 1 click(s) at position(s) 4 have weight 1/p(k) > 10, clipped to 10\n")
    got = pd.read_parquet(out)
    assert list(got.columns) == ["query_id", "preferred_chunk_id", "other_chunk_id", "weight",
                                 "session_id"]
    assert list(got.itertuples(index=False, name=None)) == HAND_PAIRS


def test_pairs_clip_option_and_clicks_beyond_the_curve(tmp_path):
    log = write_log(tmp_path / "log.csv", HAND)
    prop = write_propensity(tmp_path / "p.json", {1: 1.0, 2: 0.5, 3: 0.25})
    out = tmp_path / "pairs.parquet"
    res = run("pairs", log, "--propensity", prop, "--clip", 3, "--out", out)
    assert res.exit_code == 0, res.output
    assert res.output.splitlines()[1:] == [
        f"Note: 1 click(s) at position(s) 4 have no propensity in {prop.as_posix()} and give "
        "no pair",
        "Note: 2 click(s) at position(s) 3 have weight 1/p(k) > 3, clipped to 3"]
    got = list(pd.read_parquet(out).itertuples(index=False, name=None))
    assert got == [("q1", "c", "a", 3.0, "s1"), ("q1", "c", "b", 3.0, "s1"),
                   ("q2", "f", "e", 2.0, "s3"), ("q2", "g", "e", 3.0, "s3")]


def test_csv_ids_stay_text_exactly_as_written(tmp_path):
    path = tmp_path / "log.csv"
    path.write_text("session_id,query_id,chunk_id,position,clicked,ranker,randomized\r\n"
                    "007,0042,01,1,false,A,false\r\n"
                    "007,0042,1,2,true,A,false\r\n")
    prop = write_propensity(tmp_path / "p.json", {1: 1.0, 2: 0.5})
    out = tmp_path / "pairs.parquet"
    assert run("pairs", path, "--propensity", prop, "--out", out).exit_code == 0
    assert list(pd.read_parquet(out).itertuples(index=False, name=None)) == [
        ("0042", "1", "01", 2.0, "007")]


@pytest.mark.parametrize("args,message", [
    (("propensity", "{d}/nope.parquet"), "Error: {d}/nope.parquet: file not found\n"),
    (("propensity", "{d}/log.txt"),
     "Error: {d}/log.txt: unknown log format (use .parquet, a folder of .parquet files, or "
     ".csv) (found .txt)\n"),
    (("propensity", "{d}/log.parquet", "--max-position", "1"),
     "Error: max_position must be an integer of at least 2 (found 1)\n"),
    (("propensity", "{d}/log.parquet", "--seed", "-1"),
     "Error: --seed must be a non-negative integer (found -1)\n"),
    (("pairs", "{d}/log.parquet", "--propensity", "{d}/p.json", "--clip", "0.5", "--out",
      "{d}/pairs.parquet"),
     "Error: the weight clip must be a finite number of at least 1 (weights are 1 / p(k) with "
     "p(k) at most p(1) = 1) (found 0.5)\n"),
    (("pairs", "{d}/log.parquet", "--propensity", "{d}/bad.json", "--out",
      "{d}/pairs.parquet"),
     "Error: {d}/bad.json:1: not valid JSON: expecting value at column 1\n"),
    (("pairs", "{d}/log.parquet", "--propensity", "{d}/log.parquet", "--out",
      "{d}/pairs.parquet"), None),
])
def test_bad_input_is_an_error_naming_the_file(tmp_path, args, message):
    write_log(tmp_path / "log.parquet", HAND)
    (tmp_path / "log.txt").write_text("x")
    write_propensity(tmp_path / "p.json", HAND_PROPENSITY)
    (tmp_path / "bad.json").write_text("not json")
    d = tmp_path.as_posix()
    res = run(*(a.format(d=d) for a in args))
    assert res.exit_code == 1
    if message is None:
        assert res.output.startswith(f"Error: {d}/log.parquet")
    else:
        assert res.output == message.format(d=d)
    assert not (tmp_path / "pairs.parquet").exists()


def test_a_log_missing_a_column_is_refused_naming_the_file(tmp_path):
    path = tmp_path / "log.csv"
    path.write_text("session_id,query_id,chunk_id,position,clicked,randomized\n"
                    "s1,q,a,1,1,false\n")
    res = run("propensity", path)
    assert res.exit_code == 1
    assert res.output.startswith(f"Error: {path.as_posix()}: missing column(s) ranker (found "
                                 "columns session_id, query_id, chunk_id, position, clicked, "
                                 "randomized). An impression log needs the columns")


def test_a_bad_row_leaves_an_earlier_output_untouched(tmp_path):
    rows = [*HAND, ("s3", "q2", "h", 4, 1, "A", "maybe")]
    path = tmp_path / "log.csv"
    pd.DataFrame(rows, columns=list(LOG_COLUMNS)).to_csv(path, index=False)
    prop = write_propensity(tmp_path / "p.json", HAND_PROPENSITY)
    out = tmp_path / "pairs.parquet"
    out.write_bytes(b"earlier pairs")
    res = run("pairs", path, "--propensity", prop, "--out", out)
    assert res.exit_code == 1
    assert res.output == (f"Error: {path.as_posix()}: session s3, position 4: randomized must "
                          "be true or false (or 1 / 0) (found maybe). 1 row(s) break this "
                          "rule\n")
    assert out.read_bytes() == b"earlier pairs"
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".")] == []


def test_memory_limit_is_passed_to_duckdb_and_running_out_is_a_clean_error(tmp_path):
    from tests.test_clicks_propensity import SEED, simulate_log

    log = tmp_path / "log.parquet"
    simulate_log(SEED, sessions=3000, randomized_share=0.2)[0].to_parquet(log, index=False)
    prop = write_propensity(tmp_path / "p.json", {k: 1.0 / k for k in range(1, 11)})
    free, limited = tmp_path / "free.parquet", tmp_path / "limited.parquet"
    assert run("pairs", log, "--propensity", prop, "--out", free).exit_code == 0
    res = run("pairs", log, "--propensity", prop, "--out", limited, "--memory-limit", "64MB")
    assert res.exit_code == 0, res.output
    assert pd.read_parquet(limited).equals(pd.read_parquet(free))
    res = run("pairs", log, "--propensity", prop, "--out", tmp_path / "none.parquet",
              "--memory-limit", "100KB")
    assert res.exit_code == 1
    assert res.output.startswith(f"Error: {log.as_posix()}: DuckDB ran out of memory (found ")
    assert res.output.rstrip().endswith("Raise --memory-limit, or run where DuckDB's temporary "
                                        "folder (.tmp in the working directory) has room to "
                                        "spill")
    assert not (tmp_path / "none.parquet").exists()
    res = run("propensity", log, "--memory-limit", "lots")
    assert res.exit_code == 1
    assert res.output.startswith("Error: not a memory limit DuckDB accepts (e.g. 4GB, 500MB) "
                                 "(found lots)")


def test_threads_are_passed_to_duckdb_one_by_default_and_change_no_result(tmp_path):
    from relgrade.clicks import engine
    from relgrade.clicks.log import connect
    from relgrade.errors import InputError
    from tests.test_clicks_propensity import SEED, simulate_log

    log = tmp_path / "log.parquet"
    simulate_log(SEED, sessions=3000, randomized_share=0.2)[0].to_parquet(log, index=False)

    def threads(opened):
        return opened.con.execute("SELECT current_setting('threads')").fetchall()[0][0]

    assert threads(engine.get("duckdb").open_log(log)) == 1
    assert threads(engine.get("duckdb", threads=2).open_log(log)) == 2
    assert connect(threads=None).execute("SELECT current_setting('threads')").fetchall()[0][0] \
        == duckdb_default_threads()
    with pytest.raises(InputError, match="threads must be a whole number of at least 1"):
        connect(threads=0)

    for method in ("randomization", "harvesting"):
        one, two = tmp_path / f"{method}-1.json", tmp_path / f"{method}-2.json"
        res1 = run("propensity", log, "--method", method, "--out", one)
        res2 = run("propensity", log, "--method", method, "--out", two, "--threads", 2)
        assert res1.exit_code == 0 and res2.exit_code == 0, res1.output + res2.output
        assert res1.output.replace(one.as_posix(), "OUT") == \
            res2.output.replace(two.as_posix(), "OUT")
        assert one.read_bytes() == two.read_bytes()
    pairs1, pairs2 = tmp_path / "pairs-1.parquet", tmp_path / "pairs-2.parquet"
    prop = tmp_path / "randomization-1.json"
    assert run("pairs", log, "--propensity", prop, "--out", pairs1).exit_code == 0
    res = run("pairs", log, "--propensity", prop, "--out", pairs2, "--threads", 2)
    assert res.exit_code == 0, res.output
    assert pairs1.read_bytes() == pairs2.read_bytes()

    res = run("pairs", log, "--propensity", prop, "--out", tmp_path / "none.parquet",
              "--threads", 0)
    assert res.exit_code == 2
    assert "Invalid value for '--threads': 0 is not in the range x>=1" in res.output
    assert not (tmp_path / "none.parquet").exists()


def duckdb_default_threads():
    import duckdb

    return duckdb.connect().execute("SELECT current_setting('threads')").fetchall()[0][0]
