#!/usr/bin/env bash
# The whole test suite: installs what it needs (Python packages; Debian's chromium for the
# browser tests and a Java runtime for the Spark click engine, when run as root with apt),
# checks the import layers, then runs pytest (tests and the library's doctests) on both cores.
set -euo pipefail
cd "$(dirname "$0")/.."
bash tools/bootstrap.sh
apt_updated=
if [ ! -x /usr/bin/chromium ] && [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
  apt-get update -qq && apt_updated=1
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium chromium-driver >/dev/null
fi
if ! command -v java >/dev/null && [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
  [ -n "$apt_updated" ] || apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq default-jre-headless >/dev/null
fi
export PATH="$PWD/.venv/bin:$PATH"
# The house's import rules (pyproject.toml [tool.importlinter]) before any test.
lint-imports --no-cache
# --dist loadscope: each test module runs whole on one worker, so an end-to-end module's
# module-scoped experiment is built once; modules go out in file order, the long end-to-end
# ones early, the many short ones after them to even out the two workers. --durations: the
# slowest tests are listed at the end of every run, where the suite's time goes.
exec .venv/bin/python -m pytest -n 2 --dist loadscope --no-loadscope-reorder --durations=60 "$@"
