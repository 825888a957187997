#!/usr/bin/env bash
# Create .venv (Python 3.11+) and install relgrade with its test, spark and ray extras, once per change of
# pyproject.toml or tools/constraints.txt. The constraints pin every package to the versions
# the default experiment was graded with: a different BM25 or TF-IDF release could rank
# differently, change the pool, and leave pairs without grades.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
if [ ! -x .venv/bin/python ]; then
  "$PY" -m venv .venv
fi
stamp=.venv/.relgrade-installed
want=$(cat pyproject.toml tools/constraints.txt | sha256sum | cut -d' ' -f1)
if [ ! -f "$stamp" ] || [ "$(cat "$stamp")" != "$want" ]; then
  .venv/bin/python -m pip install --quiet --upgrade pip
  .venv/bin/python -m pip install --quiet -c tools/constraints.txt -e '.[test,spark,ray]'
  echo "$want" > "$stamp"
fi
