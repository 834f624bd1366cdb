"""Build the REAL SGLang server parser from an extracted wheel and dump its actions as JSON.

Run in a throwaway interpreter (never in the test process):
    python -S -s real_parser_dump.py SGLANG_PARENT [MSGSPEC_PARENT]  ->  JSON actions on stdout
    python -S -s real_parser_dump.py --parse SGLANG_PARENT [MSGSPEC_PARENT] < argvs.json
        ->  for each argv (a JSON list of lists): {"ok": true} or {"ok": false, "error": ...}
The import sandbox (scripts/sglang_sandbox.py) replaces heavy dependencies (torch, triton,
transformers, ...) by stub modules, so only the argparse part of ``sglang.srt.server_args`` really
runs: of sglang, ``srt/server_args.py`` and ``srt/arg_groups/``.
"""
import json
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))), "scripts"))
import sglang_sandbox  # noqa: E402


def main():
    parse, paths = sglang_sandbox.command_line(sys.argv[1:])
    parser = sglang_sandbox.Sandbox(paths[0]).install(paths).parser()
    if parse:
        json.dump(sglang_sandbox.parse_each(parser, json.load(sys.stdin)), sys.stdout)
        return
    out = []
    for a in parser._actions:
        choices = None
        if a.choices is not None:
            try:
                choices = sorted(str(c) for c in a.choices)
            except TypeError:
                choices = "<unsortable>"
        out.append({"option_strings": a.option_strings, "dest": a.dest,
                    "action": type(a).__name__, "nargs": a.nargs, "choices": choices,
                    "required": a.required})
    json.dump(out, sys.stdout)


if __name__ == "__main__":
    main()
