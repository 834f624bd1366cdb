"""Stage a locked revision from the controller to a host with rsync over the host's own SSH.

rsync because it is the tool for this job: a file interrupted half-way is kept in
`.rsync-partial` and finished by the next run, `--bwlimit` caps the rate, the quick check (size +
mtime) makes a re-run of a staged revision send 0 bytes, and `--link-dest` hard-links the files a
new revision shares with one already on the host instead of sending them again.

A hub revision's cached files get an mtime derived from their sha256 (set_mtimes), so that a file
with the same bytes has the same size and mtime in every revision; a source folder's files keep
their own. Runs on the controller; stdlib only.
"""

import os
import re
import shlex
import subprocess
import tempfile
import time

PARTIAL_DIR = ".rsync-partial"
_EPOCH = 1_000_000_000  # 2001-09-09: hash-derived mtimes lie in 2001-2035


def mtime_of(sha256):
    """The mtime a file with these bytes gets in the controller's cache (and, through rsync, on the host)."""
    return _EPOCH + int(sha256[:8], 16) % (1 << 30)


def set_mtimes(folder, files):
    for f in files:
        t = mtime_of(f["sha256"])
        os.utime(os.path.join(folder, f["path"]), (t, t))


def ssh_command(port=None, private_key=None, ssh_args=""):
    """The `-e` of rsync: the connection Ansible uses (its port, key and ssh arguments), non-interactive."""
    cmd = ["ssh", "-o", "BatchMode=yes"]
    if port:
        cmd += ["-p", str(port)]
    if private_key:
        cmd += ["-i", os.path.expanduser(private_key)]
    cmd += shlex.split(ssh_args or "")
    return " ".join(shlex.quote(w) for w in cmd)


def rsync_argv(src, dest, address, files_from, ssh, bwlimit="", become=False, link_dest=()):
    argv = ["rsync", "--times", "--perms", "--chmod=D0755,F0644", "--partial", f"--partial-dir={PARTIAL_DIR}",
            "--mkpath", "--stats", f"--files-from={files_from}", "-e", ssh]
    if bwlimit:
        argv.append(f"--bwlimit={bwlimit}")
    if become:
        argv.append("--rsync-path=sudo -n rsync")
    argv += [f"--link-dest={d}" for d in link_dest]
    return argv + [src.rstrip("/") + "/", f"{address}:{dest.rstrip('/')}/"]


_STAT = {"files_transferred": r"Number of regular files transferred: ([\d,]+)",
         "literal_bytes": r"Literal data: ([\d,]+)", "bytes_sent": r"Total bytes sent: ([\d,]+)"}


def parse_stats(out):
    stats = {}
    for key, pattern in _STAT.items():
        m = re.search(pattern, out)
        stats[key] = int(m.group(1).replace(",", "")) if m else None
    return stats


def stage(src, dest, paths, address, ssh, bwlimit="", become=False, link_dest=(), timeout=None):
    """rsync `paths` (relative) from `src` to `address:dest`. Returns {rc, stderr, seconds, files_transferred,
    literal_bytes (file bytes sent), bytes_sent (on the wire)}."""
    with tempfile.NamedTemporaryFile("w", prefix="sglang-fleet-files-", suffix=".txt") as listing:
        listing.write("".join(p + "\n" for p in paths))
        listing.flush()
        argv = rsync_argv(src, dest, address, listing.name, ssh, bwlimit, become, link_dest)
        started = time.monotonic()
        proc = subprocess.run(argv, capture_output=True, text=True, timeout=timeout, check=False)
    return {"rc": proc.returncode, "stderr": proc.stderr.strip()[-2000:], "seconds": round(time.monotonic() - started, 3),
            **parse_stats(proc.stdout)}
