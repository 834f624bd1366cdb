"""The HTML fleet report (scripts/fleet_report.py --html), looked at the way a person would: rendered by
headless Chromium, screenshot and page text checked.

The fleet is written by the roles' own code: verify runs through module_utils/sglang_verify.evaluate
(on the real benchmark results of tests/fixtures/fleet_reports/in-sync), written by the
sglang_report action's writer and appended to verify-history.jsonl as the role does; releases
recorded by module_utils/sglang_release.record. Other reports are the real ones of
tests/fixtures/fleet_reports (see its README).
"""

import base64
import copy
import html.parser
import importlib.util
import json
import os
import re
import shutil
import stat
import subprocess
import sys
from pathlib import Path

import numpy
import pytest
from PIL import Image, ImageStat

from ansible_collections.sglang.fleet.plugins.module_utils.host.gpu_facts import declared_facts
from ansible_collections.sglang.fleet.plugins.module_utils.release.records import record as record_release
from ansible_collections.sglang.fleet.plugins.module_utils.verify.gates import evaluate, read_history

REPO = Path(__file__).resolve().parents[2]
FIXTURES = REPO / "tests" / "fixtures" / "fleet_reports"
CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
# A host name as someone could put it in an inventory: HTML that must show as text, and `$...$`
# that matplotlib would read as mathtext.
EVIL = 'rack$7$<img src=x onerror="document.title=1">'
UPDATED, FAILED, NEW = "h200x2", "ct129", EVIL


def load(path):
    return json.loads(Path(path).read_text())


def _load_module(path, name):
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


write_report = _load_module(REPO / "plugins" / "action" / "sglang_report.py", "sglang_report_action").write_report
fleet_report = _load_module(REPO / "scripts" / "fleet_report.py", "fleet_report")


def bench_at(decode, out4):
    """The in-sync host's real benchmark results, scaled to a run that measured `decode` and `out4`."""
    real = load(FIXTURES / "in-sync" / "verify-latest.json")["bench"]
    runs = copy.deepcopy(real)
    for run in runs:
        c = run["concurrency"]
        scale = decode / real[0]["decode_tok_s_per_stream"]["p50"] if c == 1 else out4 / run["output_throughput"]
        run["decode_tok_s_per_stream"] = {k: v * scale if isinstance(v, float) else v
                                          for k, v in run["decode_tok_s_per_stream"].items()}
        run["output_throughput"] *= scale
    return runs


def verify_run(folder, host, stamp, version, args, thresholds, decode, out4):
    """One verify run as roles/sglang_verify does it: gates against the history and the last known good,
    the report written through sglang_report, the record appended to verify-history.jsonl."""
    history_file = folder / "verify-history.jsonl"
    history = read_history(history_file.read_text()) if history_file.exists() else []
    latest = load(FIXTURES / "in-sync" / "verify-latest.json")
    gpu = declared_facts({"gpu_model": "NVIDIA H200", "gpu_count": 2})
    last_good = fleet_report.fleet_reports.last_good_release(str(folder))
    bench = bench_at(decode, out4)
    server = {"host": host, "version": version, "args": args, "gpu": gpu, "weight_bytes": latest["weight_bytes"]}
    out = evaluate(bench, thresholds, server, history, last_good=last_good, stamp=stamp)
    write_report(str(folder), "verify", stamp, {**out["report"], "weights": latest["weights"], "bench": bench})
    with history_file.open("a") as f:
        f.write(json.dumps(out["record"], sort_keys=True) + "\n")
    return out


def deploy(folder, host, state, stamp, version, args, verify):
    """A deploy's release record (sglang_release.record on the host, then its report on the controller)."""
    venv = f"/opt/ml-env/sglang-{version}"
    unit, env = state / "sglang.service", state / "sglang.env"
    unit.write_text(f"[Service]\nExecStart={venv}/bin/python -m sglang.launch_server --tp-size 2\n")
    env.write_text("SGLANG_API_KEY=redacted\n")
    meta = {"version": version, "venv": venv, "args": args, "model_path": args["model_path"],
            "gpu": {"gpu_model": "NVIDIA H200", "gpu_count": 2}, "controller": {"commit": "64ea2c5", "user": "ci"},
            "verify": {k: verify["report"][k] for k in ("passed", "generated_at", "metrics", "accept_length",
                                                        "workload", "line")}}
    _, rec = record_release(str(state), str(unit), str(env), meta, "good" if verify["ok"] else "failed", stamp)
    write_report(str(folder), "release", rec["recorded_at"], {**rec, "host": host})
    return rec


@pytest.fixture(scope="module")
def fleet(tmp_path_factory):
    """Three hosts: one upgraded 0.5.18 -> 0.5.23 with a failed run between, one whose latest verify
    failed (speculative decoding silently off), one (named with HTML) with no verify run yet."""
    root = tmp_path_factory.mktemp("fleet")
    reports = root / "reports"
    updated = reports / UPDATED
    shutil.copytree(FIXTURES / "in-sync", updated, ignore=shutil.ignore_patterns("verify-*", "release-*"))
    args = load(FIXTURES / "in-sync" / "release-latest.json")["args"]
    thresholds = load(FIXTURES / "in-sync" / "verify-latest.json")["thresholds"]  # floor 50
    state = root / "state"
    state.mkdir()
    first = verify_run(updated, UPDATED, "20261201T080922Z", "0.5.18", args, thresholds, 58.5, 221.3)
    old = deploy(updated, UPDATED, state, "20261201T080945Z", "0.5.18", args, first)
    verify_run(updated, UPDATED, "20261201T095519Z", "0.5.18", args, thresholds, 58.6, 221.9)
    slow = verify_run(updated, UPDATED, "20261201T101500Z", "0.5.18", args, thresholds, 31.2, 118.0)
    upgraded = verify_run(updated, UPDATED, "20261201T110200Z", "0.5.23", args,
                          {**thresholds, "min_decode_tok_s": 55.0}, 61.0, 229.0)
    new = deploy(updated, UPDATED, state, "20261201T110230Z", "0.5.23", args, upgraded)
    assert (first["ok"], slow["ok"], upgraded["ok"]) == (True, False, True), slow["failures"]
    shutil.copytree(FIXTURES / "failed-verify", reports / FAILED)
    shutil.copytree(FIXTURES / "no-verify", reports / NEW)
    return {"reports": reports, "releases": (old["id"], new["id"]), "root": root}


@pytest.fixture(scope="module")
def page(fleet):
    """The CLI run as `make report` runs it: Markdown on stdout, the HTML page written."""
    out = fleet["root"] / "site" / "fleet-report.html"
    proc = subprocess.run([sys.executable, str(REPO / "scripts" / "fleet_report.py"), "--reports",
                           str(fleet["reports"]), "--html", str(out)], check=False, capture_output=True,
                          text=True, timeout=300)
    assert proc.returncode == 1, proc.stderr  # ct129's latest verify failed
    return {"path": out, "html": out.read_text(), "markdown": proc.stdout}


class Page(html.parser.HTMLParser):
    """The DOM Chromium dumped: its text, the img elements, the host sections and the status table."""

    def __init__(self, text):
        super().__init__()
        self.text, self.imgs, self.sections, self.table = [], [], {}, []
        self._section = None
        self._in_table = self._in_cell = False
        self.feed(text)

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        if tag == "img":
            self.imgs.append(a)
            if self._section is not None:
                self._section["imgs"].append(a)
        elif tag == "section":
            self._section = self.sections[a["data-host"]] = {"imgs": [], "text": []}
        elif tag == "table" and a.get("id") == "status-table":
            self._in_table = True
        elif tag == "tr" and self._in_table:
            self.table.append([])
        elif tag in ("td", "th") and self._in_table:
            self._in_cell = True
            self.table[-1].append("")

    def handle_endtag(self, tag):
        if tag == "section":
            self._section = None
        elif tag == "table":
            self._in_table = False
        elif tag in ("td", "th"):
            self._in_cell = False

    def handle_data(self, data):
        self.text.append(data)
        if self._section is not None:
            self._section["text"].append(data)
        if self._in_cell:
            self.table[-1][-1] += data.strip()


@pytest.fixture(scope="module")
def chromium(tmp_path_factory):
    if not CHROMIUM:
        if os.environ.get("CI"):
            pytest.fail("chromium is not installed on this CI machine: lab/install-deps.sh (make lab-deps) installs it")
        pytest.skip("chromium is not installed: `apt-get install chromium` (or `make lab-deps`) to run this test")
    profile = tmp_path_factory.mktemp("chromium-profile")

    def run(*args):
        proc = subprocess.run([CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
                               f"--user-data-dir={profile}", *args], check=False, capture_output=True, text=True,
                              timeout=120)
        assert proc.returncode == 0, proc.stderr[-2000:]
        return proc.stdout
    return run


@pytest.fixture(scope="module")
def dom(page, chromium):
    return Page(chromium("--dump-dom", page["path"].as_uri()))


def svg_text(img):
    """The text of a chart (an SVG data: URI; matplotlib writes text as <text>, svg.fonttype none)."""
    prefix = "data:image/svg+xml;base64,"
    assert img["src"].startswith(prefix), img["src"][:60]
    svg = base64.b64decode(img["src"][len(prefix):]).decode()
    return " ".join(html.unescape(t) for t in re.findall(r"<text[^>]*>([^<]*)</text>", svg))


def test_the_screenshot_shows_the_report_and_its_charts(page, chromium, tmp_path):
    shot = tmp_path / "report.png"
    chromium("--window-size=1280,3600", f"--screenshot={shot}", page["path"].as_uri())
    image = Image.open(shot).convert("RGB")
    assert image.size == (1280, 3600)
    pixels = numpy.asarray(image).reshape(-1, 3).astype(int)
    # a blank (or error) page is one colour: standard deviation ~0, next to nothing off-white
    assert max(ImageStat.Stat(image).stddev) > 10, "the page rendered (almost) blank"
    assert (pixels.min(axis=1) < 240).mean() > 0.03, "less than 3 % of the page is drawn"

    def near(rgb):
        return int((numpy.abs(pixels - rgb).max(axis=1) <= 12).sum())
    # Drawn charts, not broken-image icons: the decode line and bars in matplotlib's blue (#1f77b4),
    # the failed runs shaded (#f4c7c3).
    assert near((0x1F, 0x77, 0xB4)) > 2000
    assert near((0xF4, 0xC7, 0xC3)) > 2000


def test_every_host_appears_and_html_in_a_host_name_stays_text(page, dom):
    text = " ".join(dom.text)
    for host in (UPDATED, FAILED, EVIL):
        assert host in text
    assert set(dom.sections) == {UPDATED, FAILED, EVIL}
    assert not [img for img in dom.imgs if img.get("src") == "x"], "a host name was injected as HTML"
    assert "&lt;img src=x" in page["html"]
    # everything the page shows is inside it: no CDN, no other file, nothing run
    assert not re.search(r"""(src|href)=["']?(https?:|//|file:)""", page["html"])
    assert "<script" not in page["html"]
    assert "default-src 'none'" in page["html"]


def test_the_status_table_has_the_markdown_reports_rows(page, dom):
    markdown = [[c.strip() for c in line.strip("|").split("|")] for line in page["markdown"].splitlines()
                if line.startswith("|") and not line.startswith("|---")]
    assert dom.table == markdown
    assert [row[0] for row in markdown[1:]] == sorted([UPDATED, FAILED, EVIL])


def test_history_chart_marks_the_upgrade_the_failed_run_and_the_floor(fleet, dom):
    old_release, new_release = fleet["releases"]
    imgs = dom.sections[UPDATED]["imgs"]
    assert len(imgs) == 1
    chart = svg_text(imgs[0])
    # the version change is marked with the release deploy recorded for that run; the first run
    # (0.5.18, its release recorded after it) starts the chart
    assert new_release.startswith("0.5.23-") and new_release in chart
    assert old_release in chart
    for label in ("failed run", "floor", "roofline (upper bound)", "single-stream decode", "output, concurrency 4"):
        assert label in chart
    assert f"{UPDATED}: 4 verify runs" in chart


def test_history_points_read_each_runs_own_floor(fleet):
    from scripts import fleet_report_html

    points = fleet_report_html.history_points(str(fleet["reports"] / UPDATED))
    assert [p["floor"] for p in points] == [50.0, 50.0, 50.0, 55.0]  # raised with the upgrade
    assert [p["passed"] for p in points] == [True, True, False, True]
    assert [p["version"] for p in points] == ["0.5.18"] * 3 + ["0.5.23"]
    assert [p["decode"] for p in points] == [58.5, 58.6, 31.2, 61.0]
    assert [i for i, _ in fleet_report_html.changes(points)] == [0, 3]


def test_a_host_with_failed_runs_and_no_floor(dom):
    chart = svg_text(dom.sections[FAILED]["imgs"][0])
    assert "failed run" in chart and "floor" not in chart  # min_decode_tok_s 0: no floor line
    text = " ".join(dom.sections[FAILED]["text"])
    assert "speculative decoding is not running" in text  # the latest verify's failure, shown


def test_a_host_with_no_verify_run_yet_says_so_instead_of_a_chart(dom):
    section = dom.sections[EVIL]
    assert section["imgs"] == []
    assert "no verify run yet" in " ".join(section["text"])
    # and in the fleet chart, beside the hosts that have a ratio
    (fleet_chart,) = [img for img in dom.imgs if img.get("id") == "roofline-chart"]
    labels = svg_text(fleet_chart)
    assert "no verify run yet" in labels and EVIL in labels


def test_the_markdown_table_is_the_same_with_or_without_the_page(fleet, page):
    proc = subprocess.run([sys.executable, str(REPO / "scripts" / "fleet_report.py"), "--reports",
                           str(fleet["reports"])], check=False, capture_output=True, text=True, timeout=120)
    assert (proc.returncode, proc.stdout) == (1, page["markdown"])
    assert stat.S_IMODE(page["path"].stat().st_mode) == 0o600  # like the reports it is made of


def test_a_folder_given_as_the_page_is_refused_before_anything_is_written(fleet, tmp_path):
    proc = subprocess.run([sys.executable, str(REPO / "scripts" / "fleet_report.py"), "--reports",
                           str(fleet["reports"]), "--html", str(tmp_path)], check=False, capture_output=True,
                          text=True, timeout=120)
    assert proc.returncode == 2 and proc.stdout == ""
    assert f"--html {tmp_path} is a folder" in proc.stderr and "fleet-report.html" in proc.stderr
    assert list(tmp_path.iterdir()) == []
