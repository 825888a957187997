#!/usr/bin/env bash
# Create .venv (Python 3.11+) and install relgrade with its test, spark and ray extras, once per change of
# pyproject.toml, setup.py, the C scan's source or tools/constraints.txt. The constraints
# pin every package to the versions the default experiment was graded with: a different
# BM25 or TF-IDF release could rank differently, change the pool, and leave pairs without
# grades.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
# The TREC run scan's C module (setup.py) is compiled by pip: it needs a C compiler and the
# interpreter's headers, installed here when they are missing (as root, with apt). Without
# them the package installs without the module and runs are read by the slower reader.
has_headers() {
  "$1" -c 'import os, sys, sysconfig
sys.exit(not os.path.isfile(os.path.join(sysconfig.get_paths()["include"], "Python.h")))'
}
if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
  need=
  command -v cc >/dev/null || need=" gcc"
  has_headers "$PY" || need="$need python$("$PY" -c 'import sys; print("%d.%d" % sys.version_info[:2])')-dev"
  if [ -n "$need" ]; then
    { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $need >/dev/null; } ||
      echo "bootstrap: could not install$need: runs will be read without the C scan" >&2
  fi
fi
if [ ! -x .venv/bin/python ]; then
  "$PY" -m venv .venv
fi
stamp=.venv/.relgrade-installed
want=$(cat pyproject.toml setup.py tools/constraints.txt src/relgrade/io/_trec_scan.c \
  src/relgrade/clicks/_log_scan.c |
  sha256sum | cut -d' ' -f1)
# reinstalled also when the C module is missing (an editable install builds it in src/,
# where `git clean` removes it) and this machine can build it
built() {
  .venv/bin/python -c 'import relgrade.io._trec_scan, relgrade.clicks._log_scan' 2>/dev/null ||
    ! { command -v cc >/dev/null && has_headers .venv/bin/python; }
}
if [ ! -f "$stamp" ] || [ "$(cat "$stamp")" != "$want" ] || ! built; then
  .venv/bin/python -m pip install --quiet --upgrade pip
  .venv/bin/python -m pip install --quiet -c tools/constraints.txt -e '.[test,spark,ray]'
  echo "$want" > "$stamp"
fi
