#!/usr/bin/env bash
# The main job: install relgrade, run every experiment's DVC pipeline end to end, then print
# each experiment's per-arm table and, last, its verdicts on the primary measure (the
# "Verdicts" section of its report.md; report.html beside it has the whole report).
set -euo pipefail
cd "$(dirname "$0")/.."
bash tools/bootstrap.sh
export PATH="$PWD/.venv/bin:$PATH"
dvc repro "$@"
dvc metrics show
relgrade status
for params in params.yaml experiments/*/params.yaml; do
  [ -f "$params" ] || continue
  dir=$(dirname "$params")
  report=$(python - "$params" <<'PY'
import sys
from pathlib import Path

import yaml

params = Path(sys.argv[1])
paths = (yaml.safe_load(params.read_text(encoding="utf-8")) or {}).get("paths") or {}
print(params.parent / paths["report_md"] if paths.get("report_md") else "")
PY
)
  echo
  if [ -z "$report" ] || [ ! -f "$report" ]; then
    echo "Verdicts of $dir: no report (params paths.report_md unset or the report stage has not run)"
    continue
  fi
  echo "Verdicts of $dir ($report):"
  awk '/^## Verdicts$/ {on = 1; next} /^## / {on = 0} on && /^- / {print "  " $0}' "$report"
done
