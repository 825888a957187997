#!/usr/bin/env python3
"""Write the simulated crowd experiment's intents for the queries the sample stage drew.

The intents stage takes exactly one intent line per query of the query set, no more (an
intent for a query outside the set is refused) and no less, and the review record signs
that table. So the intents are written after the sample, for the sampled queries only: the
simulation knows each log query's topic, and a query's intent is its topic's (make_inputs.py,
TOPICS). Run after `dvc repro experiments/crowd-sim/dvc.yaml:sample`, from the repository:
python experiments/crowd-sim/sim/make_intents.py, then sign the table with
`relgrade intents review --experiment experiments/crowd-sim --reviewer auditor-b`.
"""
import csv

from make_inputs import INPUT, log_queries

from relgrade.query_sampling import normalize_query


def main():
    intent_of = {normalize_query(text): intent for text, _, intent in log_queries()}
    with open(INPUT / "queries.sampled.tsv", encoding="utf-8") as f:
        sampled = list(csv.DictReader(f, delimiter="\t"))
    with open(INPUT / "intents.tsv", "w", newline="", encoding="utf-8") as f:
        w = csv.writer(f, delimiter="\t", lineterminator="\n")
        w.writerow(["query_id", "query", "intent"])
        for row in sampled:
            w.writerow([row["query_id"], row["query"], intent_of[row["query"]]])


if __name__ == "__main__":
    main()
