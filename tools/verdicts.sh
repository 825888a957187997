#!/usr/bin/env bash
# Print each experiment's verdicts on its primary measure: the "Verdicts" section of its
# report.md (written by the `report` stage). Experiments: the repository's own (params.yaml
# at the top) and every experiments/NAME/params.yaml. Usage: tools/verdicts.sh [REPOSITORY]
# (default: the repository this script is in). Needs python with PyYAML on PATH.
set -euo pipefail
cd "${1:-$(dirname "$0")/..}"
for params in params.yaml experiments/*/params.yaml; do
  [ -f "$params" ] || continue
  dir=$(dirname "$params")
  report=$(python - "$params" <<'PY'
import sys
from pathlib import Path

import yaml

params = Path(sys.argv[1])
try:
    raw = yaml.safe_load(params.read_text(encoding="utf-8")) or {}
except (OSError, UnicodeDecodeError, yaml.YAMLError) as e:
    sys.exit(f"Error: {params}: not a readable YAML file ({str(e).splitlines()[0]}). "
             "Fix or restore it (git checkout)")
if not isinstance(raw, dict):
    sys.exit(f"Error: {params}: params must be a YAML mapping. Fix or restore it")
paths = raw.get("paths") or {}
if not isinstance(paths, dict) or not all(isinstance(paths.get(k), (str, type(None)))
                                          for k in ("report_md", "click_ips")):
    sys.exit(f"Error: {params}: paths must be a mapping of names to file paths (relgrade "
             "checks the whole file: relgrade status). Fix or restore it (git checkout)")
if paths.get("report_md"):
    print(params.parent / paths["report_md"])
elif raw.get("clicks") and paths.get("click_ips"):
    print("clicks:" + str(params.parent / paths["click_ips"]))
else:
    print("unset:")
PY
)
  echo
  if [ "${report#clicks:}" != "$report" ]; then
    echo "Verdicts of $dir: a click-log experiment, no graded key; its IPS estimates per arm:"
    echo "  dvc metrics show ${report#clicks:}"
    continue
  fi
  if [ "$report" = "unset:" ]; then
    echo "Verdicts of $dir: no report (params paths.report_md unset)"
    continue
  fi
  if [ ! -f "$report" ]; then
    echo "Verdicts of $dir: no report yet (the report stage has not run: dvc repro $dir/dvc.yaml)"
    continue
  fi
  echo "Verdicts of $dir ($report):"
  awk '/^## Verdicts$/ {on = 1; next} /^## / {on = 0} on && /^- / {print "  " $0}' "$report"
  # a ppi experiment: its verdicts are PPI++'s (the compare stage's `estimator` says so)
  python - "$params" <<'PY'
import json
import sys
from pathlib import Path

import yaml

params = Path(sys.argv[1])
raw = yaml.safe_load(params.read_text(encoding="utf-8")) or {}
grading = raw.get("grading")
comparisons = raw["paths"].get("comparisons")
if not isinstance(grading, dict) or grading.get("mode") != "ppi" \
        or not isinstance(comparisons, str) or not (params.parent / comparisons).is_file():
    sys.exit(0)
path = params.parent / comparisons
try:
    record = json.loads(path.read_text(encoding="utf-8"))
except (OSError, UnicodeDecodeError, json.JSONDecodeError) as e:
    sys.exit(f"Error: {path}: not valid JSON ({e}). Restore it (git checkout, or dvc repro "
             "rewrites it)")
estimator = record.get("estimator") if isinstance(record, dict) else None
stop = estimator.get("stop") if isinstance(estimator, dict) else None
if not isinstance(record, dict) or not isinstance(estimator, (dict, type(None))) \
        or not isinstance(stop, (dict, type(None))) \
        or (estimator and not estimator.get("comparisons")
            and not {"human_sample", "queries"} <= set(estimator)):
    sys.exit(f"Error: {path}: not of the shape the compare stage writes (its estimator). "
             "Restore it (git checkout, or dvc repro rewrites it)")
if estimator and estimator.get("comparisons"):
    stop = stop or {}
    print(f"  (decided by the {estimator['comparisons']} stopping rule: people graded the "
          f"human sample in a seeded order, {stop.get('words')}; the arms' estimates are "
          "PPI++'s, PPI++ on the same queries stands beside each comparison in the report)")
elif estimator:
    print(f"  (decided by PPI++: people graded {estimator['human_sample']} of "
          f"{estimator['queries']} queries, the model every query; model-only and human-only "
          "stand beside it in the report)")
else:
    print("  (written before PPI++ decided in ppi mode: these lines are on the model "
          "grader's key; rerun the compare and report stages)")
PY
done
