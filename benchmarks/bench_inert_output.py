"""What the inert output filter costs: lines written through ``relgrade.terminal.InertStream``
against the same lines written to the stream directly.

    python benchmarks/bench_inert_output.py [--rounds 7] [--lines 100000]

Each round writes the same ``--lines`` lines three ways, one right after the other (paired):
straight to an in-memory stream, through :class:`relgrade.terminal.InertStream` (the filter
every command and stage prints through), and through the same filter with
:func:`relgrade.text.inert`'s check as it was before its fast path (every character's
Unicode category looked up whenever a line held a newline). The lines are those of
``relgrade evaluate --per-query`` (64 characters, a newline each); one in 1,000 holds a bidi
override. The table gives CPU seconds (this process's user + system time), medians over the
rounds, and the median of the per-round ratios.
"""

from __future__ import annotations

import argparse
import io
import resource
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

from relgrade.terminal import KEPT, InertStream  # noqa: E402
from relgrade.text import is_hidden  # noqa: E402


def _cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def _old_inert(text: str, *, keep: str = "") -> str:
    """``relgrade.text.inert`` before its fast path (for the comparison only)."""
    if text.isprintable() and not any(is_hidden(ch) for ch in text):
        return text
    return "".join(f"\\u{ord(ch):04x}" if ch not in keep and is_hidden(ch) else ch
                   for ch in text)


class _OldStream(InertStream):
    def write(self, text: str) -> int:
        self.raw.write(_old_inert(text, keep=KEPT))
        return len(text)


def _lines(n: int) -> list[str]:
    out = []
    for i in range(n):
        arm = "arm\u202eb" if i % 1000 == 0 else "bm25"
        out.append(f"{arm:<12}q{i:06d}   nDCG(dcg='exp-log2')@10  0.{i * 7919 % 10 ** 14:014d}\n")
    return out


def _time(stream, lines) -> float:
    t = _cpu()
    for line in lines:
        stream.write(line)
    return _cpu() - t


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--lines", type=int, default=100_000)
    args = ap.parse_args()
    lines = _lines(args.lines)
    plain, inert, old = [], [], []
    for _ in range(args.rounds):
        plain.append(_time(io.StringIO(), lines))
        inert.append(_time(InertStream(io.StringIO()), lines))
        old.append(_time(_OldStream(io.StringIO()), lines))
    med = statistics.median
    print(f"{args.lines} lines, {args.rounds} rounds (CPU seconds, medians)")
    print("| writer | CPU s | per line µs | ratio to plain |")
    print("|---|---|---|---|")
    for name, xs in (("plain stream", plain), ("InertStream", inert),
                     ("InertStream, inert before its fast path", old)):
        ratio = med(x / p for x, p in zip(xs, plain))
        print(f"| {name} | {med(xs):.3f} | {1e6 * med(xs) / args.lines:.2f} | {ratio:.1f} |")


if __name__ == "__main__":
    main()
