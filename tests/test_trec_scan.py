"""The compiled scan of a TREC run file gives what the reader, ``run_codes`` and the duplicate
check give, or leaves the file to them; ``relgrade evaluate`` prints the same either way."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from click.testing import CliRunner
from hypothesis import given, settings
from hypothesis import strategies as st

from relgrade.cli import main
from relgrade.errors import InputError
from relgrade.io import trec_scan
from relgrade.io.runs import read_run, run_lines
from relgrade.io.trec_scan import read_run_coded
from relgrade.ranking import run_codes, validate_run

MASK = (1 << 64) - 1
MIX1, MIX2 = 0xBF58476D1CE4E5B9, 0x94D049BB133111EB


def _hash(text: str) -> int:
    """ranking._text_hash written out with Python integers (its docstring's formula)."""
    data = text.encode()
    h = len(data)
    for i in range(0, len(data), 8):
        h = ((h ^ int.from_bytes(data[i:i + 8], "little")) * MIX1) & MASK
    h ^= h >> 30
    h = (h * MIX1) & MASK
    h ^= h >> 27
    h = (h * MIX2) & MASK
    return h ^ (h >> 31)


def _scan(tmp_path, text: bytes):
    path = tmp_path / "r.trec"
    path.write_bytes(text)
    return path, trec_scan.scan_trec_run(path)


def _same_as_reader(path):
    scanned = trec_scan.scan_trec_run(path)
    assert scanned is not None
    run, codes = trec_scan.coded_run(scanned)
    ref = read_run(path)
    ref_codes = run_codes(ref, path=path)
    pd.testing.assert_frame_equal(run, ref, check_exact=True)
    assert run.dtypes.tolist() == ref.dtypes.tolist()
    assert np.array_equal(run["score"].to_numpy().view(np.uint64),
                          ref["score"].to_numpy().view(np.uint64))
    assert np.array_equal(codes.query, ref_codes.query)
    assert codes.queries.equals(ref_codes.queries)
    assert np.array_equal(codes.chunk_hash, ref_codes.chunk_hash)
    return run, codes


def test_scan_reads_a_small_run_as_the_reader_does_with_hand_computed_hashes(tmp_path):
    path, _ = _scan(tmp_path, b"q2 Q0 doc-long-id-17 1 2.5 bm25\n"
                              b"q2 Q0 d 2 -0.25 bm25\n"
                              b"q1 Q0 d 1 1e3 bm25\n"
                              b"q1 Q0 chunk_0007 2 007.50 bm25\n")
    run, codes = _same_as_reader(path)
    assert run["query_id"].tolist() == ["q2", "q2", "q1", "q1"]
    assert run["rank"].tolist() == [1, 2, 1, 2]
    assert run["score"].tolist() == [2.5, -0.25, 1000.0, 7.5]
    # first seen, first coded
    assert codes.query.tolist() == [0, 0, 1, 1]
    assert codes.queries.to_pylist() == ["q2", "q1"]
    assert codes.chunk_hash.tolist() == [_hash("doc-long-id-17"), _hash("d"), _hash("d"),
                                         _hash("chunk_0007")]
    assert codes.distinct  # each query one block, no chunk twice in it


@pytest.mark.parametrize("text", [
    b"1\tQ0\ta\t1\t3\trun\n1\tQ0\tb\t2\t2\trun\n",            # tabs
    b"1 Q0 a 1 3 run\r\n1 Q0 b 2 2 run\r\n",                    # CRLF
    b"\xef\xbb\xbf1 Q0 a 1 3 run\n2 Q0 b 1 2 run",              # BOM, no final LF
    b"1 Q0 a -3 0.1 run\n1 Q0 b 0 -0 run\n1 Q0 c 12 1E+05 run\n",  # signs, exponents
    b"1 Q0 a 1 0.30000000000000004 r\n1 Q0 b 2 123456789012345678901234 r\n"
    b"1 Q0 c 3 1e-300 r\n1 Q0 d 4 4.9e-324 r\n1 Q0 e 5 1.7976931348623157e308 r\n",
])
def test_scan_agrees_with_the_reader_on_separators_line_ends_and_numbers(tmp_path, text):
    path, scanned = _scan(tmp_path, text)
    assert scanned is not None
    _same_as_reader(path)


def test_a_query_in_two_blocks_is_coded_once_and_proves_nothing(tmp_path):
    path, _ = _scan(tmp_path, b"a Q0 x 1 3 r\nb Q0 x 1 3 r\na Q0 y 2 2 r\n")
    run, codes = _same_as_reader(path)
    assert codes.query.tolist() == [0, 1, 0]
    assert not codes.distinct  # the duplicate check runs in full
    validate_run(run, path=path, codes=codes)


@pytest.mark.parametrize("text, lines", [
    (b"1 Q0 a 1 3 r\n1 Q0 a 2 2 r\n", (1, 2)),               # adjacent repeat
    (b"1 Q0 a 1 3 r\n2 Q0 b 1 3 r\n1 Q0 a 5 2 r\n", (1, 3)),  # repeat across blocks
])
def test_a_repeated_chunk_is_refused_with_the_readers_message(tmp_path, text, lines):
    path, _ = _scan(tmp_path, text)
    run, codes = read_run_coded(path)
    assert not codes.distinct
    with pytest.raises(InputError) as scanned:
        validate_run(run, path=path, codes=codes, lines=run_lines(path))
    ref = read_run(path)
    with pytest.raises(InputError) as plain:
        validate_run(ref, path=path, lines=run_lines(path))
    assert str(scanned.value) == str(plain.value)
    assert str(plain.value).startswith(
        f"{path}:{lines[1]}: query 1, chunk a: a chunk is listed twice for one query "
        f"(found lines {lines[0]} and {lines[1]})")


NOT_MINE = [
    b"",                                   # empty
    b"\xef\xbb\xbf",                       # a byte-order mark alone
    b"1 Q0 a 1 3 r\n\n1 Q0 b 2 2 r\n",     # blank line
    b"1 Q0 a 1 3 r\n1  Q0 b 2 2 r\n",      # doubled separator
    b" 1 Q0 a 1 3 r\n",                    # leading separator
    b"1 Q0 a 1 3 r \n",                    # trailing separator
    b"1 Q0 a 1 3 r extra\n",               # a seventh field
    b"1 Q0 a 1 3\n",                       # five fields
    b"1 Q0 a\t1 3 r\n",                    # the other separator
    b"1\tQ0\ta b\t1\t3\tr\n",              # a space in a tab-separated id
    b"1 Q0 a\x0b 1 3 r\n",                 # vertical tab
    b"1 Q0 a\x1fb 1 3 r\n",                # U+001F in an id
    "1 Q0 caf\u00e9 1 3 r\n".encode(),     # non-ASCII
    b"1 Q0 a\xff 1 3 r\n",                 # invalid UTF-8
    b"1 Q0 a 1 +3 r\n",                    # plus sign
    b"1 Q0 a 1 inf r\n",
    b"1 Q0 a 1 nan r\n",
    b"1 Q0 a 1 1e400 r\n",                 # overflows to inf
    b"1 Q0 a 1 .5 r\n",
    b"1 Q0 a 1 1. r\n",
    b"1 Q0 a 1 1_0 r\n",
    b"1 Q0 a 0x1 3 r\n",                   # hex rank
    b"1 Q0 a 1.0 3 r\n",                   # rank not an integer
    b"1 Q0 a 1 3 r\r1 Q0 b 2 2 r\n",       # a lone CR
    b"1 Q0 a 1 3\tr\n",
]


@pytest.mark.parametrize("text", NOT_MINE)
def test_lines_outside_the_scan_are_left_to_the_reader(tmp_path, text):
    path, scanned = _scan(tmp_path, text)
    assert scanned is None
    # and read_run_coded then gives what the reader gives: a table or its error
    try:
        ref = read_run(path)
    except InputError as e:
        with pytest.raises(InputError) as got:
            read_run_coded(path)
        assert str(got.value) == str(e)
    else:
        run, _ = read_run_coded(path)
        pd.testing.assert_frame_equal(run, ref, check_exact=True)


def test_without_the_c_module_the_reader_reads_every_file(tmp_path, monkeypatch):
    path, _ = _scan(tmp_path, b"1 Q0 a 1 3 r\n")
    monkeypatch.setattr(trec_scan, "_kernels", lambda: None)
    assert trec_scan.scan_trec_run(path) is None
    run, codes = read_run_coded(path)
    pd.testing.assert_frame_equal(run, read_run(path))
    assert not codes.distinct


_NUMBER = st.from_regex(r"\A-?[0-9]{1,25}(\.[0-9]{1,25})?([eE][+-]?[0-9]{1,3})?\Z")


@settings(max_examples=600, deadline=None)
@given(st.one_of(_NUMBER, st.floats(allow_nan=False, allow_infinity=False).map(repr)))
def test_scores_are_pythons_float_bit_for_bit(text):
    value = float(text)
    line = f"1 Q0 a 1 {text} r\n".encode()
    scanned = trec_scan.scan_bytes(np.frombuffer(line, dtype=np.uint8), b" ")
    if not np.isfinite(value) or "inf" in text or "nan" in text:
        assert scanned is None
        return
    assert scanned is not None, text
    got = scanned.score[0]
    assert np.float64(value).view(np.uint64) == got.view(np.uint64), text


def _cli(tmp_path, runs, *args):
    return CliRunner().invoke(main, ["evaluate", str(tmp_path / "key.qrels"),
                                     *map(str, runs), *args])


CLI_RUNS = {
    "good": b"1 Q0 a 1 3.5 r\n1 Q0 b 2 3.5 r\n1 Q0 c 3 1 r\n2 Q0 a 1 2 r\n2 Q0 d 2 1e-1 r\n",
    "dup": b"1 Q0 a 1 3 r\n1 Q0 a 2 2 r\n",
    "split": b"1 Q0 a 1 3 r\n2 Q0 a 1 3 r\n1 Q0 b 2 2 r\n",
    "nan": b"1 Q0 a 1 nan r\n",
    "short": b"1 Q0 a 1 3 r\n1 Q0 b 2\n",
    "extra": b"1 Q0 a 1 3 r x\n1 Q0 b 2 2 r\n",
    "sep": b"1 Q0 a\x1fb 1 3 r\n",
}


@pytest.mark.parametrize("args", [
    ("-m", "ndcg_cut.10", "-m", "recall.10", "-m", "recip_rank", "--per-query"),
    ("--ties", "rank", "-m", "RR", "-m", "ndcg_cut.10", "--per-query", "--json"),
    ("--trec-eval-output", "--per-query", "-m", "recip_rank", "-m", "AP"),
])
@pytest.mark.parametrize("name", sorted(CLI_RUNS))
def test_evaluate_prints_the_same_with_and_without_the_scan(tmp_path, monkeypatch, name,
                                                            args):
    (tmp_path / "key.qrels").write_text("1 0 a 2\n1 0 c 1\n2 0 d 1\n2 0 e 2\n")
    run = tmp_path / f"{name}.trec"
    run.write_bytes(CLI_RUNS[name])
    good = tmp_path / "good.trec"
    good.write_bytes(CLI_RUNS["good"])
    monkeypatch.setattr(trec_scan, "SCAN_MIN_BYTES", 1 << 62)
    monkeypatch.delitem(__import__("sys").modules, trec_scan.KERNELS_MODULE, raising=False)
    assert not trec_scan.worth_scanning([run])
    plain = _cli(tmp_path, [good, run], *args)
    monkeypatch.setattr(trec_scan, "SCAN_MIN_BYTES", 0)
    assert trec_scan.worth_scanning([run])
    calls = []
    scan = trec_scan.scan_trec_run
    monkeypatch.setattr(trec_scan, "scan_trec_run",
                        lambda path: calls.append(scan(path) is not None) or scan(path))
    scanned = _cli(tmp_path, [good, run], *args)
    assert calls and calls[0]  # the good run went through the scan
    assert (scanned.exit_code, scanned.output) == (plain.exit_code, plain.output)
    if name in ("dup", "nan", "short", "sep"):
        assert scanned.exit_code == 1 and "Error:" in scanned.output


@pytest.mark.parametrize("block", [1, 5, 13, 64])
@pytest.mark.parametrize("text", [
    b"\xef\xbb\xbf1 Q0 doc-a 1 3.25 r\r\n1 Q0 doc-b 2 2 r\r\n2 Q0 c 1 1e-2 r",
    b"10\tQ0\ta\t1\t0.1234567890123456789\tr\n10\tQ0\tb\t2\t2\tr\n11\tQ0\ta\t1\t-5\tr\n",
])
def test_block_boundaries_anywhere_give_the_same_run(tmp_path, monkeypatch, block, text):
    path, _ = _scan(tmp_path, text)
    monkeypatch.setattr(trec_scan, "BLOCK_BYTES", block)
    _same_as_reader(path)


@pytest.mark.parametrize("block", [1, 7, 64])
def test_a_bad_line_after_the_first_block_is_left_to_the_reader(tmp_path, monkeypatch, block):
    path, _ = _scan(tmp_path, b"1 Q0 a 1 3 r\n1 Q0 b 2 2 r\n1 Q0 c 3 inf r\n")
    monkeypatch.setattr(trec_scan, "BLOCK_BYTES", block)
    assert trec_scan.scan_trec_run(path) is None


def test_when_the_output_arrays_are_refused_the_reader_reads_the_file(tmp_path, monkeypatch):
    path, _ = _scan(tmp_path, b"1 Q0 a 1 3 r\n")

    def refuse(size, compiled):
        raise MemoryError

    monkeypatch.setattr(trec_scan, "_Columns", refuse)
    assert trec_scan.scan_trec_run(path) is None
    run, _ = read_run_coded(path)
    pd.testing.assert_frame_equal(run, read_run(path))


def test_without_the_c_module_in_a_fresh_process_the_reader_reads_every_file(tmp_path):
    # an install made without a C compiler has no relgrade.io._trec_scan; simulated by
    # making its import fail
    import subprocess
    import sys

    path = tmp_path / "r.trec"
    path.write_bytes(b"1 Q0 a 1 3 r\n1 Q0 b 2 2.5 r\n2 Q0 a 1 1 r\n")
    code = (
        "import sys\n"
        "sys.modules['relgrade.io._trec_scan'] = None\n"
        "from relgrade.io import trec_scan\n"
        "assert trec_scan._kernels() is None\n"
        "assert trec_scan.scan_trec_run(sys.argv[1]) is None\n"
        "run, codes = trec_scan.read_run_coded(sys.argv[1])\n"
        "print(run['chunk_id'].tolist(), run['score'].tolist(), codes.query.tolist(),\n"
        "      codes.distinct)\n")
    out = subprocess.run([sys.executable, "-c", code, str(path)], capture_output=True,
                         text=True, check=True).stdout
    assert out.strip() == "['a', 'b', 'a'] [3.0, 2.5, 1.0] [0, 0, 1] False"


def test_evaluate_scans_in_a_fresh_process_without_loading_numba_or_llvmlite(tmp_path):
    # the scan is C: the process that reads runs through it never loads numba and its LLVM
    # (about 120 MiB and 0.5 CPU-s); nDCG@10 is trec_eval's, linear gain: query 1 ranks a
    # (grade 2) first, ideal a then c (grade 1); query 2 ranks d (grade 1) second
    import json
    import subprocess
    import sys

    (tmp_path / "key.qrels").write_text("1 0 a 2\n1 0 c 1\n2 0 d 1\n")
    run = tmp_path / "r.trec"
    run.write_text("1 Q0 a 1 3 r\n1 Q0 b 2 2 r\n2 Q0 x 1 5 r\n2 Q0 d 2 4 r\n")
    code = (
        "import sys\n"
        "from relgrade.io import trec_scan\n"
        "trec_scan.SCAN_MIN_BYTES = 0\n"
        "scanned = []\n"
        "scan = trec_scan.scan_trec_run\n"
        "trec_scan.scan_trec_run = lambda p: scanned.append(scan(p) is not None) or scan(p)\n"
        "from relgrade.cli import main\n"
        "try:\n"
        "    main(sys.argv[1:], prog_name='relgrade')\n"
        "finally:\n"
        "    print([m in sys.modules for m in ('numba', 'llvmlite', trec_scan.KERNELS_MODULE)],\n"
        "          scanned, file=sys.stderr)\n")
    done = subprocess.run([sys.executable, "-c", code, "evaluate", str(tmp_path / "key.qrels"),
                           str(run), "-m", "recip_rank", "-m", "ndcg_cut.10", "--json"],
                          capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert done.stderr.strip() == "[False, False, True] [True]"
    got = json.loads(done.stdout)["runs"]["r"]
    assert got["RR"] == (1 + 1 / 2) / 2
    assert got["nDCG@10"] == pytest.approx((2 / (2 + 1 / np.log2(3)) + 1 / np.log2(3)) / 2,
                                           rel=1e-15)


def test_a_file_that_outgrows_its_size_while_read_is_left_to_the_reader(tmp_path, monkeypatch):
    # the output arrays are sized by the file's size when it is opened; a file that grows
    # while it is read fills them up: the C scan answers FULL, never writes past them, and
    # the reader reads the file (simulated by arrays sized for half the file)
    path, _ = _scan(tmp_path, b"1 Q0 a 1 3 r\n" * 40)
    columns = trec_scan._columns
    monkeypatch.setattr(trec_scan, "_columns", lambda size, k: columns(size // 2, k))
    assert trec_scan.scan_trec_run(path) is None
    run, _ = read_run_coded(path)
    pd.testing.assert_frame_equal(run, read_run(path))


def _outputs(size):
    rows = size // 12 + 2
    return dict(qoff=np.zeros(rows + 1, np.int64), qbytes=np.zeros(size, np.uint8),
                coff=np.zeros(rows + 1, np.int64), cbytes=np.zeros(size, np.uint8),
                rank=np.zeros(rows, np.int64), score=np.zeros(rows, np.float64),
                slow=np.zeros(rows, np.int64), soff=np.zeros(rows + 1, np.int64),
                sbytes=np.zeros(size, np.uint8), heads=np.zeros(rows, np.int64),
                counts=np.zeros(6, np.int64))


def test_the_c_scan_fills_its_arrays_only_within_their_bounds():
    k = trec_scan._kernels()
    if k is None:
        pytest.skip("the C scan is not built")
    data = np.frombuffer(b"q1 Q0 d7 3 2.5e-1 t\nq1 Q0 d8 4 1e-30 t\nq2 Q0 d7 1 5 t\n",
                         dtype=np.uint8)
    out = _outputs(len(data))
    assert k.scan(data, 0, ord(" "), *out.values()) == (k.OK, len(data))
    # rows, query-id bytes, chunk-id bytes, blocks, slow scores and their bytes
    assert out["counts"].tolist() == [3, 6, 6, 2, 1, 5]
    assert out["qoff"][:4].tolist() == [0, 2, 4, 6] and out["heads"][:2].tolist() == [0, 2]
    assert out["rank"][:3].tolist() == [3, 4, 1] and out["score"][[0, 2]].tolist() == [0.25, 5]
    assert out["slow"][0] == 1 and out["sbytes"][:5].tobytes() == b"1e-30"
    chash = np.zeros(3, np.uint64)
    k.hash_ids(out["cbytes"], out["coff"][:4], chash)
    assert chash.tolist() == [_hash("d7"), _hash("d8"), _hash("d7")]
    assert k.repeated_in_blocks(chash, out["heads"][:2], 3) is False
    assert k.repeated_in_blocks(chash, np.array([0], np.int64), 3) is True
    # one array an item short: FULL, and the counters untouched
    for name, room in {"rank": 2, "heads": 1, "qbytes": 5, "slow": 0, "sbytes": 4}.items():
        small = _outputs(len(data))
        small[name] = small[name][:room]
        assert k.scan(data, 0, ord(" "), *small.values())[0] == k.FULL, name
        assert small["counts"].tolist() == [0] * 6
    # arguments of the wrong kind or out of range are refused, never read
    with pytest.raises(TypeError, match="qoff: a one-dimensional array of int64"):
        k.scan(data, 0, ord(" "), *{**out, "qoff": out["qoff"].astype(np.int32)}.values())
    with pytest.raises(TypeError, match="writable"):
        k.scan(data, 0, ord(" "), *{**out, "rank": data}.values())
    misaligned = np.zeros(49, np.uint8)[1:].view(np.int64)  # six int64 at an odd address
    with pytest.raises(TypeError, match="counts: an aligned array of int64"):
        k.scan(data, 0, ord(" "), *{**out, "counts": misaligned}.values())
    with pytest.raises(ValueError, match="start 99 is outside"):
        k.scan(data, 99, ord(" "), *_outputs(len(data)).values())
    with pytest.raises(ValueError, match="delim"):
        k.scan(data, 0, ord("a"), *_outputs(len(data)).values())
    bad = _outputs(len(data))
    bad["counts"][0] = len(bad["qoff"])
    with pytest.raises(ValueError, match="counts lie outside"):
        k.scan(data, 0, ord(" "), *bad.values())
    bad = _outputs(len(data))
    bad["counts"][0], bad["qoff"][0] = 2, 7  # row 2 reads qoff[1] = 0 after qoff[0] = 7
    bad["qoff"][1] = 99
    with pytest.raises(ValueError, match="qoff does not match counts"):
        k.scan(data, 0, ord(" "), *bad.values())
    with pytest.raises(ValueError, match="coff must hold"):
        k.hash_ids(out["cbytes"][:3], out["coff"][:4], chash)
    with pytest.raises(ValueError, match="heads must be"):
        k.repeated_in_blocks(chash, np.array([0, 2], np.int64), 4)
    with pytest.raises(ValueError, match="outside the data"):
        k.last_line_end(data, len(data) + 1)
    assert k.last_line_end(data, len(data)) == len(data) - 1
    assert k.last_line_end(data, 5) == -1
