#!/usr/bin/python3
"""Throwaway service for lab/smoke: report what the service manager applied, then idle.

Writes /var/lib/labprobe/report.json (and the same line to stdout, i.e. the unit's log);
exits 3 when /var/lib/labprobe/crash-now appears (to exercise Restart=on-failure).
"""

import json
import os
import resource
import sys
import time

STATE = "/var/lib/labprobe"


def proc_status(key):
    """A field of /proc/self/status."""
    with open("/proc/self/status") as fh:
        for line in fh:
            if line.startswith(key + ":"):
                return line.split()[1]
    return None


def can_write(path):
    """True if a file can be created at path, else the error."""
    try:
        with open(path, "w") as fh:
            fh.write("x")
        os.unlink(path)
        return True
    except OSError as exc:
        return f"no: {exc.strerror}"


def can_list(path):
    """The directory's entries, else the error."""
    try:
        return sorted(os.listdir(path))
    except OSError as exc:
        return f"no: {exc.strerror}"


def main():
    """Report, then wait for the crash request."""
    with open("/tmp/labprobe-marker", "w") as fh:
        fh.write(str(os.getpid()))
    umask_file = os.path.join(STATE, "umask-test")
    with open(umask_file, "w"):
        pass
    report = {
        "pid": os.getpid(),
        "user": os.getuid(),
        "group": os.getgid(),
        "groups": os.getgroups(),
        "env_file": os.environ.get("LABPROBE_MSG"),
        "env": os.environ.get("LABPROBE_ENV"),
        "cwd": os.getcwd(),
        "nice": os.nice(0),
        "umask_file_mode": oct(os.stat(umask_file).st_mode & 0o777),
        "nofile": list(resource.getrlimit(resource.RLIMIT_NOFILE)),
        "no_new_privs": proc_status("NoNewPrivs"),
        "cap_bnd": proc_status("CapBnd"),
        "write_opt": can_write("/opt/labprobe-rw/probe"),
        "list_home": can_list("/home/probeuser"),
    }
    with open(os.path.join(STATE, "report.json"), "w") as fh:
        json.dump(report, fh)
    print("labprobe started", json.dumps(report), flush=True)
    print("labprobe: a line on stderr", file=sys.stderr, flush=True)
    crash = os.path.join(STATE, "crash-now")
    while True:
        if os.path.exists(crash):
            os.unlink(crash)
            print("labprobe: exiting with 3 on request", flush=True)
            return 3
        time.sleep(0.2)


if __name__ == "__main__":
    sys.exit(main())
