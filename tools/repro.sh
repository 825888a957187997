#!/usr/bin/env bash
# The main job: install relgrade, run the DVC pipeline end to end (`dvc repro`), then print
# each experiment's per-arm table and, last, its verdicts on the primary measure
# (tools/verdicts.sh: the "Verdicts" section of its report.md; report.html beside it has the
# whole report).
set -euo pipefail
cd "$(dirname "$0")/.."
bash tools/bootstrap.sh
export PATH="$PWD/.venv/bin:$PATH"
dvc repro "$@"
dvc metrics show
relgrade status
bash tools/verdicts.sh
