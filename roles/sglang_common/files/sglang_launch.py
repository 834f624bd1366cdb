"""Start SGLang (or its router) with secrets taken from the environment, never from argv, and
out of its log.

Installed by sglang-fleet's sglang_common role (launcher tasks) and run by the systemd units of
sglang_service and sglang_router:

    <venv>/bin/python sglang_launch.py <entrypoint> --model-path M --tp-size 2 ...
    <venv>/bin/python sglang_launch.py sglang_router.launch_router --worker-urls ...

<entrypoint> is a module (sglang.launch_server, sglang_router.launch_router) or a .py file. The
router's --api-key (sglang-router 0.3.2 router_args.py:827) has the server's name. The flags in the unit are
passed through unchanged; secret flags (--api-key...) are appended here, in-process, from the
variables the root-only EnvironmentFile provides, so they never show in the unit file,
`ps`, /proc/PID/cmdline or the journal's "Started ..." line.

SGLang itself prints them: it logs every server arg at start-up (0.5.11
srt/entrypoints/engine.py:679 `logger.info(f"{server_args=}")`, 0.5.23 engine.py:1185), API key
included. So when there are secrets, this process's stdout and stderr (fd 1 and 2, which SGLang's
subprocesses inherit) go through a pipe to a small filter process that replaces every secret
value with <redacted> before it reaches the journal (or sglang_service_log_file). The filter is
not a child of the server (it is forked twice), so SGLang's own kill_process_tree cannot kill it
before it has passed on a crash's last lines; it ignores SIGTERM/SIGINT/SIGHUP and ends when the
last writer has closed the pipe, i.e. when the server and all its subprocesses are gone.
"""

import os
import re
import runpy
import signal
import sys

# sglang_args.SECRET_ARGS the other way round (this file runs on the host, alone)
SECRET_FLAGS = {"SGLANG_API_KEY": "--api-key", "SGLANG_ADMIN_API_KEY": "--admin-api-key",
                "SGLANG_SSL_KEYFILE_PASSWORD": "--ssl-keyfile-password"}
SECRETS_VARIABLE = "SGLANG_FLEET_SECRETS"  # the names of the EnvironmentFile's variables
REDACTED = b"<redacted>"
CHUNK = 65536


def redact_stream(read_fd, write_fd, secrets):
    """Copy read_fd to write_fd until EOF with every secret replaced. Whole lines (up to \\n or
    \\r, which no secret holds: preflight refuses them) go at once; a partial line longer than
    CHUNK goes in pieces that hold back its last len(longest secret) - 1 bytes and any secret
    crossing the cut, so an occurrence is always redacted whole."""
    values = sorted({s.encode() for s in secrets if s}, key=len, reverse=True)
    pattern = re.compile(b"|".join(re.escape(v) for v in values))
    keep = len(values[0]) - 1
    buf = b""
    while True:
        try:
            data = os.read(read_fd, CHUNK)
        except InterruptedError:
            continue
        if not data:
            break
        buf += data
        end = max(buf.rfind(b"\n"), buf.rfind(b"\r")) + 1
        if len(buf) - end > CHUNK:
            end = len(buf) - keep
            crossing = [m.start() for m in pattern.finditer(buf) if m.start() < end < m.end()]
            end = crossing[0] if crossing else end
        if end:
            _write_all(write_fd, pattern.sub(REDACTED, buf[:end]))
            buf = buf[end:]
    if buf:
        _write_all(write_fd, pattern.sub(REDACTED, buf))


def _write_all(fd, data):
    while data:
        try:
            data = data[os.write(fd, data):]
        except InterruptedError:
            continue
        except OSError:
            return  # the journal went away: nothing left to protect


def redact_output(secrets):
    """Route fd 1 and 2 of this process (and of every process it starts) through the filter."""
    read_fd, write_fd = os.pipe()
    sys.stdout.flush()
    sys.stderr.flush()
    pid = os.fork()
    if pid == 0:
        if os.fork() == 0:
            try:
                for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
                    signal.signal(sig, signal.SIG_IGN)
                os.close(write_fd)
                redact_stream(read_fd, 1, secrets)
            finally:
                os._exit(0)
        os._exit(0)
    os.waitpid(pid, 0)
    os.close(read_fd)
    os.dup2(write_fd, 1)
    os.dup2(write_fd, 2)
    os.close(write_fd)


def main():
    if len(sys.argv) < 2:
        sys.exit("usage: sglang_launch.py <module or file.py> [sglang arguments...]")
    entrypoint, args = sys.argv[1], sys.argv[2:]
    # Every variable of the EnvironmentFile is a secret; it names them in SECRETS_VARIABLE.
    names = os.environ.pop(SECRETS_VARIABLE, "").split()
    secrets = [os.environ[name] for name in names if os.environ.get(name)]
    for variable, flag in SECRET_FLAGS.items():
        value = os.environ.pop(variable, "")
        if value:
            args += [flag, value]
            secrets.append(value)
    if secrets:
        redact_output(secrets)
    sys.argv = [entrypoint, *args]
    if entrypoint.endswith(".py"):
        runpy.run_path(entrypoint, run_name="__main__")
    else:
        runpy.run_module(entrypoint, run_name="__main__", alter_sys=True)


if __name__ == "__main__":
    main()
