"""Stage `gold`: the gold file of a rater panel, written from the pool by params `gold.command`.

Gold questions are pool pairs whose grade is known before the raters start (from an earlier
frozen key, an adjudication, or a simulation's truth). When params ``gold.command`` is set,
this stage runs it in the experiment's folder after the pool exists; it must write the gold
file ``gold.input`` (``query_id``, ``chunk_id``, ``grade``). The file is a DVC-cached output:
private (never in git, never in the published bundle), and rebuilt in a fresh clone.

Refuses (InputError) when the command cannot be started, exits non-zero (its last output is
quoted), or leaves no gold file, or a gold file that names a pair outside the pool or a
grade off the scale (:func:`relgrade.pipeline.panel.read_gold`).
"""

import shlex
import subprocess

from relgrade.errors import InputError
from relgrade.experiment.layout import stage_path
from relgrade.io.files import read_table
from relgrade.pipeline.panel import read_gold


def run(ex):
    gold = ex.params.need("gold")
    argv = shlex.split(gold.command or "")
    if not argv:
        raise InputError("the gold stage needs a command", path=ex.params.source,
                         item="gold.command")
    target = ex.file(gold.input)
    target.parent.mkdir(parents=True, exist_ok=True)
    try:
        done = subprocess.run(argv, cwd=ex.root, capture_output=True, text=True,
                              stdin=subprocess.DEVNULL)
    except OSError as e:
        raise InputError("the gold command cannot be started", path=ex.params.source,
                         item="gold.command", found=f"{gold.command!r}: {e.strerror}") from None
    if done.returncode != 0:
        tail = (done.stderr or done.stdout).strip().splitlines()[-3:]
        raise InputError(f"the gold command exited with status {done.returncode}",
                         path=ex.params.source, item="gold.command",
                         found=" / ".join(tail) or gold.command)
    if not target.is_file():
        raise InputError("the gold command wrote no gold file", path=target,
                         item="gold.input", found=gold.command)
    pool = read_table(ex.path("pool"), columns=["query_id", "chunk_id"])
    table = read_gold(ex, pool)
    print(f"gold: {len(table)} pool pairs with known grades in "
          f"{stage_path(ex, ex.file(gold.input))} "
          f"(from `{gold.command}`)")
