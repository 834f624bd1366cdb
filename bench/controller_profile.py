#!/usr/bin/env python3
"""Where an ansible-playbook run's controller CPU goes, from py-spy's collapsed stacks.

    .venv/bin/python bench/controller_profile.py RUN.txt [--top 25]

RUN.txt: `py-spy record --subprocesses --format raw` of ansible-playbook (bench/deploy_tasks.py
--profile writes them). Each line is one stack, root first, and its sample count; with --subprocesses
the forked workers' stacks are in it too. Prints the share of samples per phase (the first phase, in
PHASES' order, with a frame in the stack) and the functions with the most inclusive samples.
"""

import argparse
import collections
import re
import sys

# (phase, what a frame's text contains), checked in this order: a sample belongs to the first whose
# pattern any of its frames matches. Names are ansible-core 2.19's.
PHASES = [
    ("module payload build (AnsiballZ)", re.compile(r"\b(modify_module|_find_module_utils|recursive_finder|_build_ansiballz)")),
    ("connection (ssh, file transfer)", re.compile(r"plugins/connection/|_low_level_execute_command|_transfer_data")),
    ("variables (get_vars)", re.compile(r"\bget_vars \(.*vars/manager")),
    ("templating", re.compile(r"ansible/_internal/_templating/|ansible/template/")),
    ("callbacks and output", re.compile(r"plugins/callback/|display\.py")),
    ("worker start (fork)", re.compile(r"\b(_queue_task|_launch|_Popen|start) \(.*(multiprocessing|worker)")),
    ("playbook parsing and loading", re.compile(r"ansible/playbook/|parsing/dataloader|load_list_of")),
    ("imports", re.compile(r"<frozen importlib")),
]


def read(path):
    """[(frames, samples)] of a collapsed-stack file."""
    stacks = []
    for line in open(path, encoding="utf-8", errors="replace"):
        text, _, count = line.rstrip("\n").rpartition(" ")
        if text and count.isdigit():
            stacks.append((text.split(";"), int(count)))
    return stacks


def report(path, top=25):
    stacks = read(path)
    total = sum(n for _, n in stacks) or 1
    phases = collections.Counter()
    inclusive = collections.Counter()
    for frames, n in stacks:
        phase = next((name for name, pattern in PHASES if any(pattern.search(f) for f in frames)), "other")
        phases[phase] += n
        for f in {re.sub(r":\d+\)$", ")", f) for f in frames[1:]}:   # frames[0] names the process
            inclusive[f] += n
    lines = [f"{total} samples (~{total / 100:.1f} s of a thread running or runnable, at 100 Hz)", "| phase | samples | share |", "|---|---|---|"]
    lines += [f"| {name} | {n} | {n / total * 100:.1f} % |" for name, n in phases.most_common()]
    lines += ["", "| function (inclusive) | samples | share |", "|---|---|---|"]
    lines += [f"| {f[:110]} | {n} | {n / total * 100:.1f} % |" for f, n in inclusive.most_common(top)]
    return "\n".join(lines)


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("stacks")
    p.add_argument("--top", type=int, default=25)
    a = p.parse_args()
    print(report(a.stacks, a.top))
    return 0


if __name__ == "__main__":
    sys.exit(main())
