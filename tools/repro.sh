#!/usr/bin/env bash
# The main job: install relgrade, run every experiment's DVC pipeline end to end (the
# repository's own, dvc.yaml at the top, and each experiments/NAME/dvc.yaml: `dvc repro
# --all-pipelines`), then print the per-arm table; for each experiment write its DESIGN.md
# again (relgrade design) and print its status; last, each one's verdicts on the primary
# measure (tools/verdicts.sh: the "Verdicts" section of its report.md; report.html beside it
# has the whole report). With arguments, they are passed to `dvc repro` instead (e.g. one
# experiment's dvc.yaml).
set -euo pipefail
cd "$(dirname "$0")/.."
bash tools/bootstrap.sh
export PATH="$PWD/.venv/bin:$PATH"
# A stage that stops at pending work (graders still owe pairs) prints `Pending: ...` and
# exits 3; DVC then reports "failed to reproduce". That is a to-do, not a failure: it is
# printed as one, and the job ends there (exit 0) until the grading is done.
log=$(mktemp)
trap 'rm -f "$log"' EXIT
# the hint to run again names this job's own arguments (one experiment's dvc.yaml, say)
again="bash tools/repro.sh"
for arg in "$@"; do again+=" $(printf '%q' "$arg")"; done
if [ "$#" -gt 0 ]; then set -- "$@"; else set -- --all-pipelines; fi
if ! dvc repro "$@" 2>&1 | tee "$log"; then
  if grep -q '^Pending: ' "$log"; then
    echo
    echo "To do (grading owed; nothing failed):"
    grep '^Pending: ' "$log" | sed 's/^Pending: /  - /'
    echo "Then run this job again: $again"
    exit 0
  fi
  exit 1
fi
# one row per arm of each experiment, one table per experiment (each with only its own
# columns): the primary measure with its interval, judged@k, the rank-set and the difference
# from the baseline (every metric: dvc metrics show; a click experiment's IPS estimates: dvc
# metrics show experiments/NAME/metrics); in a ppi experiment these are PPI++'s (estimator
# ppi++), with the model-only and human-only numbers in their own columns
for dir in metrics/decision $(find experiments -mindepth 2 -maxdepth 3 -type d \
             -path '*/metrics/decision' 2>/dev/null | sort); do
  [ -d "$dir" ] || continue
  echo
  dvc metrics show "$dir"
done
# every experiment (relgrade pipeline list: a folder inside another experiment's, such as a
# holes folder, is part of that one)
for dir in $(relgrade pipeline list); do
  echo
  echo "Status of $dir:"
  # the design record takes in the frozen key's facts; person-written parts are kept
  relgrade design --experiment "$dir" > /dev/null
  relgrade status --experiment "$dir"
done
bash tools/verdicts.sh
