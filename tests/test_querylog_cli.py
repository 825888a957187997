"""``relgrade queries sample``: the printed strata, a queries file the pipeline accepts,
seeds, both log formats, and errors that leave no output behind."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from relgrade.cli import main
from relgrade.io.files import read_lines, read_rows
from relgrade.protocol import queries
from relgrade.query_sampling import STRATA

# The 10-query log of test_querylog as issued: 37 lines, with spelling variants and a blank line.
COUNTS = [("python tutorial", 12), ("pandas merge", 6), ("numpy array", 5),
          ("click option", 3), ("dvc repro", 3), ("ndcg formula", 2), ("kappa weights", 2),
          ("pytest fixture", 2), ("bm25 k1", 1), ("trec qrels", 1)]


def log_text() -> str:
    lines = ["Python Tutorial", "  python\ttutorial ", "PYTHON  TUTORIAL"] + \
            ["python tutorial"] * 9 + [""] + ["Pandas Merge"] + ["pandas merge"] * 5
    for query, count in COUNTS[2:]:
        lines += [query] * count
    return "\n".join(lines) + "\n"


def run(*args):
    return CliRunner().invoke(main, ["queries", "sample", *map(str, args)])


def read_queries(path: Path):
    """What the queries stage does with a .tsv input, groups head/torso/tail."""
    table, lines = read_rows(path, queries.REQUIRED_COLUMNS)
    return queries.validate_queries(table, groups=list(STRATA), path=path, lines=lines)


def expected_output(log: Path, out: Path, seed=7) -> str:
    # head: 2 queries, 18 of 37; torso 3, 11; tail 5, 8. Equal allocation of 6: 2 each.
    # Weights: head both certain (12, 6); torso 11/2 each (2*5 < 11, no certainty);
    # tail 8/2 each. Kish: 37**2 / (12**2 + 6**2 + 2*5.5**2 + 2*4**2) = 1369/272.5 = 5.02
    return (f"{log}: 37 issued queries, 10 distinct\n"
            "stratum  queries  traffic  share  sampled  weight\n"
            "head     2        18       48.6%  2        9\n"
            "torso    3        11       29.7%  2        5.5\n"
            "tail     5        8        21.6%  2        4\n"
            f"sampled 6 queries (allocation equal, seed {seed}); effective size under the "
            "traffic weights 5.0\n"
            f"wrote {out}; to use it set queries.groups: [head, torso, tail] (and "
            "metrics.weighted: true for traffic-weighted means) in the params file\n")


@pytest.fixture
def log(tmp_path) -> Path:
    path = tmp_path / "log.txt"
    path.write_text(log_text(), encoding="utf-8")
    return path


def test_text_log_gives_a_queries_file_the_pipeline_accepts(tmp_path, log):
    out = tmp_path / "queries.tsv"
    result = run(log, "--n", 6, "--seed", 7, "--out", out)
    assert result.exit_code == 0, result.output
    assert result.output == expected_output(log, out)
    assert read_lines(out)[0] == "query_id\tquery\tgroup\tweight\tcount"
    table = read_queries(out)
    assert len(table) == 6
    assert table.groupby("group")["weight"].sum().to_dict() == {"head": 18.0, "torso": 11.0,
                                                                "tail": 8.0}
    head = table[table["group"] == "head"].set_index("query")["weight"].to_dict()
    assert head == {"python tutorial": 12.0, "pandas merge": 6.0}


def test_tsv_log_with_counts_gives_the_same_file_as_the_issued_log(tmp_path, log):
    tsv = tmp_path / "log.tsv"
    rows = ["count\tquery", "4\tPython Tutorial", "8\tpython tutorial"] + \
        [f"{c}\t{q}" for q, c in COUNTS[1:]]
    tsv.write_text("\n".join(rows) + "\n", encoding="utf-8")
    a, b = tmp_path / "a.tsv", tmp_path / "b.tsv"
    assert run(log, "--n", 6, "--seed", 3, "--out", a).exit_code == 0
    result = run(tsv, "--n", 6, "--seed", 3, "--out", b)
    assert result.exit_code == 0, result.output
    assert a.read_bytes() == b.read_bytes()


def test_same_seed_same_file_and_the_params_seed_is_the_default(tmp_path, log):
    a, b, c = tmp_path / "a.tsv", tmp_path / "b.tsv", tmp_path / "c.tsv"
    assert run(log, "--n", 6, "--seed", 7, "--out", a).exit_code == 0
    assert run(log, "--n", 6, "--seed", 7, "--out", b).exit_code == 0
    assert a.read_bytes() == b.read_bytes()
    params = tmp_path / "params.yaml"
    params.write_text("seed: 7\npaths: {}\n")
    result = run(log, "--n", 6, "--params", params, "--out", c)
    assert result.exit_code == 0, result.output
    assert result.output == expected_output(log, c)
    assert c.read_bytes() == a.read_bytes()


def test_a_different_seed_draws_a_different_sample(tmp_path):
    log = tmp_path / "log.txt"
    log.write_text("".join(f"query {i}\n" * (1 + i % 3) for i in range(60)))
    drawn = set()
    for seed in range(5):
        out = tmp_path / f"s{seed}.tsv"
        assert run(log, "--n", 10, "--seed", seed, "--out", out).exit_code == 0
        drawn.add(out.read_bytes())
    assert len(drawn) > 1


def test_query_text_with_quotes_survives_the_round_trip(tmp_path):
    log = tmp_path / "log.txt"
    log.write_text('say "hi" #1\nsay "hi" #1\nit\'s\nplain\n', encoding="utf-8")
    out = tmp_path / "q.tsv"
    result = run(log, "--n", 3, "--seed", 1, "--out", out)
    assert result.exit_code == 0, result.output
    assert sorted(read_queries(out)["query"]) == ["it's", "plain", 'say "hi" #1']


def test_shares_and_allocation_options_change_the_strata_and_the_split(tmp_path, log):
    out = tmp_path / "q.tsv"
    result = run(log, "--n", 6, "--seed", 7, "--head-share", 0.25, "--torso-share", 0.5,
                 "--allocation", "head=1,torso=0,tail=1", "--out", out)
    assert result.exit_code == 0, result.output
    lines = result.output.splitlines()
    # head cut 9.25 of 37: only "python tutorial"; torso 6, 5, 3, 3 (mids 15, 20.5, 26)
    assert lines[2:5] == ["head     1        12       32.4%  1        12",
                          "torso    4        17       45.9%  0        -",
                          "tail     5        8        21.6%  5        1.6"]
    assert lines[5] == ("note: the torso (4 queries, 45.9% of the traffic) is not sampled; "
                        "weighted means cover the other strata only")
    assert sorted(read_queries(out)["group"]) == ["head"] + ["tail"] * 5


@pytest.mark.parametrize("setup,args,message", [
    ("blank", ["--n", 5, "--seed", 1], "{log}: query log is empty. Give a log with at least "
                                         "one query"),
    ("log", ["--n", 11, "--seed", 1], "n is larger than the distinct queries the sampled "
                                      "strata hold (found n=11, 10 distinct queries). Ask for "
                                      "at most 10 queries"),
    ("log", ["--n", 0, "--seed", 1], "n must be a positive integer (found 0)"),
    ("log", ["--n", 5, "--seed", 1, "--head-share", 0.6, "--torso-share", 0.4],
     "head share + torso share must be less than 1, so the tail has a share of the traffic "
     "(found 0.6 + 0.4). Lower --head-share or --torso-share"),
    ("log", ["--n", 5, "--seed", 1, "--head-share", 0],
     "head share must be greater than 0 and less than 1 (found 0.0)"),
    ("log", ["--n", 5, "--seed", 1, "--allocation", "neyman"],
     "--allocation must be equal, proportional or head=A,torso=B,tail=C with numbers A, B, C "
     "(found 'neyman')"),
    ("log", ["--n", 5, "--seed", 1, "--allocation", "body=1"],
     "allocation names a stratum that is not one of head, torso, tail (found 'body')"),
    ("log", ["--n", 5, "--params", "{tmp}/none.yaml"],
     "{tmp}/none.yaml: no seed: give --seed, or run where the params file has a `seed`"),
    ("nocount", ["--n", 5, "--seed", 1],
     "{log}: missing column(s) count (found columns query). A .tsv log needs a header row "
     "with query and count; give a log of one query per line another extension (.txt)"),
    ("badcount", ["--n", 1, "--seed", 1],
     "{log}:3: count must be a positive integer (found 'many')"),
    ("absent", ["--n", 5, "--seed", 1], "{log}: LOG: file not found"),
])
def test_bad_input_is_an_error_and_writes_nothing(tmp_path, setup, args, message):
    texts = {"blank": ("log.txt", "\n  \n\n"), "log": ("log.txt", log_text()),
             "nocount": ("log.tsv", "query\nfoo\n"),
             "badcount": ("log.tsv", "query\tcount\nfoo\t3\nbar\tmany\n")}
    name, text = texts.get(setup, ("absent.txt", None))
    log = tmp_path / name
    if text is not None:
        log.write_text(text, encoding="utf-8")
    out = tmp_path / "queries.tsv"
    out.write_text("kept\n")
    args = [str(a).format(tmp=tmp_path) for a in args]
    result = run(log, *args, "--out", out)
    assert result.exit_code == 1
    assert result.output.strip() == "Error: " + message.format(log=log, tmp=tmp_path)
    assert out.read_text() == "kept\n"
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".")] == []
