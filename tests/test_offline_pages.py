"""The decision report and `dvc plots show` open offline: headless Chromium, network refused.

Every request the page makes other than its own file is aborted and recorded; a page that
works offline makes none and still draws its charts (SVG or canvas of nonzero size).
Needs Debian's chromium at /usr/bin/chromium (tools/test.sh installs it); skipped otherwise.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from relgrade.evaluation import decision
from tests.e2e.serve import ARGS, CHROMIUM
from tests.test_decision import P, report
from tests.test_web_browser import ARTIFACTS

pytestmark = [pytest.mark.slow, pytest.mark.browser]

ROOT = Path(__file__).resolve().parents[1]

DRAWN = """() => Array.from(document.querySelectorAll('svg, canvas')).map(e => {
    const r = e.getBoundingClientRect();
    return {tag: e.tagName.toLowerCase(), width: r.width, height: r.height,
            marks: e.querySelectorAll('circle, line, path, rect').length};
})"""


@pytest.fixture
def offline():
    """``load(html_path, settle_selector) -> (drawn, requests, errors)`` in a page with the
    network refused."""
    if not Path(CHROMIUM).exists():
        pytest.skip("Debian's chromium is not installed at /usr/bin/chromium "
                    "(apt-get install -y chromium chromium-driver)")
    from playwright.sync_api import sync_playwright

    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=CHROMIUM, args=ARGS, headless=True)

        def load(path: Path, settle: str, shot: str):
            page = browser.new_page(viewport={"width": 1280, "height": 900})
            attempted, errors = [], []

            def refuse(route):
                attempted.append(route.request.url)
                route.abort()

            page.route(lambda url: url != path.as_uri(), refuse)
            page.on("pageerror", lambda e: errors.append(str(e)))
            page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
            page.goto(path.as_uri())
            page.wait_for_selector(settle, state="attached", timeout=20000)
            ARTIFACTS.mkdir(exist_ok=True)
            page.screenshot(path=str(ARTIFACTS / shot), full_page=True)
            drawn = page.evaluate(DRAWN)
            page.close()
            return drawn, attempted, errors

        yield load
        browser.close()


def test_the_decision_report_draws_its_charts_with_the_network_refused(offline, tmp_path):
    page = tmp_path / "report.html"
    page.write_text(decision.to_html(decision.build_decision(report(), primary=P)))
    drawn, attempted, errors = offline(page, "svg.chart", "decision-report.png")
    assert attempted == [] and errors == []
    charts = [d for d in drawn if d["tag"] == "svg"]
    # two arms in the first chart; the pair on P with its two groups in the second
    assert len(charts) == 2
    assert all(d["width"] > 0 and d["height"] > 0 for d in charts)
    assert [d["height"] for d in charts] == [28 + 2 * 22 + 30, 28 + 3 * 22 + 30]
    assert all(d["marks"] > 0 for d in charts)


def test_the_committed_report_of_the_repository_draws_offline(offline):
    drawn, attempted, errors = offline(ROOT / "metrics" / "report.html", "svg.chart",
                                       "decision-report-repository.png")
    assert attempted == [] and errors == []
    charts = [d for d in drawn if d["tag"] == "svg"]
    assert len(charts) == 2 and all(d["width"] > 0 and d["height"] > 0 for d in charts)


def test_dvc_plots_show_draws_the_repository_plots_with_the_network_refused(offline, tmp_path):
    out = tmp_path / "plots"
    done = subprocess.run([sys.executable, "-m", "dvc", "plots", "show", "-o", str(out)],
                          cwd=ROOT, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    page = out / "index.html"
    text = page.read_text()
    assert "cdn.jsdelivr.net" not in text and "<script src=" not in text
    drawn, attempted, errors = offline(page, "div.vega-embed canvas, div.vega-embed svg",
                                       "dvc-plots.png")
    assert attempted == [] and errors == []
    # one chart per plot the repository's dvc.yaml files declare: arms, deltas and the
    # confusion matrix at the top and in the crowd, ppi and triage experiments, the ppi
    # experiment's budget curve, the propensity curve of the click experiment
    declared = json.loads(subprocess.run(
        [sys.executable, "-m", "dvc", "plots", "show", "--json"], cwd=ROOT,
        capture_output=True, text=True, check=True).stdout)["data"]
    assert sorted(declared) == ["experiments/clicks-sim/plots/propensity.csv",
                                "experiments/crowd-sim/metrics/confusion.csv",
                                "experiments/crowd-sim/metrics/plots/arms.csv",
                                "experiments/crowd-sim/metrics/plots/deltas.csv",
                                "experiments/ppi-sim/metrics/confusion.csv",
                                "experiments/ppi-sim/metrics/plots/arms.csv",
                                "experiments/ppi-sim/metrics/plots/budget.csv",
                                "experiments/ppi-sim/metrics/plots/deltas.csv",
                                "experiments/triage-sim/metrics/confusion.csv",
                                "experiments/triage-sim/metrics/plots/arms.csv",
                                "experiments/triage-sim/metrics/plots/deltas.csv",
                                "metrics/confusion.csv", "metrics/plots/arms.csv",
                                "metrics/plots/deltas.csv"]
    canvases = [d for d in drawn if d["tag"] == "canvas"]
    assert len(canvases) == len(declared)
    assert all(d["width"] > 100 and d["height"] > 100 for d in canvases)
