"""Read-only checks of a host before deploy changes it: the port, the model folder, the machine.

Stdlib only, Python 3.8+: run on the managed host by plugins/modules/sglang_host_check.py. Each
problem says what is wrong, which variable, and how to fix it.
"""

import base64
import binascii
import grp
import hashlib
import os
import pwd
import stat

from ansible_collections.sglang.fleet.plugins.module_utils.transport.observe import read_venv_marker


def listening_inodes(port, tables):
    """Socket inodes listening on TCP `port`, from the texts of /proc/net/tcp and /proc/net/tcp6."""
    inodes = set()
    for text in tables:
        for line in text.splitlines()[1:]:
            cells = line.split()
            if len(cells) < 10 or cells[3] != "0A":  # 0A = LISTEN
                continue
            if int(cells[1].rsplit(":", 1)[1], 16) == port:
                inodes.add(cells[9])
    return inodes


def _ppid(proc, pid):
    try:
        with open(os.path.join(proc, pid, "stat")) as f:
            return f.read().rsplit(")", 1)[1].split()[1]
    except (OSError, IndexError):
        return None


def _comm(proc, pid):
    try:
        with open(os.path.join(proc, pid, "comm")) as f:
            return f.read().strip()
    except OSError:
        return "?"


def port_owners(inodes, proc="/proc"):
    """{pid: comm} of the processes holding one of the socket `inodes`."""
    wanted = {f"socket:[{inode}]" for inode in inodes}
    owners = {}
    for pid in filter(str.isdigit, os.listdir(proc)):
        fd_dir = os.path.join(proc, pid, "fd")
        try:
            fds = os.listdir(fd_dir)
        except OSError:
            continue
        for fd in fds:
            try:
                if os.readlink(os.path.join(fd_dir, fd)) in wanted:
                    owners[pid] = _comm(proc, pid)
                    break
            except OSError:
                continue
    return owners


def descendants(main_pid, proc="/proc"):
    """`main_pid` and every process below it."""
    if not main_pid or main_pid == "0":
        return set()
    parent = {pid: _ppid(proc, pid) for pid in filter(str.isdigit, os.listdir(proc))}
    tree, grew = {main_pid}, True
    while grew:
        new = {pid for pid, pp in parent.items() if pp in tree} - tree
        grew = bool(new)
        tree |= new
    return tree


def port_problem(host, port, service, service_pids, owners):
    """Why `port` cannot be used: another process (not the service's) listens on it; or None."""
    others = {pid: comm for pid, comm in owners.items() if pid not in service_pids}
    if not others:
        return None
    who = ", ".join(f"pid {pid} ({comm})" for pid, comm in sorted(others.items(), key=lambda x: int(x[0])))
    return (f"{host}: sglang_args.port {port} is already in use on the host by {who}, not by the {service} "
            f"service: stop that process, or set sglang_args.port to a free port")


def _user_ids(user):
    """(uid, gids) of `user`, or None when the user does not exist yet (deploy creates it)."""
    try:
        pw = pwd.getpwnam(user)
    except KeyError:
        return None
    gids = {pw.pw_gid} | {g.gr_gid for g in grp.getgrall() if user in g.gr_mem}
    return pw.pw_uid, gids


def _allowed(st, ids, bits):
    """Whether a user (uid, gids), or any new user (ids None: only "other"), has `bits` (r=4, x=1)."""
    mode = stat.S_IMODE(st.st_mode)
    if ids is not None and ids[0] == 0:
        return True
    if ids is not None and st.st_uid == ids[0]:
        return (mode >> 6) & bits == bits
    if ids is not None and st.st_gid in ids[1]:
        return (mode >> 3) & bits == bits
    return mode & bits == bits


def model_missing_problem(host, model_path):
    """The model folder has no config.json (SGLang would fail at start-up); None when it has."""
    if os.path.isfile(os.path.join(model_path, "config.json")):
        return None
    return (f"{host}: sglang_args.model_path {model_path} has no config.json on the host. Copy the model there "
            "first, or fix the path (a Hugging Face repo id without a leading / is downloaded by SGLang itself), "
            "or declare it as sglang_model to have it fetched once and staged.")


def model_problem(host, model_path, user):
    """Why the service user cannot read the model's config.json (every folder on the way needs x,
    the model folder r and x, config.json r); None when it can or the file is missing
    (the missing case has its own message)."""
    config = os.path.join(model_path, "config.json")
    if not os.path.isfile(config):
        return None
    ids = _user_ids(user)
    who = f"the service user {user} (sglang_service_user)" + ("" if ids else ", created by deploy")
    parts = os.path.normpath(model_path).split(os.sep)
    checks = [(os.sep + os.path.join(*parts[1:i + 1]) if i else os.sep, 1) for i in range(len(parts))]
    checks[-1] = (checks[-1][0], 5)
    checks.append((config, 4))
    for path, bits in checks:
        st = os.stat(path)
        if not _allowed(st, ids, bits):
            owner = pwd.getpwuid(st.st_uid).pw_name if _known_uid(st.st_uid) else str(st.st_uid)
            group = grp.getgrgid(st.st_gid).gr_name if _known_gid(st.st_gid) else str(st.st_gid)
            return (f"{host}: sglang_args.model_path {model_path} cannot be read by {who}: {path} is "
                    f"{stat.filemode(st.st_mode)} {owner}:{group}; let it read the model (e.g. chmod -R o+rX "
                    f"{model_path}, or chgrp -R {user} {model_path} and chmod -R g+rX {model_path}), or set "
                    "sglang_args.model_path to a folder it can read")
    return None


def _known_uid(uid):
    try:
        pwd.getpwuid(uid)
        return True
    except KeyError:
        return False


def _known_gid(gid):
    try:
        grp.getgrgid(gid)
        return True
    except KeyError:
        return False


def machine_id(paths=("/etc/machine-id", "/var/lib/dbus/machine-id", "/etc/ssh/ssh_host_ed25519_key.pub")):
    """What identifies the machine: its machine-id, else its SSH host key (the first readable, non-empty)."""
    for path in paths:
        try:
            with open(path) as f:
                text = f.read().split()
        except OSError:
            continue
        if text and path.endswith(".pub") and len(text) > 1:
            try:
                blob = base64.b64decode(text[1])
            except (ValueError, binascii.Error):
                continue
            digest = base64.b64encode(hashlib.sha256(blob).digest()).decode().rstrip("=")
            return f"SSH host key SHA256:{digest}"
        if text:
            return f"machine-id {text[0]}"
    return ""


# --- facts for the compatibility check (roles/sglang_compat), read-only ----------------------------

# config.json keys the memory check reads (the rest of a config stays on the host).
CONFIG_KEYS = ("architectures", "model_type", "torch_dtype", "dtype", "hidden_size", "num_hidden_layers",
               "num_attention_heads", "num_key_value_heads", "head_dim", "max_position_embeddings", "kv_lora_rank",
               "qk_rope_head_dim", "layer_types", "full_attention_interval")


def _existing(path):
    """The nearest existing folder at or above `path` (a venv folder that is not there yet)."""
    path = os.path.abspath(path or "/")
    while not os.path.exists(path) and path != os.sep:
        path = os.path.dirname(path)
    return path


def _mount(path, mounts_text):
    """The mount point holding `path`, from the text of /proc/self/mounts."""
    best = os.sep
    for line in mounts_text.splitlines():
        cells = line.split()
        if len(cells) > 1:
            point = cells[1].replace("\\040", " ")
            if (path == point or path.startswith(point.rstrip(os.sep) + os.sep)) and len(point) > len(best):
                best = point
    return best


def free_bytes(path, mounts_text=""):
    """(free bytes, mount point, error) of the filesystem that holds (or will hold) `path`.

    f_bavail: what a non-root writer may use (the root-reserved blocks are left out, a safety margin)."""
    where = _existing(path)
    try:
        st = os.statvfs(where)
    except OSError as exc:
        return None, None, str(exc)
    return st.f_bavail * st.f_frsize, _mount(os.path.realpath(where), mounts_text), None


def meminfo(text):
    """(MemTotal, MemAvailable) in bytes from /proc/meminfo."""
    values = {}
    for line in text.splitlines():
        key, _, rest = line.partition(":")
        parts = rest.split()
        if parts and parts[0].isdigit():
            values[key] = int(parts[0]) * 1024
    return values.get("MemTotal"), values.get("MemAvailable")


def _pick(config):
    picked = {k: config[k] for k in CONFIG_KEYS if k in config}
    for nested in ("text_config", "llm_config", "language_config"):
        if isinstance(config.get(nested), dict):
            picked[nested] = {k: v for k, v in config[nested].items() if k in CONFIG_KEYS}
    return picked


def model_facts(model_path):
    """{"weight_bytes", "weights_from", "config"} of a model folder (read-only), or {"error"}."""
    import json

    if not model_path.startswith("/"):
        return {"error": "not a folder on the host"}
    facts = {}
    try:
        with open(os.path.join(model_path, "config.json")) as f:
            facts["config"] = _pick(json.load(f))
    except (OSError, ValueError) as exc:
        facts["error"] = f"config.json: {exc}"
    index = os.path.join(model_path, "model.safetensors.index.json")
    try:
        with open(index) as f:
            total = json.load(f).get("metadata", {}).get("total_size")
        if isinstance(total, int) and total > 0:
            facts.update(weight_bytes=total, weights_from="model.safetensors.index.json metadata.total_size")
            return facts
    except (OSError, ValueError, AttributeError):
        pass
    try:
        sizes = [os.path.getsize(os.path.join(model_path, n)) for n in os.listdir(model_path)
                 if n.endswith(".safetensors")]
    except OSError as exc:
        facts.setdefault("error", str(exc))
        return facts
    if sizes:
        facts.update(weight_bytes=sum(sizes), weights_from=f"{len(sizes)} *.safetensors files")
    return facts


PYTHON_PROBE = "import platform, sys; print('%d.%d' % sys.version_info[:2], platform.machine(), '%s-%s' % platform.libc_ver())"


def python_facts(out):
    """{"python_version", "architecture", "glibc"} from PYTHON_PROBE's output (the same probe as ml_env's)."""
    cells = out.split()
    if len(cells) < 3:
        return {"python_error": out.strip() or "no output"}
    glibc = cells[2][len("glibc-"):] if cells[2].startswith("glibc-") else ""
    return {"python_version": cells[0], "architecture": cells[1], "glibc": glibc}


def host_facts(env_root, venv, model_path, read=None):
    """Disk, RAM and model facts for roles/sglang_compat (read-only)."""
    def _read(path):
        try:
            with open(path) as f:
                return f.read()
        except OSError:
            return ""
    read = read or _read
    mounts = read("/proc/self/mounts")
    facts = {"env_root": env_root, "venv": venv}
    facts["env_free_bytes"], facts["env_mount"], err = free_bytes(env_root, mounts)
    if err:
        facts["env_error"] = err
    facts["venv_ready"] = read_venv_marker(venv) != "missing"
    facts["mem_total_bytes"], facts["mem_available_bytes"] = meminfo(read("/proc/meminfo"))
    if model_path.startswith("/") and os.path.isdir(model_path):
        facts["model_free_bytes"], facts["model_mount"], _ = free_bytes(model_path, mounts)
    facts["model"] = model_facts(model_path)
    return facts
