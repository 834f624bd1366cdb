#!/usr/bin/env python3
"""The lab's Hugging Face hub: olah (a real self-hosted mirror) serving local git repositories.

    hub.py up [--dir .lab/hub] [--port 0] [--bulk-mb 256]   build the repositories once, start, write hub.json
    hub.py status [--dir .lab/hub]                          print hub.json; exit 3 when it is not up
    hub.py down [--dir .lab/hub]                            stop both processes; the repositories stay

olah runs from its own virtualenv (~/.cache/sglang-fleet/lab-hub/venv-<lock sha256>, from
lab/hub/requirements.lock: one per lock, shared by the machine's clones) behind
front.py, a thin proxy on 127.0.0.1:<port> that adds what olah lacks (gating, the hub's error codes).
Standard library only; see lab/hub/README.md.
"""

import argparse
import errno
import fcntl
import hashlib
import json
import os
import random
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.request

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
HERE = os.path.join(ROOT, "lab", "hub")
LOCK = os.path.join(HERE, "requirements.lock")
with open(LOCK, "rb") as _lock:
    LOCK_SHA256 = hashlib.sha256(_lock.read()).hexdigest()
VENV = os.path.join(os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"), "sglang-fleet", "lab-hub",
                    f"venv-{LOCK_SHA256[:16]}")
ORG = "sglang-lab"
GATED = [f"{ORG}/gated-model"]
LFS_SUFFIXES = (".safetensors", ".bin")
GITATTRIBUTES = "".join(f"*{s} filter=lfs diff=lfs merge=lfs -text\n" for s in LFS_SUFFIXES)
RECIPE_VERSION = 2


# -- olah's virtualenv -------------------------------------------------------------------------------

def ensure_venv():
    """Build olah's own virtualenv from the hash lock, once per lock content."""
    stamp = LOCK_SHA256
    stamp_file = os.path.join(VENV, "lab-lock.sha256")
    os.makedirs(os.path.dirname(VENV), exist_ok=True)
    with open(VENV + ".lock", "w") as guard:   # two test processes may start a hub at once
        fcntl.flock(guard, fcntl.LOCK_EX)
        if os.path.exists(stamp_file) and open(stamp_file).read() == stamp:
            return
        _build_venv(stamp, stamp_file)


def _build_venv(stamp, stamp_file):
    shutil.rmtree(VENV, ignore_errors=True)
    subprocess.run([sys.executable, "-m", "venv", VENV], check=True)
    subprocess.run([os.path.join(VENV, "bin", "python"), "-m", "pip", "install", "--quiet", "--disable-pip-version-check",
                    "--require-hashes", "-r", LOCK], check=True)
    with open(stamp_file, "w") as f:
        f.write(stamp)


# -- the repositories --------------------------------------------------------------------------------

def safetensors_u8(name, data):
    """A safetensors file holding one U8 tensor: u64 header length, JSON header (8-aligned), data."""
    header = json.dumps({"__metadata__": {"format": "pt"},
                         name: {"dtype": "U8", "shape": [len(data)], "data_offsets": [0, len(data)]}},
                        separators=(",", ":")).encode()
    header += b" " * (-len(header) % 8)
    return len(header).to_bytes(8, "little") + header + data


def tiny_llama_commits():
    sys.path.insert(0, os.path.join(ROOT, "lab", "real_sglang"))
    import make_tiny_model  # the lab's tiny Llama, standard library only
    files = {name: c if isinstance(c, bytes) else (c + "\n").encode() for name, c in make_tiny_model.files(0).items()}
    return [("tiny Llama (lab/real_sglang/make_tiny_model.py, seed 0)", files)]


QWEN3_8B_CONFIG = {"architectures": ["Qwen3ForCausalLM"], "model_type": "qwen3", "torch_dtype": "bfloat16",
                   "hidden_size": 4096, "num_hidden_layers": 36, "num_attention_heads": 32, "num_key_value_heads": 8,
                   "intermediate_size": 12288, "vocab_size": 151936, "max_position_embeddings": 40960}


def bulk_commits(total_mb, shards=4):
    """Two commits; the second rewrites one shard and config.json, so a new revision moves part of it."""
    size = max(total_mb * (1 << 20) // shards, 1)
    names = [f"model-{k:05d}-of-{shards:05d}.safetensors" for k in range(1, shards + 1)]

    def shard(k, version):
        return safetensors_u8(f"layers.{k}.weight", random.Random(f"bulk-{k}-v{version}").randbytes(size))

    def config(version):  # a Qwen3-8B's (h200x1's lab_model): the simulator serving it reads this file
        return (json.dumps({**QWEN3_8B_CONFIG, "lab_revision": version}, indent=2) + "\n").encode()
    index = {"metadata": {"total_size": size * shards},
             "weight_map": {f"layers.{k}.weight": names[k - 1] for k in range(1, shards + 1)}}
    first = {"README.md": b"---\nlicense: apache-2.0\n---\n# bulk-model\n\nLab data: deterministic bytes.\n",
             "config.json": config(1),
             "model.safetensors.index.json": (json.dumps(index, indent=2) + "\n").encode(),
             **{names[k - 1]: shard(k, 1) for k in range(1, shards + 1)}}
    second = {**first, "config.json": config(2), names[1]: shard(2, 2)}
    return [("first revision", first), (f"second revision: {names[1]} and config.json", second)]


def gated_commits():
    return [("gated lab model", {"config.json": b'{"model_type": "lab-gated"}\n',
                                 "weights.bin": random.Random("gated").randbytes(4096)})]


def git(repo, *args, date=None):
    env = {**os.environ, "GIT_AUTHOR_NAME": "sglang-lab", "GIT_AUTHOR_EMAIL": "lab@sglang-fleet.invalid",
           "GIT_COMMITTER_NAME": "sglang-lab", "GIT_COMMITTER_EMAIL": "lab@sglang-fleet.invalid"}
    if date:  # fixed dates and names: the same recipe gives the same commit shas
        env.update(GIT_AUTHOR_DATE=date, GIT_COMMITTER_DATE=date)
    out = subprocess.run(["git", "-C", repo, "-c", "commit.gpgsign=false", *args], env=env, check=True,
                         capture_output=True, text=True)
    return out.stdout.strip()


def build_repo(path, commits, recipe):
    """A plain git repo as olah's mirror reads it: LFS pointers in the tree, objects in .git/lfs/objects.

    Skipped when it exists with the same recipe; commits() generates the bytes only when needed."""
    stamp_file = os.path.join(path, ".git", "lab-recipe.json")
    if os.path.exists(stamp_file):
        with open(stamp_file) as f:
            stamp = json.load(f)
        if stamp["recipe"] == recipe:
            return stamp
    shutil.rmtree(path, ignore_errors=True)
    os.makedirs(path)
    git(path, "init", "--quiet", "--initial-branch=main")
    shas, files = [], {}
    for n, (message, content) in enumerate(commits()):
        for name in os.listdir(path):
            if name != ".git":
                os.remove(os.path.join(path, name))
        content = {".gitattributes": GITATTRIBUTES.encode(), **content}
        info = {}
        for name, data in content.items():
            oid = hashlib.sha256(data).hexdigest()
            info[name] = {"size": len(data), "sha256": oid}
            if name.endswith(LFS_SUFFIXES):
                obj = os.path.join(path, ".git", "lfs", "objects", oid[:2], oid[2:4], oid)
                os.makedirs(os.path.dirname(obj), exist_ok=True)
                with open(obj, "wb") as f:
                    f.write(data)
                data = f"version https://git-lfs.github.com/spec/v1\noid sha256:{oid}\nsize {len(data)}\n".encode()
                info[name]["lfs"] = True
            with open(os.path.join(path, name), "wb") as f:
                f.write(data)
        git(path, "add", "--all")
        git(path, "commit", "--quiet", "-m", message, date=f"2025-01-{n + 1:02d}T00:00:00+0000")
        shas.append(git(path, "rev-parse", "HEAD"))
        files[shas[-1]] = info
    stamp = {"recipe": recipe, "shas": shas, "files": files}
    with open(stamp_file, "w") as f:
        json.dump(stamp, f, indent=1)
    return stamp


def build_repos(mirrors, bulk_mb):
    recipes = {f"{ORG}/tiny-llama": ({"seed": 0}, tiny_llama_commits),
               f"{ORG}/bulk-model": ({"mb": bulk_mb}, lambda: bulk_commits(bulk_mb)),
               f"{ORG}/gated-model": ({}, gated_commits)}
    return {repo_id: build_repo(os.path.join(mirrors, "models", repo_id), commits,
                                {"version": RECIPE_VERSION, **params})
            for repo_id, (params, commits) in recipes.items()}


# -- processes ---------------------------------------------------------------------------------------

def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def port_free(port):
    """True when 127.0.0.1:`port` can be bound as front.py binds it (SO_REUSEADDR: a TIME_WAIT left by a
    stopped hub does not count, a listener does)."""
    with socket.socket() as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind(("127.0.0.1", port))
        except OSError as exc:
            if exc.errno != errno.EADDRINUSE:
                raise
            return False
    return True


def _read(path):
    try:
        with open(path, "rb") as f:
            return f.read()
    except OSError:
        return b""


def listeners(port, proc="/proc"):
    """{pid: argv} of the processes listening on TCP `port` that this user may look into (/proc/<pid>/fd)."""
    sockets = set()
    for table in ("tcp", "tcp6"):
        for line in _read(os.path.join(proc, "net", table)).decode().splitlines()[1:]:
            cells = line.split()  # local address is hex ip:port; state 0A is LISTEN; cell 9 the inode
            if len(cells) > 9 and cells[3] == "0A" and int(cells[1].rsplit(":", 1)[1], 16) == port:
                sockets.add(f"socket:[{cells[9]}]")
    found = {}
    for pid in filter(str.isdigit, os.listdir(proc)):
        fd_dir = os.path.join(proc, pid, "fd")
        try:
            fds = os.listdir(fd_dir)
        except OSError:  # another user's process, or gone
            continue
        for fd in fds:
            try:
                if os.readlink(os.path.join(fd_dir, fd)) in sockets:
                    found[int(pid)] = _read(os.path.join(proc, pid, "cmdline")).decode(errors="replace").split("\0")[:-1]
                    break
            except OSError:
                continue
    return found


def port_taken(port):
    """Why this checkout's hub cannot listen on 127.0.0.1:`port` (whose it is and how to free it), or None."""
    if not port or port_free(port):
        return None
    beside = ("or start this checkout's hub beside it on a port of its own: `make lab-hub LAB_HUB_PORT=<port>`, "
              "and give the playbooks `-e sglang_model_endpoint=http://127.0.0.1:<port>`")
    held = listeners(port)
    for pid, argv in sorted(held.items()):
        if len(argv) > 1 and argv[1].endswith("/lab/hub/front.py") and "--port-file" in argv:
            checkout = os.path.dirname(os.path.dirname(os.path.dirname(argv[1])))
            d = os.path.dirname(argv[argv.index("--port-file") + 1])
            whose = "this checkout" if checkout == ROOT else f"another checkout, {checkout}"
            state = read_state(d) or {}
            how = (f"`{argv[0]} {checkout}/lab/hub/hub.py down --dir {d}`" if state.get("pids", {}).get("front") == pid
                   else f"`kill {pid}` (its {d}/hub.json does not name it)")
            return (f"127.0.0.1:{port} is held by the lab hub of {whose} (pid {pid}, state in {d}), so this "
                    f"checkout's hub cannot listen there.\nEither stop that hub: {how}, {beside}.")
    if held:
        who = ", ".join(f"pid {pid} ({' '.join(argv)[:120]})" for pid, argv in sorted(held.items()))
        return (f"127.0.0.1:{port} is in use by {who}, not a lab hub, so this checkout's hub cannot listen "
                f"there.\nEither stop that process, {beside}.")
    return (f"127.0.0.1:{port} is in use by a process this user cannot see (another user's: `sudo ss -ltnp "
            f"'sport = :{port}'` names it), so this checkout's hub cannot listen there.\nEither stop that process, "
            f"{beside}.")


def alive(pid):
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def answers(endpoint):
    try:
        with urllib.request.urlopen(f"{endpoint}/api/models/{ORG}/tiny-llama/revision/main", timeout=5) as r:
            return r.status == 200
    except OSError:
        return False


def read_state(d):
    try:
        with open(os.path.join(d, "hub.json")) as f:
            return json.load(f)
    except FileNotFoundError:
        return None


def is_up(state):
    return bool(state) and all(alive(p) for p in state["pids"].values()) and answers(state["endpoint"])


def start(cmd, log):
    with open(log, "ab") as out:
        return subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                start_new_session=True)


def stop(pids, timeout=10):
    for pid in pids:
        if alive(pid):
            os.killpg(pid, signal.SIGTERM)  # each was started as its own session leader
    deadline = time.monotonic() + timeout
    while any(alive(p) for p in pids) and time.monotonic() < deadline:
        time.sleep(0.2)
    for pid in pids:
        if alive(pid):
            os.killpg(pid, signal.SIGKILL)


def up(d, port, bulk_mb):
    d = os.path.abspath(d)
    state = read_state(d)
    if is_up(state) and state.get("bulk_mb") == bulk_mb:
        return state
    if state:
        stop(list(state["pids"].values()))
    taken = port_taken(port)  # before building anything; front.py's own failure is read again below
    if taken:
        sys.exit(taken)
    os.makedirs(os.path.join(d, "logs"), exist_ok=True)
    ensure_venv()
    mirrors = os.path.join(d, "mirrors")
    built = build_repos(mirrors, bulk_mb)
    token_file = os.path.join(d, "token")
    if not os.path.exists(token_file):
        with open(token_file, "w") as f:
            f.write("hf_lab_" + secrets.token_hex(16))
    token = open(token_file).read().strip()

    olah_port = free_port()
    port_file = os.path.join(d, "front.port")
    if os.path.exists(port_file):
        os.remove(port_file)
    front = start([sys.executable, os.path.join(HERE, "front.py"), "--port", str(port), "--port-file", port_file,
                   "--upstream", f"127.0.0.1:{olah_port}", "--mirrors", mirrors, "--token", token,
                   *[a for g in GATED for a in ("--gated", g)]], os.path.join(d, "logs", "front.log"))
    deadline = time.monotonic() + 10
    while not os.path.exists(port_file):
        if front.poll() is not None or time.monotonic() > deadline:
            sys.exit(port_taken(port) or f"front.py did not start; see {d}/logs/front.log")  # taken meanwhile?
        time.sleep(0.05)
    endpoint = f"http://127.0.0.1:{int(open(port_file).read())}"

    config = os.path.join(d, "olah.toml")
    with open(config, "w") as f:  # TOML by hand: json.dumps quotes strings and lists as TOML wants
        f.write(f"[basic]\nhost = \"127.0.0.1\"\nport = {olah_port}\n"
                f"repos-path = {json.dumps(os.path.join(d, 'olah-cache'))}\n"
                f"mirrors-path = {json.dumps([mirrors])}\n"
                f"mirror-netloc = {json.dumps(endpoint.split('//')[1])}\n"
                f"mirror-lfs-netloc = {json.dumps(endpoint.split('//')[1])}\n"
                "[accessibility]\noffline = true\n")
    olah = start([os.path.join(VENV, "bin", "olah-cli"), "-c", config, "--log-path", os.path.join(d, "logs")],
                 os.path.join(d, "logs", "olah.out"))
    state = {"endpoint": endpoint, "token": token, "bulk_mb": bulk_mb,
             "repos": {r: b["shas"] for r, b in built.items()},
             "files": {r: b["files"] for r, b in built.items()},
             "pids": {"olah": olah.pid, "front": front.pid}}
    with open(os.path.join(d, "hub.json.tmp"), "w") as f:
        json.dump(state, f, indent=1)
    os.replace(os.path.join(d, "hub.json.tmp"), os.path.join(d, "hub.json"))
    deadline = time.monotonic() + 60
    while not answers(endpoint):
        if olah.poll() is not None or front.poll() is not None or time.monotonic() > deadline:
            stop([olah.pid, front.pid])
            sys.exit(f"the hub did not answer; see {d}/logs/olah.out and front.log")
        time.sleep(0.2)
    return state


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("action", choices=["up", "down", "status"])
    parser.add_argument("--dir", default=os.path.join(ROOT, ".lab", "hub"), help="state, repositories, logs")
    parser.add_argument("--port", type=int, default=0, help="the front's port on 127.0.0.1 (0: a free one)")
    parser.add_argument("--bulk-mb", type=int, default=int(os.environ.get("LAB_HUB_BULK_MB", "256")),
                        help="size of sglang-lab/bulk-model in MB (env LAB_HUB_BULK_MB; default 256)")
    args = parser.parse_args()
    if args.action == "up":
        state = up(args.dir, args.port, args.bulk_mb)
        print(json.dumps({k: state[k] for k in ("endpoint", "repos", "pids")}, indent=1))
    elif args.action == "down":
        state = read_state(args.dir)
        if state:
            stop(list(state["pids"].values()))
    else:
        state = read_state(args.dir)
        running = is_up(state)
        print(json.dumps({"up": running, **({k: state[k] for k in ("endpoint", "repos", "pids")} if state else {})},
                         indent=1))
        sys.exit(0 if running else 3)


if __name__ == "__main__":
    main()
