"""Start SGLang with secrets taken from the environment, never from argv.

Installed by sglang-fleet's sglang_service role and run by the systemd unit:

    <venv>/bin/python sglang_launch.py <entrypoint> --model-path M --tp-size 2 ...

<entrypoint> is a module (sglang.launch_server) or a .py file. The flags in the unit are
passed through unchanged; secret flags (--api-key...) are appended here, in-process, from the
variables the root-only EnvironmentFile provides, so they never show in the unit file,
`ps`, /proc/PID/cmdline or the journal's "Started ..." line.
"""

import os
import runpy
import sys

SECRET_FLAGS = {"SGLANG_API_KEY": "--api-key", "SGLANG_ADMIN_API_KEY": "--admin-api-key"}


def main():
    if len(sys.argv) < 2:
        sys.exit("usage: sglang_launch.py <module or file.py> [sglang arguments...]")
    entrypoint, args = sys.argv[1], sys.argv[2:]
    for variable, flag in SECRET_FLAGS.items():
        value = os.environ.pop(variable, "")
        if value:
            args += [flag, value]
    if entrypoint.endswith(".py"):
        sys.argv = [entrypoint, *args]
        runpy.run_path(entrypoint, run_name="__main__")
    else:
        sys.argv = [entrypoint, *args]
        runpy.run_module(entrypoint, run_name="__main__", alter_sys=True)


if __name__ == "__main__":
    main()
