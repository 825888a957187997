"""Stage `gate`: the agreement metrics against params `gates`; a fail stops the pipeline."""

from relgrade.errors import GateFailed
from relgrade.experiment.stage import run_stage
from relgrade.io import files as io
from relgrade.protocol.gate import check_gates


def main(ex):
    measures = io.read_json(ex.path("agreement"))
    result = check_gates(measures, ex.params.need("gates").as_dict())
    out = ex.path("gate")
    if not result.passed:
        out.unlink(missing_ok=True)  # a stale pass record must not outlive a failed gate
        raise GateFailed(list(result.lines) + [f"advice: {a}" for a in result.advice])
    io.write_json(out, result.record(round=measures.get("round")))
    print("gate passed: " + ", ".join(f"{k} {v}" for k, v in result.measures.items()))


if __name__ == "__main__":
    run_stage(main)
