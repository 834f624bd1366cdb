#!/usr/bin/env python3
"""sglang-fleet lab: Debian 12 hosts as rootful podman containers, reachable over real SSH.

    lab.py up     [--inventory FILE] [--prefix P]   network + one container per host, wait for SSH,
                                                    host keys into .lab/known_hosts/P
    lab.py status [--inventory FILE] [--prefix P]   table host/IP/state/ssh (rc 3 if not all up)
    lab.py down   [--inventory FILE] [--prefix P]   remove the containers and the network
    lab.py conf                                     render .lab/containers.conf, print its path

Hosts and their IPs come from an Ansible YAML inventory (`ansible_host` of each host under
all.hosts / all.children.*.hosts); all IPs must lie in one /24, which becomes the network.
Host keys are read through podman (not over the network), so SSH to the hosts verifies them.
Stdlib only, except PyYAML for the inventory (run it with .venv/bin/python).
"""

import argparse
import fcntl
import hashlib
import ipaddress
import json
import os
import re
import resource
import shutil
import socket
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

LAB_DIR = Path(__file__).resolve().parent
REPO_DIR = LAB_DIR.parent
STATE_DIR = REPO_DIR / ".lab"
SSH_KEY = STATE_DIR / "ssh" / "id_ed25519"
CONF_TEMPLATE = LAB_DIR / "containers.conf"
CONF_RENDERED = STATE_DIR / "containers.conf"
KNOWN_HOSTS_DIR = STATE_DIR / "known_hosts"
HOST_KEY = "/etc/ssh/ssh_host_ed25519_key.pub"  # made at boot by the ssh.service drop-in
AUTHORIZED_KEYS = "/etc/ssh/lab/authorized_keys"  # the checkout's lab key, bind-mounted read-only
OPERATOR = "fleet"  # the unprivileged user Ansible connects as (passwordless sudo)
IMAGE = os.environ.get("LAB_IMAGE", "localhost/sglang-fleet-lab:bookworm")
LABEL = "org.sglang-fleet.lab"
SSH_OPTS = [
    "-o", "BatchMode=yes",
    "-o", "StrictHostKeyChecking=yes",
    "-o", "LogLevel=ERROR",
    "-o", "ConnectTimeout=3",
]  # fmt: skip
NAME_RE = re.compile(r"^[a-zA-Z0-9][a-zA-Z0-9_.-]*$")
HOSTNAME_RE = re.compile(r"^[a-zA-Z0-9]([a-zA-Z0-9-]{0,61}[a-zA-Z0-9])?$")


class LabError(Exception):
    """A problem the user can act on; printed without a traceback."""


# --- configuration -------------------------------------------------------------------------


def render_conf():
    """Write .lab/containers.conf from lab/containers.conf (nofile = `ulimit -Hn`); return path."""
    hard = resource.getrlimit(resource.RLIMIT_NOFILE)[1]
    nofile = 1048576 if hard == resource.RLIM_INFINITY else hard
    text = CONF_TEMPLATE.read_text().replace("@NOFILE@", str(nofile))
    CONF_RENDERED.parent.mkdir(parents=True, exist_ok=True)
    if not CONF_RENDERED.exists() or CONF_RENDERED.read_text() != text:
        tmp = CONF_RENDERED.with_name(f"{CONF_RENDERED.name}.{os.getpid()}")
        tmp.write_text(text)
        tmp.replace(CONF_RENDERED)  # whole or not at all: several `up`s may run at once (pytest -n)
    return CONF_RENDERED


def podman(*args, check=True):
    """Run podman with the lab's containers.conf; raise LabError with its stderr on failure."""
    proc = subprocess.run(["podman", *args], check=False, capture_output=True, text=True)
    if check and proc.returncode != 0:
        err = "\n".join(line for line in proc.stderr.splitlines() if "failed to connect to syslog" not in line)
        if "IPAM error" in err and "is already allocated to container" in err:
            # seen after a session was killed mid-run: netavark's IPAM database (tmpfs) kept the address
            # of a container that no longer exists, and removing the network does not clear it
            err += ("\nlab: podman's IPAM database still holds that address for a container that is gone (a "
                    "host stopped abruptly). With no podman container running (podman ps), remove "
                    "/run/containers/networks/ipam.db (podman recreates it), or reboot; then run `up` again.")
        raise LabError(f"podman {' '.join(args)} failed (rc {proc.returncode}):\n{err.strip()}")
    return proc


def setup_podman():
    """Check podman is installed and point it at the lab's containers.conf."""
    if shutil.which("podman") is None:
        raise LabError("podman not found: run lab/install-deps.sh (as root)")
    os.environ["CONTAINERS_CONF"] = str(render_conf())


# --- inventory -----------------------------------------------------------------------------


def _collect_hosts(group, hosts):
    """Add host -> vars of a group and of its children (recursively) to hosts."""
    if not isinstance(group, dict):
        return
    for name, hvars in (group.get("hosts") or {}).items():
        hosts.setdefault(str(name), {}).update(hvars or {})
    for child in (group.get("children") or {}).values():
        _collect_hosts(child, hosts)


def read_inventory(path):
    """Return [(host, IPv4Address)] in inventory order; all in one /24 (LabError otherwise)."""
    try:
        import yaml  # PyYAML: in .venv (and Debian's python3-yaml); only needed here
    except ImportError as exc:
        raise LabError(
            f"PyYAML missing for {sys.executable}: run lab.py with .venv/bin/python "
            "(or /usr/bin/python3 after lab/install-deps.sh)"
        ) from exc

    path = Path(path)
    if not path.is_file():
        raise LabError(f"inventory {path} not found")
    data = yaml.safe_load(path.read_text()) or {}
    hosts = {}
    _collect_hosts(data.get("all"), hosts)
    if not hosts:
        raise LabError(f"inventory {path}: no hosts under all.hosts or all.children.*.hosts")
    result = []
    for name, hvars in hosts.items():
        if not HOSTNAME_RE.match(name):
            raise LabError(f"inventory {path}: host name {name!r} is not a valid hostname")
        raw = hvars.get("ansible_host")
        if raw is None:
            raise LabError(f"inventory {path}: host {name} has no ansible_host")
        try:
            ip = ipaddress.IPv4Address(str(raw))
        except ValueError as exc:
            raise LabError(
                f"inventory {path}: host {name}: ansible_host {raw!r} is not an IPv4 "
                "address (templates and DNS names are not supported)"
            ) from exc
        result.append((name, ip))
    nets = {ipaddress.IPv4Network(f"{ip}/24", strict=False) for _, ip in result}
    if len(nets) != 1:
        listing = ", ".join(f"{n}={ip}" for n, ip in result)
        raise LabError(f"inventory {path}: ansible_host IPs must share one /24, got {listing}")
    net = nets.pop()
    seen = {}
    for name, ip in result:
        last = int(ip) - int(net.network_address)
        if last in (0, 1, 255):
            raise LabError(
                f"inventory {path}: host {name}: {ip} is reserved in {net} (.0 network, .1 gateway, .255 broadcast)"
            )
        if ip in seen:
            raise LabError(f"inventory {path}: hosts {seen[ip]} and {name} share {ip}")
        seen[ip] = name
    return result


def host_images(path):
    """{host: image} for the hosts whose inventory entry names `lab_image`: a snapshot of a deployed
    host that the tests start instead of the lab image (tests/lab/lab_fleet.py, deployed_lab_fleet)."""
    import yaml

    hosts = {}
    _collect_hosts((yaml.safe_load(Path(path).read_text()) or {}).get("all"), hosts)
    return {name: str(hvars["lab_image"]) for name, hvars in hosts.items() if hvars.get("lab_image")}


def network_of(hosts, prefix):
    """(network name, subnet) for the hosts: e.g. ('sglang-lab-10-89-77', 10.89.77.0/24)."""
    subnet = ipaddress.IPv4Network(f"{hosts[0][1]}/24", strict=False)
    a, b, c, _ = str(subnet.network_address).split(".")
    return f"{prefix}-{a}-{b}-{c}", subnet


# --- podman state --------------------------------------------------------------------------


def _alive(pid):
    """Whether process `pid` exists and is not a zombie."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


def container_info(name):
    """Return {'state', 'ip', 'image', 'key_source', 'key_id'} of a container, or None if it does not exist.

    The IP of a stopped container is the one lab.py asked for (its label). "stale": podman still
    says running but the container's process is gone; it can only be removed and created again.
    key_source: the public key file mounted as its authorized key (whose checkout made it);
    key_id: the label naming that key's hash when it was created ("" for older containers).
    """
    proc = podman("container", "inspect", name, check=False)
    if proc.returncode != 0:
        return None
    data = json.loads(proc.stdout)[0]
    nets = data.get("NetworkSettings", {}).get("Networks") or {}
    ips = [n.get("IPAddress") for n in nets.values() if n.get("IPAddress")]
    labels = data.get("Config", {}).get("Labels") or {}
    state, pid = data["State"]["Status"], data["State"].get("Pid") or 0
    if state in ("running", "stopping", "paused") and pid and not _alive(pid):
        state = "stale"  # podman's record outlived the process (this machine was restarted)
    sources = [m.get("Source", "") for m in data.get("Mounts") or [] if m.get("Destination") == AUTHORIZED_KEYS]
    return {
        "state": state,
        "ip": ips[0] if ips else labels.get(f"{LABEL}.ip", ""),
        "image": data["Image"],
        "key_source": sources[0] if sources else "",
        "key_id": labels.get(f"{LABEL}.key", ""),
    }


def key_id():
    """A short hash of this checkout's lab public key (label of the containers made with it)."""
    return hashlib.sha256(SSH_KEY.with_suffix(".pub").read_bytes()).hexdigest()[:16]


def other_checkouts(infos):
    """{checkout folder: [container, ...]} of containers that authorize another, existing checkout's key.

    The key is bind-mounted from `<checkout>/.lab/ssh/id_ed25519.pub`: SSH with this checkout's key
    would be refused by those hosts. A source that no longer exists (a deleted checkout) is not
    listed: nobody can use those containers, `up` replaces them.
    """
    mine = str(SSH_KEY.with_suffix(".pub"))
    found = {}
    for name, info in sorted(infos.items()):
        source = (info or {}).get("key_source", "")
        if source and source != mine and Path(source).exists():
            found.setdefault(str(Path(source).parents[2]), []).append(name)
    return found


def refuse_other_checkouts(found, prefix, inventory):
    """LabError for other_checkouts()' result: whose fleet it is and the two ways out."""
    if not found:
        return
    lines = [f"{', '.join(names)} {'is' if len(names) == 1 else 'are'} part of the lab fleet of another checkout, "
             f"{checkout}: only its lab key is accepted there, so SSH from this checkout would be refused"
             for checkout, names in found.items()]
    raise LabError(
        "\n".join(lines) + f"\nEither remove that fleet in {' and '.join(found)} (`make lab-down` there for the "
        f"default fleet; this one: `.venv/bin/python lab/lab.py down --inventory {inventory} --prefix {prefix}`), "
        "or run this checkout's fleet beside it, with a prefix and an inventory on a /24 of their own: "
        "`lab.py up --prefix <another prefix> --inventory <your copy>` (lab/README.md, network table)."
    )


def remove(*names):
    """podman rm --force; a stale container's first rm fails ("container state improper") but
    makes podman see that it exited, so a second one is tried."""
    if podman("rm", "--force", "--time", "0", *names, check=False).returncode != 0:
        podman("rm", "--force", "--time", "0", "--ignore", *names)


def lab_containers(netname):
    """Names of the containers lab.py created on this network (including stray ones)."""
    out = podman("ps", "-a", "--filter", f"label={LABEL}.network={netname}", "--format", "{{.Names}}").stdout
    return out.split()


def ensure_network(netname, subnet, prefix, egress):
    """Create the network with the subnet, or check an existing one has it.

    Internal (no route out of the subnet) unless egress: lab hosts reach each other and the
    controller, nothing else.
    """
    proc = podman("network", "inspect", netname, check=False)
    if proc.returncode == 0:
        data = json.loads(proc.stdout)[0]
        subnets = [s.get("subnet") for s in data.get("subnets") or []]
        if str(subnet) not in subnets:
            raise LabError(
                f"network {netname} exists with subnets {subnets}, not {subnet}: "
                "run `lab.py down` with the inventory that created it"
            )
        if bool(data.get("internal")) == egress:
            have = "internal" if data.get("internal") else "with egress"
            raise LabError(f"network {netname} exists {have}: `lab.py down` first to change it")
        return False
    extra = [] if egress else ["--internal"]
    proc = podman(
        "network", "create", "--subnet", str(subnet), "--label", f"{LABEL}={prefix}", *extra, netname, check=False
    )
    if proc.returncode != 0:
        hint = ""
        if "subnet" in proc.stderr and "already" in proc.stderr:
            hint = "\nanother podman network uses that subnet: see `podman network ls`"
        raise LabError(f"podman network create {netname} --subnet {subnet} failed:\n{proc.stderr.strip()}{hint}")
    return True


def ensure_image(build):
    """Build the image (a quick no-op when cached) or check that it exists."""
    if build:
        sys.stdout.flush()
        proc = subprocess.run(["bash", str(LAB_DIR / "build-image.sh")], check=False)
        if proc.returncode != 0:
            raise LabError(f"lab/build-image.sh failed (rc {proc.returncode})")
    elif podman("image", "exists", IMAGE, check=False).returncode != 0:
        raise LabError(f"image {IMAGE} not found: run lab/build-image.sh")


def ensure_key():
    """Generate the lab SSH key once (.lab/ssh/id_ed25519); one `up` at a time makes it."""
    if SSH_KEY.exists() and SSH_KEY.with_suffix(".pub").exists():
        return
    if shutil.which("ssh-keygen") is None:
        raise LabError("ssh-keygen not found: run lab/install-deps.sh (as root)")
    SSH_KEY.parent.mkdir(parents=True, exist_ok=True)
    SSH_KEY.parent.chmod(0o700)
    with open(SSH_KEY.parent / ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if SSH_KEY.exists() and SSH_KEY.with_suffix(".pub").exists():
            return  # another `up` made it while this one waited
        for p in (SSH_KEY, SSH_KEY.with_suffix(".pub")):
            p.unlink(missing_ok=True)
        subprocess.run(
            ["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", "sglang-fleet-lab", "-f", str(SSH_KEY)],
            check=True,
        )


def run_container(name, host, ip, netname, prefix, image=IMAGE):
    """Start one lab host from `image`: PID 1 is the systemctl replacement, sshd comes up as a unit."""
    podman(
        "run", "--detach", "--name", name, "--hostname", host,
        "--network", netname, "--ip", str(ip), "--network-alias", host,
        # not podman's systemd mode: that stops with SIGRTMIN+3, which the replacement ignores
        "--systemd=false", "--tmpfs", "/run:rw,nosuid,nodev,mode=755",
        "--shm-size", "1g", "--stop-timeout", "10",
        "--volume", f"{SSH_KEY.with_suffix('.pub')}:/etc/ssh/lab/authorized_keys:ro",
        "--label", f"{LABEL}={prefix}", "--label", f"{LABEL}.network={netname}",
        "--label", f"{LABEL}.host={host}", "--label", f"{LABEL}.ip={ip}", "--label", f"{LABEL}.key={key_id()}",
        image, "/usr/sbin/init",
    )  # fmt: skip


# --- SSH -----------------------------------------------------------------------------------


def known_hosts_of(prefix):
    """The fleet's known_hosts file: .lab/known_hosts/<prefix>."""
    return KNOWN_HOSTS_DIR / prefix


def ssh_ok(ip, known_hosts):
    """True if `ssh fleet@ip true` with the lab key succeeds, the host key checked against known_hosts."""
    cmd = ["ssh", "-i", str(SSH_KEY), *SSH_OPTS, "-o", f"UserKnownHostsFile={known_hosts}", f"{OPERATOR}@{ip}", "true"]
    proc = subprocess.run(cmd, check=False, capture_output=True, stdin=subprocess.DEVNULL)
    return proc.returncode == 0


def wait_port(ip, deadline):
    """Poll port 22 until it accepts a connection (sshd runs, so its host key exists) or the deadline passes."""
    while time.monotonic() < deadline:
        try:
            with socket.create_connection((str(ip), 22), timeout=1):
                return True
        except OSError:
            time.sleep(0.1)
    return False


def wait_ssh(ip, known_hosts, deadline):
    """Real ssh (host key verified) until it answers or the deadline passes."""
    while time.monotonic() < deadline:
        if ssh_ok(ip, known_hosts):
            return True
        time.sleep(0.2)
    return False


def host_key(name):
    """A running container's ed25519 host key ("ssh-ed25519 AAAA..."), read through podman."""
    proc = podman("exec", name, "cat", HOST_KEY, check=False)
    fields = proc.stdout.split()
    if proc.returncode != 0 or len(fields) < 2 or fields[0] != "ssh-ed25519":
        raise LabError(f"{name}: no host key at {HOST_KEY} (rc {proc.returncode}): {proc.stderr.strip()}")
    return " ".join(fields[:2])


def write_known_hosts(path, keys):
    """Replace the fleet's known_hosts with `ip keytype key` lines (atomically)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text("".join(f"{ip} {key}\n" for ip, key in keys))
    tmp.replace(path)


# --- commands ------------------------------------------------------------------------------


def print_table(rows):
    """Print rows (lists of str) as an aligned table with a header."""
    header = ["HOST", "IP", "CONTAINER", "STATE", "SSH"]
    widths = [max(len(str(r[i])) for r in [header, *rows]) for i in range(len(header))]
    for row in [header, *rows]:
        print("  ".join(str(c).ljust(w) for c, w in zip(row, widths, strict=True)).rstrip())


def status_rows(hosts, prefix):
    """[[host, ip, container, state, ssh]] and whether every host is running with SSH."""
    infos = {host: container_info(f"{prefix}-{host}") for host, _ in hosts}
    with ThreadPoolExecutor(max_workers=len(hosts)) as pool:
        ssh = dict(
            zip(
                [h for h, _ in hosts],
                pool.map(
                    lambda hi: (
                        bool(infos[hi[0]])
                        and infos[hi[0]]["state"] == "running"
                        and ssh_ok(hi[1], known_hosts_of(prefix))
                    ),
                    hosts,
                ),
                strict=True,
            )
        )
    rows = []
    for host, ip in hosts:
        info = infos[host]
        state = info["state"] if info else "missing"
        if info and info["ip"] and info["ip"] != str(ip):
            state += f" (has {info['ip']})"
        rows.append([host, str(ip), f"{prefix}-{host}", state, "ok" if ssh[host] else "-"])
    return rows, all(ssh.values())


def cmd_up(args):
    """Create what is missing, start what is stopped, wait for SSH on every host."""
    t0 = time.monotonic()
    hosts = read_inventory(args.inventory)
    netname, subnet = network_of(hosts, args.prefix)
    setup_podman()
    names = {f"{args.prefix}-{h}" for h, _ in hosts} | set(lab_containers(netname))
    refuse_other_checkouts(other_checkouts({n: container_info(n) for n in names}), args.prefix, args.inventory)
    ensure_image(not args.no_build)
    ensure_key()
    declared = host_images(args.inventory)
    images = {host: declared.get(host, IMAGE) for host, _ in hosts}
    image_ids = {
        image: podman("image", "inspect", "--format", "{{.Id}}", image).stdout.strip() for image in set(images.values())
    }
    if ensure_network(netname, subnet, args.prefix, args.egress):
        kind = "with egress (NAT)" if args.egress else "internal: no route beyond it"
        print(f"lab: network {netname} {subnet} created, {kind}")
    wanted = {f"{args.prefix}-{h}" for h, _ in hosts}
    for stray in sorted(set(lab_containers(netname)) - wanted):
        remove(stray)
        print(f"lab: removed {stray} (not in {args.inventory})")
    t_start = time.monotonic()
    for host, ip in hosts:
        name = f"{args.prefix}-{host}"
        info = container_info(name)
        if info and info["ip"] != str(ip):
            remove(name)
            print(f"lab: removed {name} (IP {info['ip']}, inventory says {ip})")
            info = None
        elif info and info["state"] == "stale":
            remove(name)
            print(f"lab: removed {name} (podman said running, but its process is gone); creating it again")
            info = None
        elif info and info["image"] != image_ids[images[host]]:
            remove(name)  # an older image may lack what the inventory relies on (the `fleet` user)
            print(f"lab: removed {name} (it runs another image than {images[host]}); creating it again")
            info = None
        elif info and info["key_source"] and info["key_source"] != str(SSH_KEY.with_suffix(".pub")):
            remove(name)  # other_checkouts() refused the existing ones: that checkout is gone
            print(f"lab: removed {name} (it accepts the key of {info['key_source']}, which no longer exists); "
                  "creating it again")
            info = None
        elif info and info["key_id"] and info["key_id"] != key_id():
            remove(name)  # .lab/ssh was made anew: the mount still holds the old key
            print(f"lab: removed {name} (it accepts an older lab key of this checkout); creating it again")
            info = None
        if info is None:
            run_container(name, host, ip, netname, args.prefix, images[host])
            print(f"lab: {name} created ({ip})")
        elif info["state"] != "running":
            podman("start", name)
            print(f"lab: {name} started (was {info['state']})")
    deadline = time.monotonic() + args.timeout
    known_hosts = known_hosts_of(args.prefix)
    with ThreadPoolExecutor(max_workers=len(hosts)) as pool:
        listening = list(pool.map(lambda hi: wait_port(hi[1], deadline), hosts))
        # every up: a recreated container has a new host key, a running one keeps its own
        write_known_hosts(
            known_hosts,
            [(ip, host_key(f"{args.prefix}-{h}")) for (h, ip), up in zip(hosts, listening, strict=True) if up],
        )
        ok = list(pool.map(lambda hi: wait_ssh(hi[1], known_hosts, deadline), hosts))
    t_ssh = time.monotonic()
    rows, _ = status_rows(hosts, args.prefix)
    print_table(rows)
    bad = [h for (h, _), good in zip(hosts, ok, strict=True) if not good]
    if bad:
        raise LabError(
            f"no SSH answer within {args.timeout}s from {', '.join(bad)}: see "
            f"`CONTAINERS_CONF={CONF_RENDERED} podman logs {args.prefix}-{bad[0]}`"
        )
    print(
        f"lab: {len(hosts)} hosts answer SSH ({t_ssh - t_start:.1f}s after start, "
        f"{t_ssh - t0:.1f}s in all); key {SSH_KEY.relative_to(REPO_DIR)}, "
        f"host keys {known_hosts.relative_to(REPO_DIR)}"
    )
    return 0


def cmd_status(args):
    """Print the table; rc 0 if every host runs and answers SSH, else 3."""
    hosts = read_inventory(args.inventory)
    netname, subnet = network_of(hosts, args.prefix)
    setup_podman()
    exists = podman("network", "exists", netname, check=False).returncode == 0
    print(f"network {netname} {subnet}: {'present' if exists else 'missing'}")
    rows, all_up = status_rows(hosts, args.prefix)
    print_table(rows)
    return 0 if all_up and exists else 3


def cmd_down(args):
    """Remove the inventory's containers (and strays on its network), then the network."""
    hosts = read_inventory(args.inventory)
    netname, _ = network_of(hosts, args.prefix)
    setup_podman()
    names = {f"{args.prefix}-{h}" for h, _ in hosts} | set(lab_containers(netname))
    present = sorted(n for n in names if container_info(n) is not None)
    if present:
        remove(*present)
        print(f"lab: removed {', '.join(present)}")
    if podman("network", "exists", netname, check=False).returncode == 0:
        podman("network", "rm", netname)
        print(f"lab: removed network {netname}")
    known_hosts_of(args.prefix).unlink(missing_ok=True)
    return 0


def main(argv=None):
    """Parse arguments and run a command."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    for name, helptext in (
        ("up", "start the lab hosts and wait for SSH"),
        ("down", "remove the lab hosts and their network"),
        ("status", "show the lab hosts"),
    ):
        p = sub.add_parser(name, help=helptext)
        p.add_argument(
            "--inventory",
            "-i",
            default="inventories/lab/hosts.yml",
            help="Ansible YAML inventory (default: %(default)s)",
        )
        p.add_argument("--prefix", default="sglang-lab", help="container/network name prefix (default: %(default)s)")
        if name == "up":
            p.add_argument(
                "--no-build", action="store_true", help="do not run lab/build-image.sh; fail if the image is missing"
            )
            p.add_argument(
                "--egress",
                action="store_true",
                help="NAT the network to the outside (default: internal, hosts "
                "reach only each other and the controller)",
            )
            p.add_argument("--timeout", type=float, default=60.0, help="seconds to wait for SSH (default: %(default)s)")
    sub.add_parser("conf", help="render .lab/containers.conf and print its path")
    args = parser.parse_args(argv)
    if args.command != "conf" and not NAME_RE.match(args.prefix):
        parser.error(f"--prefix {args.prefix!r}: use letters, digits, '_', '.', '-'")
    try:
        if args.command == "conf":
            print(render_conf())
            return 0
        return {"up": cmd_up, "down": cmd_down, "status": cmd_status}[args.command](args)
    except LabError as exc:
        print(f"lab.py: error: {exc}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
