"""Where a lab phase's CPU and time went, from the log `make lab-test` keeps (.lab/lab-cpu.jsonl).

    .venv/bin/python bench/lab_cpu.py [.lab/lab-cpu.jsonl] [--tests N]

Prints each module's CPU seconds (the controller's + its hosts') and wall seconds, how it began (its
own deploy or a snapshot), the N costliest tests, and the phase's timeline: how many modules ran
at once, minute by minute (a tail with one module running is time the schedule, not the CPU, sets).
Each module's and test's line is written by tests/lab/conftest.py when it ends.
"""

import argparse
import json
import math
import pathlib


def read(path):
    return read_rows(json.loads(line) for line in pathlib.Path(path).read_text().splitlines() if line.strip())


def read_rows(rows):
    """(module lines, test lines)."""
    rows = list(rows)
    return [r for r in rows if "module" in r], [r for r in rows if "test" in r]


def cpu(row):
    return row["controller_cpu_s"] + row["hosts_cpu_s"]


def modules_table(modules):
    lines = ["| module | CPU s: controller + hosts = all | wall s | fleet |", "|---|---|---|---|"]
    for r in sorted(modules, key=lambda r: -cpu(r)):
        lines.append(f"| {r['module']} | {r['controller_cpu_s']:.0f} + {r['hosts_cpu_s']:.0f} = {cpu(r):,.0f} | "
                     f"{r['wall_s']:,.0f} | {r.get('fleet') or '-'} |")
    total_c, total_h = sum(r["controller_cpu_s"] for r in modules), sum(r["hosts_cpu_s"] for r in modules)
    lines.append(f"| all {len(modules)} | {total_c:,.0f} + {total_h:,.0f} = {total_c + total_h:,.0f} | "
                 f"{sum(r['wall_s'] for r in modules):,.0f} | |")
    return lines


def tests_table(modules, tests, count):
    """The costliest tests, and each module's fleet: its line less its tests' (setup and teardown)."""
    lines = ["| test | CPU s: controller + hosts | wall s |", "|---|---|---|"]
    for r in sorted(tests, key=lambda r: -cpu(r))[:count]:
        lines.append(f"| {r['test'].split('/')[-1]} | {r['controller_cpu_s']:.0f} + {r['hosts_cpu_s']:.0f} | "
                     f"{r['wall_s']:,.0f} |")
    lines += ["", "| module's fleet (setup and teardown) | CPU s | wall s |", "|---|---|---|"]
    for m in sorted(modules, key=lambda r: -cpu(r)):
        own = [t for t in tests if t["test"].split("::")[0].endswith(m["module"])]
        lines.append(f"| {m['module']} | {cpu(m) - sum(cpu(t) for t in own):,.0f} | "
                     f"{m['wall_s'] - sum(t['wall_s'] for t in own):,.0f} |")
    return lines


def timeline(modules):
    """Modules running in each minute of the phase (from their end times and wall seconds)."""
    if not modules or "end" not in modules[0]:
        return ["(no end times in this log)"]
    spans = [(r["end"] - r["wall_s"], r["end"]) for r in modules]
    start, end = min(s for s, _ in spans), max(e for _, e in spans)
    lines = []
    for minute in range(math.ceil((end - start) / 60)):
        t0, t1 = start + 60 * minute, start + 60 * (minute + 1)
        running = sum(min(e, t1) - max(s, t0) for s, e in spans if s < t1 and e > t0) / 60
        lines.append(f"{minute:3d} min  {running:4.1f} modules  {'#' * round(running * 4)}")
    return lines


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("log", nargs="?", default=".lab/lab-cpu.jsonl")
    parser.add_argument("--tests", type=int, default=15, help="how many of the costliest tests to list")
    args = parser.parse_args(argv)
    modules, tests = read(args.log)
    for block in (modules_table(modules), tests_table(modules, tests, args.tests), timeline(modules)):
        print("\n".join(block), end="\n\n")


if __name__ == "__main__":
    main()
