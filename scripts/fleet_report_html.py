"""The fleet report as one static HTML page: status table, each host's throughput history, % of roofline.

    scripts/fleet_report.py --html reports/fleet-report.html [host ...]

The table has the rows of the Markdown report (fleet_report.host_row, passed in). Each host's
chart is drawn from its `verify-history.jsonl` (one point per verify run, oldest first): single-stream
decode tok/s with the floor and the roofline as lines, output tok/s per concurrency level below, failed
runs shaded, and a mark where the SGLang version or flags (the fingerprint) change, named after the
release deploy recorded for that run when there is one. The floor of a run is the one its own
`verify-<stamp>.json` names (the history line does not carry it), else the latest verify's. Charts are
matplotlib SVG embedded as data: URIs, so the page needs no other file and no network; everything
read from reports is escaped by the Jinja2 template (autoescape) and drawn by matplotlib as plain
text (no mathtext), and a Content-Security-Policy keeps the page from loading or running anything.
"""

from __future__ import annotations

import base64
import datetime
import io
import os
import pathlib
import sys

import jinja2
import matplotlib
from matplotlib.figure import Figure

REPO = pathlib.Path(__file__).resolve().parent.parent
sys.path[:0] = [str(REPO), str(REPO / ".collections")]  # the collection imports as Ansible imports it
from ansible_collections.sglang.fleet.plugins.module_utils.report import fleet_reports  # noqa: E402

TEMPLATE = pathlib.Path(__file__).resolve().parent / "templates" / "fleet_report.html.j2"
# Text stays text (smaller files, searchable); a `$` in a host name is a dollar, not mathtext;
# the same input gives the same SVG (fixed ids, no date).
STYLE = {"svg.fonttype": "none", "svg.hashsalt": "sglang-fleet", "text.parse_math": False,
         "font.family": "DejaVu Sans", "font.size": 8.5}
FAILED_SHADE = "#f4c7c3"
MAX_TICKS = 8


def _number(value):
    return value if isinstance(value, (int, float)) and not isinstance(value, bool) and value == value else None


def _when(stamp):
    seconds = fleet_reports.stamp_seconds(stamp)
    if seconds is None:
        return str(stamp or "?")
    return datetime.datetime.fromtimestamp(seconds, datetime.UTC).strftime("%m-%d %H:%M")


def release_ids(folder):
    """{generated_at of a verify run: id of the release deploy recorded with it} from release-*.json."""
    ids = {}
    for name in sorted(os.listdir(folder)) if os.path.isdir(folder) else []:
        if name.startswith("release-") and name.endswith(".json") and name != "release-latest.json":
            record = fleet_reports.load(os.path.join(folder, name)) or {}
            stamp = (record.get("verify") or {}).get("generated_at")
            if stamp and record.get("id"):
                ids[stamp] = record["id"]
    return ids


def history_points(folder):
    """The host's verify runs as chart points, oldest first: when, passed, decode, output per
    concurrency, roofline, floor, version, fingerprint, release (id or None), efficiency."""
    latest = fleet_reports.load(os.path.join(folder, "verify-latest.json")) or {}
    releases = release_ids(folder)
    points = []
    for run in fleet_reports.verify_history(folder):
        stamp = run.get("generated_at")
        report = None
        if fleet_reports.stamp_seconds(stamp) is not None:  # a real stamp, so a plain file name
            report = fleet_reports.load(os.path.join(folder, f"verify-{stamp}.json"))
        floor = ((report or latest).get("thresholds") or {}).get("min_decode_tok_s")
        metrics = run.get("metrics") or {}
        outputs = {}
        for key, value in metrics.items():
            kind, _, level = str(key).partition("@")
            if kind == "output_tok_s" and level.isdigit() and _number(value) is not None:
                outputs[int(level)] = value
        points.append({
            "when": _when(stamp), "passed": bool(run.get("passed")),
            "decode": _number(metrics.get("decode_tok_s@1")), "outputs": outputs,
            "roofline": _number(run.get("upper_bound_tok_s")),
            "floor": _number(floor) or None,  # 0 = no floor
            "version": str(run.get("version") or "?"), "fingerprint": str(run.get("fingerprint") or "?"),
            "release": releases.get(stamp), "efficiency": _number(run.get("efficiency_pct")),
        })
    return points


def changes(points):
    """[(index, label)] where the SGLang version or the flags change (the first run included)."""
    marks = []
    for i, p in enumerate(points):
        prev = points[i - 1] if i else None
        if prev and (prev["version"], prev["fingerprint"]) == (p["version"], p["fingerprint"]):
            continue
        if p["release"]:
            label = p["release"]
        elif prev is None or prev["version"] != p["version"]:
            label = f"sglang {p['version']}"
        else:
            label = f"flags {p['fingerprint'][:8]}"
        marks.append((i, label))
    return marks


def svg_uri(fig):
    buf = io.BytesIO()
    fig.savefig(buf, format="svg", metadata={"Date": None})
    return "data:image/svg+xml;base64," + base64.b64encode(buf.getvalue()).decode("ascii")


def _nan(values):
    return [float("nan") if v is None else v for v in values]


def history_chart(host, points):
    """Two panels over the host's verify runs: single-stream decode (floor, roofline) and output tok/s."""
    n = len(points)
    fig = Figure(figsize=(9, 5))  # fixed margins: constrained layout doubled the time per chart
    top, bottom = fig.subplots(2, 1, sharex=True, height_ratios=[3, 2],
                               gridspec_kw={"left": 0.08, "right": 0.985, "top": 0.93, "bottom": 0.17, "hspace": 0.06})
    x = list(range(n))
    edges = [i - 0.5 for i in range(n + 1)]
    failed = [i for i, p in enumerate(points) if not p["passed"]]
    for i in failed:
        top.axvspan(i - 0.5, i + 0.5, color=FAILED_SHADE, lw=0, label="failed run" if i == failed[0] else None)
        bottom.axvspan(i - 0.5, i + 0.5, color=FAILED_SHADE, lw=0)
    top.plot(x, _nan([p["decode"] for p in points]), marker="o", color="tab:blue", label="single-stream decode")
    if any(p["roofline"] for p in points):
        top.stairs(_nan([p["roofline"] for p in points]), edges, baseline=None, color="tab:green", ls="--",
                   lw=1.5, label="roofline (upper bound)")
    if any(p["floor"] for p in points):
        top.stairs(_nan([p["floor"] for p in points]), edges, baseline=None, color="tab:red", ls=":", lw=1.5,
                   label="floor")
    for level in sorted({c for p in points for c in p["outputs"]}):
        bottom.plot(x, _nan([p["outputs"].get(level) for p in points]), marker="s", ms=4,
                    label=f"output, concurrency {level}")
    for i, label in changes(points):
        for ax in (top, bottom):
            ax.axvline(i - 0.5, color="0.35", lw=1, ls="-.")
        top.annotate(label, xy=(i - 0.5, 1), xycoords=("data", "axes fraction"), xytext=(3, -3),
                     textcoords="offset points", ha="left", va="top", fontsize=7.5, color="0.2")
    top.set_ylim(bottom=0, top=max([v for p in points for v in (p["decode"], p["roofline"], p["floor"])
                                    if v] or [1]) * 1.22)
    bottom.set_ylim(bottom=0, top=max([v for p in points for v in p["outputs"].values()] or [1]) * 1.3)
    top.set_ylabel("tok/s (one stream)")
    bottom.set_ylabel("output tok/s")
    step = max(1, -(-n // MAX_TICKS))
    ticks = x[::step]
    bottom.set_xticks(ticks, [points[i]["when"] for i in ticks], rotation=25, ha="right")
    bottom.set_xlim(-0.5, n - 0.5)
    bottom.set_xlabel("verify run (UTC)")
    top.legend(loc="lower left", fontsize=7, ncols=4)
    if bottom.lines:
        bottom.legend(loc="lower left", fontsize=7, ncols=3)
    for ax in (top, bottom):
        ax.grid(axis="y", color="0.9")
    fig.suptitle(f"{host}: {n} verify run{'s' if n != 1 else ''}", fontsize=9.5)
    return svg_uri(fig)


def roofline_chart(hosts):
    """One bar per host: the latest verify's single-stream decode as % of its roofline, earlier runs as dots."""
    fig = Figure(figsize=(9, 0.42 * len(hosts) + 1.3), layout="constrained")
    ax = fig.subplots()
    y = list(range(len(hosts)))[::-1]  # first host on top
    for yi, h in zip(y, hosts):
        latest = h["latest_efficiency"]
        earlier = [p["efficiency"] for p in h["points"] if p["efficiency"] is not None]
        if earlier:
            ax.scatter(earlier, [yi] * len(earlier), s=14, color="0.55", zorder=3,
                       label=None if ax.collections else "each verify run")
        if h.get("roofline_na"):  # a CPU host: no GPU memory bandwidth, no roofline (its row says so)
            ax.text(1, yi, f"roofline {h['row']['roofline tok/s']}", va="center", fontsize=8, color="0.3",
                    style="italic")
            continue
        if latest is None:
            ax.text(1, yi, "no verify run yet", va="center", fontsize=8, color="0.3", style="italic")
            continue
        ax.barh(yi, latest, color="tab:blue" if h["passed"] else "tab:red", height=0.6)
        ax.text(latest + 1, yi + 0.18, f"{latest:.0f} %", va="center", fontsize=8)
    ax.set_yticks(y, [h["name"] for h in hosts])
    ax.set_xlim(0, 100)
    ax.set_ylim(-0.7, len(hosts) - 0.3)
    ax.set_xlabel("single-stream decode, % of the memory-bandwidth roofline (bar: latest verify, red: it failed)")
    ax.grid(axis="x", color="0.9")
    handles, labels = ax.get_legend_handles_labels()
    if handles:
        ax.legend(handles[:1], labels[:1], loc="lower right", fontsize=7)
    return svg_uri(fig)


def host_view(folder, row):
    """What the page shows of one host: its row, chart (or why none) and latest verify messages."""
    name = os.path.basename(os.path.normpath(folder))
    latest = fleet_reports.load(os.path.join(folder, "verify-latest.json"))
    points = history_points(folder)
    return {
        "name": name, "row": row, "ok": row["ok"], "points": points,
        "latest_efficiency": _number((latest or {}).get("efficiency_pct")),
        "passed": bool((latest or {}).get("passed")),
        "roofline_na": bool(((latest or {}).get("roofline") or {}).get("not_applicable")),
        "verify_line": (latest or {}).get("line"), "failures": (latest or {}).get("failures") or [],
        "no_chart": None if points else ("no verify run yet" if latest is None else
                                         "no verify history yet (verify-history.jsonl is empty or missing)"),
    }


def render(hosts, columns, reports_dir, now=None):
    """The page for [(host folder, fleet_report.host_row)] as a string."""
    views = [host_view(folder, row) for folder, row in hosts]
    with matplotlib.rc_context(STYLE):
        for v in views:
            v["chart"] = history_chart(v["name"], v["points"]) if v["points"] else None
        fleet_chart = roofline_chart(views) if any(v["latest_efficiency"] is not None or v["points"]
                                                   for v in views) else None
    env = jinja2.Environment(loader=jinja2.FileSystemLoader(str(TEMPLATE.parent)), autoescape=True,
                             undefined=jinja2.StrictUndefined, trim_blocks=True, lstrip_blocks=True)
    now = now or datetime.datetime.now(datetime.UTC)
    return env.get_template(TEMPLATE.name).render(
        hosts=views, columns=columns, fleet_chart=fleet_chart, reports_dir=str(reports_dir),
        generated=now.strftime("%Y-%m-%d %H:%M UTC"), failing=sum(not v["ok"] for v in views))


def write(path, hosts, columns, reports_dir):
    """Write the page to `path` through a temporary file renamed into place (a reader never sees half
    of it), 0600 like the reports it is made of."""
    path = pathlib.Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    text = render(hosts, columns, reports_dir)
    fleet_reports.write_atomic(path, text)
    return path
