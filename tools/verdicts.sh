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
raw = yaml.safe_load(params.read_text(encoding="utf-8")) or {}
paths = raw.get("paths") or {}
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
  # a ppi experiment's key is the model grader's: add the prediction-powered verdicts
  python - "$params" <<'PY'
import json
import sys
from pathlib import Path

import yaml

params = Path(sys.argv[1])
raw = yaml.safe_load(params.read_text(encoding="utf-8")) or {}
ppi = (raw.get("paths") or {}).get("ppi")
if (raw.get("grading") or {}).get("mode") != "ppi" or not ppi or not (params.parent / ppi).is_file():
    sys.exit(0)
record = json.loads((params.parent / ppi).read_text(encoding="utf-8"))
print("  (the lines above are on the model grader's key; PPI++ on the human sample, Holm:)")
for measure, est in record["estimates"].items():
    for d in est["differences"]:
        e = d["ppi++"]
        word = "significant" if e["significant"] else "no detectable difference"
        print(f"  - PPI++ {d['arm_a']} - {d['arm_b']} on {measure}: {e['estimate']:+.3f} "
              f"[{e['low']:+.3f}, {e['high']:+.3f}], p={e['p_holm']:.3g} after Holm: {word} "
              f"({est['n']} of {est['N']} queries graded by people)")
PY
done
