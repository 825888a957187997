#!/usr/bin/env bash
# The main job: install relgrade, then run the experiment's DVC pipeline end to end.
set -euo pipefail
cd "$(dirname "$0")/.."
bash tools/bootstrap.sh
export PATH="$PWD/.venv/bin:$PATH"
dvc repro "$@"
dvc metrics show
relgrade status
