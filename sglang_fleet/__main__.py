"""python -m sglang_fleet deploy|audit|verify|drift|releases|rollback|regression|PLAYBOOK.yml [options] [-- ansible-playbook options]

Runs the playbook with ansible-runner (the repository's ansible.cfg), reads the outcome from the
runner's job events and prints one line per host (or --json); exits like ansible-playbook:
0 ok, 2 a host failed, 4 a host unreachable, 1 when no play ran (the error says why).
ansible-playbook runs in the repository: paths after `--` are relative to it.
"""

from __future__ import annotations

import argparse
import json
import sys

from .runner import PLAYBOOKS, RunResult, playbook_path, run_playbook


def parse(argv: list[str]) -> argparse.Namespace:
    extra: list[str] = []
    if "--" in argv:
        argv, extra = argv[: argv.index("--")], argv[argv.index("--") + 1 :]
    parser = argparse.ArgumentParser(prog="python -m sglang_fleet", description=__doc__.split("\n\n")[1],
                                     epilog="Options after `--` go to ansible-playbook as they are "
                                            "(e.g. -- --tags sglang_compat --diff).")
    parser.add_argument("playbook", metavar="PLAYBOOK", help=f"{', '.join(PLAYBOOKS)} or a playbook file")
    parser.add_argument("-l", "--limit", help="hosts pattern (ansible-playbook --limit)")
    parser.add_argument("-i", "--inventory", action="append", help="inventory (repeatable; default: ansible.cfg's)")
    parser.add_argument("-e", "--extra-vars", action="append", default=[], metavar="VARS",
                        help="key=value, JSON or @file, as for ansible-playbook (repeatable)")
    parser.add_argument("--check", action="store_true", help="check mode (ansible-playbook --check)")
    parser.add_argument("--json", action="store_true", help="print the result as JSON instead of the summary")
    parser.add_argument("--artifacts", metavar="DIR",
                        help="keep the runner's artifacts (job_events/, stdout) in DIR (default: a temporary folder)")
    parser.add_argument("-v", "--show-output", action="store_true", help="also show ansible-playbook's output live")
    args = parser.parse_args(argv)
    try:
        playbook_path(args.playbook)
    except ValueError as exc:
        parser.error(str(exc))
    args.ansible_args = extra
    return args


def summary(result: RunResult) -> str:
    """One line per host with its recap, the failed tasks' messages under it, and a last line."""
    name = result.playbook.rsplit("/", 1)[-1]
    lines = []
    width = max((len(h) for h in result.hosts), default=0)
    swidth = max((len(h.status) for h in result.hosts.values()), default=0)
    for host in result.hosts.values():
        lines.append(f"{host.host:<{width}}  {host.status:<{swidth}}  ok={host.ok} changed={host.changed} "
                     f"failed={host.failed} unreachable={host.unreachable} skipped={host.skipped} "
                     f"rescued={host.rescued} ignored={host.ignored}")
        if host.status in ("failed", "unreachable"):
            for failure in host.failures:
                msg = failure.msg.replace("\n", "\n      ")
                lines.append(f"    {failure.task}: {msg}")
    counts: dict[str, int] = {}
    for host in result.hosts.values():
        counts[host.status] = counts.get(host.status, 0) + 1
    told = ", ".join(f"{n} {s}" for s, n in sorted(counts.items())) or "no hosts"
    lines.append(f"{name}: {told} (rc {result.rc})")
    if result.error:
        lines.append(f"{name}: no play ran:\n{result.error}")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    args = parse(sys.argv[1:] if argv is None else argv)
    result = run_playbook(args.playbook, limit=args.limit, inventory=args.inventory, extra_vars=args.extra_vars,
                          check=args.check, args=args.ansible_args, artifacts=args.artifacts,
                          show_output=args.show_output)
    print(json.dumps(result.to_dict(), indent=2) if args.json else summary(result))
    return result.rc


if __name__ == "__main__":
    sys.exit(main())
