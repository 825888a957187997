"""A stage's process imports scipy.stats and statsmodels only when its work uses them.

Each stage DVC runs is a fresh Python process that imports its entry script's modules
(``relgrade.pipeline.runner`` and ``relgrade.pipeline.stages.NAME``); scipy.stats and
statsmodels cost it most of a CPU-second, paid again at every stage of every ``dvc repro``.
The modules that need a quantile, a tail probability or Holm's correction import them in the
function that computes it, so only the stages whose module needs them at import load them.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import relgrade.pipeline.stages as stages_pkg

STAGES = sorted(p.stem for p in Path(stages_pkg.__file__).parent.glob("*.py")
                if p.stem != "__init__")

#: The stages whose module imports a part of scipy or statsmodels on purpose, and which.
NEEDS = {
    # Holm's correction (statsmodels) and the t intervals (scipy.stats) at every run
    "compare": ("scipy", "statsmodels"),
    # the propensity-weighted sums as sparse matrices
    "ips": ("scipy",),
}


def _imported(modules: list[str]) -> set[str]:
    """The top-level packages a fresh interpreter holds after importing the stage runner and
    ``modules``."""
    probe = (f"import sys, relgrade.pipeline.runner, {', '.join(modules)}\n"
             "print(' '.join(sorted({m.split('.')[0] for m in sys.modules})))")
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True,
                         check=True)
    return set(out.stdout.split())


def test_every_stage_module_is_listed():
    assert {"gate", "audit", "report", "holes", "ppi", "agreement"} <= set(STAGES)
    assert set(NEEDS) <= set(STAGES)


def test_the_stages_import_neither_scipy_nor_statsmodels_unless_their_module_needs_them():
    # one process for all of them: a package any of them imports is in its sys.modules
    others = [f"relgrade.pipeline.stages.{name}" for name in STAGES if name not in NEEDS]
    assert _imported(others) & {"scipy", "statsmodels"} == set()


def test_a_stage_process_finds_bytecode_for_every_module_it_imports():
    # tests/conftest.py compiles the package once a run: a process started without writing
    # bytecode (PYTHONDONTWRITEBYTECODE) then reads it instead of compiling each module
    import os

    probe = ("import sys, importlib.util, relgrade.pipeline.runner, "
             "relgrade.pipeline.stages.grades\n"
             "print('\\n'.join(m.__file__ for n, m in sorted(sys.modules.items())\n"
             "                 if n.startswith('relgrade') and getattr(m, '__file__', None)))")
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True,
                         check=True, env={**os.environ, "PYTHONDONTWRITEBYTECODE": "1"})
    files = [Path(f) for f in out.stdout.split()]
    assert len(files) > 20
    if not os.access(files[0].parent, os.W_OK):
        return  # an installed, read-only package: nothing could be compiled
    import importlib.util

    missing = [f for f in files if not Path(importlib.util.cache_from_source(str(f))).is_file()]
    assert missing == []


def test_a_stage_s_work_runs_with_its_imports_frozen_out_of_the_collector(tmp_path):
    # relgrade.pipeline.runner.run_stage freezes what the imports made before the work, so
    # the collector walks neither it during the work nor at the process's exit; what the work
    # makes afterwards is collected as before
    import os

    (tmp_path / "params.yaml").write_text("seed: 7\npaths:\n  pool: data/pool/pool.parquet\n")
    probe = ("import gc, relgrade.pipeline.runner as runner\n"
             "def main(ex):\n"
             "    made = [[]]\n"
             "    tracked = [id(o) for o in gc.get_objects()]\n"
             "    print(gc.get_freeze_count() > 0, id(runner.require_rendered) in tracked,\n"
             "          id(made) in tracked, ex.params.seed)\n"
             "runner.run_stage(main)\n")
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True,
                         check=True, cwd=tmp_path, env={**os.environ, "DVC_STAGE": ""})
    assert out.stdout.split() == ["True", "False", "True", "7"]
