#!/usr/bin/env bash
# Build the sglang-fleet lab image (default localhost/sglang-fleet-lab:bookworm) without a
# registry: mmdebstrap bookworm minbase from the Debian mirror -> tar -> `podman import`.
#
# The image is a Debian 12 "host": sshd (key only), an unprivileged operator `fleet` with
# passwordless sudo (Ansible connects as it and becomes root where needed), python3 + venv, and
# docker-systemctl-replacement as /usr/bin/systemctl and as PID 1 (/usr/sbin/init).
# Cached: the image carries a label with a hash of every build input (this script, lab/image/,
# mirror, packages, wheel); the build is skipped when an image with the same hash exists.
#
# Usage: lab/build-image.sh [--force]      env: LAB_IMAGE, LAB_DEBIAN_MIRROR, LAB_SECURITY_MIRROR
set -euo pipefail

LAB_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
REPO_DIR=$(dirname "$LAB_DIR")
IMAGE=${LAB_IMAGE:-localhost/sglang-fleet-lab:bookworm}
SUITE=bookworm
MIRROR=${LAB_DEBIAN_MIRROR:-http://deb.debian.org/debian}
SECURITY_MIRROR=${LAB_SECURITY_MIRROR:-http://deb.debian.org/debian-security}
# python3-venv: ml_env makes venvs with `python3 -m venv` (brings ensurepip's pip wheel).
# No python3-pip: Debian 12's system pip refuses installs (PEP 668); roles use venvs.
# python3-apt + sudo: ansible.builtin.apt and become_user work as on a real host.
# rsync: the receiving end of sglang_model's staging (as a GPU host has it).
PACKAGES=openssh-server,python3,python3-venv,python3-apt,sudo,ca-certificates,procps,iproute2,curl,less,rsync
DSR_VERSION=1.7.1097
DSR_WHEEL=docker_systemctl_replacement-${DSR_VERSION}-py3-none-any.whl
DSR_SHA256=a73781b1fda952817174f33b2a4624403ae79e879ab0449b92e4eeda70ca8edb
LABEL=org.sglang-fleet.lab.inputs
CACHE_DIR=$REPO_DIR/.cache/lab
STATE_DIR=$REPO_DIR/.lab
PYTHON=${PYTHON:-python3}

force=0
case ${1:-} in
  --force) force=1 ;;
  "") ;;
  *) echo "usage: $0 [--force]" >&2; exit 2 ;;
esac

for tool in podman mmdebstrap; do
  if ! command -v "$tool" >/dev/null; then
    echo "build-image.sh: $tool not found: run lab/install-deps.sh (as root)" >&2
    exit 1
  fi
done
CONTAINERS_CONF=$("$PYTHON" "$LAB_DIR/lab.py" conf)
export CONTAINERS_CONF

inputs_hash() {
  {
    printf '%s\n' "$SUITE" "$MIRROR" "$SECURITY_MIRROR" "$PACKAGES" "$DSR_SHA256"
    cat "$LAB_DIR/build-image.sh"
    cd "$LAB_DIR/image" && find . -type f -print0 | LC_ALL=C sort -z \
      | xargs -0 stat -c '%n %a' && find . -type f -print0 | LC_ALL=C sort -z | xargs -0 sha256sum
  } | sha256sum | cut -c1-16
}
hash=$(inputs_hash)

old_id=""
if podman image exists "$IMAGE"; then
  old_id=$(podman image inspect --format '{{.Id}}' "$IMAGE")
  have=$(podman image inspect --format "{{ index .Labels \"$LABEL\" }}" "$IMAGE")
  if [[ $have == "$hash" && $force -eq 0 ]]; then
    echo "build-image.sh: $IMAGE is up to date (inputs $hash)"
    exit 0
  fi
  echo "build-image.sh: rebuilding $IMAGE (inputs ${have:-none} -> $hash)"
else
  echo "build-image.sh: building $IMAGE (inputs $hash)"
fi
SECONDS=0

# docker-systemctl-replacement: the wheel from PyPI (cached, hash-checked); the script inside it.
mkdir -p "$CACHE_DIR" "$STATE_DIR"
whl=$CACHE_DIR/$DSR_WHEEL
if ! echo "$DSR_SHA256  $whl" | sha256sum -c --status 2>/dev/null; then
  pip_python=$PYTHON
  "$pip_python" -m pip --version >/dev/null 2>&1 || pip_python=/usr/bin/python3  # e.g. a uv venv
  "$pip_python" -m pip download --quiet --no-deps --only-binary=:all: --dest "$CACHE_DIR" \
    "docker-systemctl-replacement==$DSR_VERSION"
  echo "$DSR_SHA256  $whl" | sha256sum -c --quiet
fi
work=$(mktemp -d "$STATE_DIR/build.XXXXXX")
trap 'rm -rf "$work"' EXIT
# Shebang #!/usr/bin/python3 (not env): PID 1's comm must be "init" for Ansible's service_mgr.
"$PYTHON" - "$whl" "$work/systemctl" <<'PY'
import sys
import zipfile

src = zipfile.ZipFile(sys.argv[1]).read("systemctl2/systemctl3.py").decode()
# A non-root caller (the `fleet` operator in read-only plays) reads the system's unit states
# from /run as on real systemd, instead of an empty /tmp/run of its own (the replacement picks
# the first *writable* folder); its start/stop/restart still fail (Permission denied).
old = "if os.path.isdir(path) and os.access(path, os.W_OK):\n                return path\n        os.makedirs(path) # \"/tmp/run\""
assert src.count(old) == 1, "systemctl3.py changed: review the /run patch"
src = src.replace(old, old.replace("os.W_OK", "os.R_OK"))
with open(sys.argv[2] + ".py", "w") as fh:
    fh.write(src)
# /usr/bin/systemctl runs the module from its bytecode, compiled at build: as a script, Python
# would compile its 7,300 lines at every call (lab/README.md: 0.12 -> 0.045 CPU-s a call).
with open(sys.argv[2], "w") as fh:
    fh.write("#!/usr/bin/python3\nimport runpy\nimport sys\n\nsys.path.insert(0, '/usr/lib/sglang-lab')\n"
             "runpy.run_module('systemctl3', run_name='__main__', alter_sys=True)\n")
PY

# shellcheck disable=SC2016  # $1 is expanded by mmdebstrap's hook shell, not here
mmdebstrap --mode=root --variant=minbase --format=tar --quiet \
  --include="$PACKAGES" \
  --aptopt='APT::Install-Recommends "false"' \
  --aptopt='Acquire::Retries "3"' \
  --dpkgopt='path-exclude=/usr/share/man/*' \
  --dpkgopt='path-exclude=/usr/share/doc/*' \
  --dpkgopt='path-include=/usr/share/doc/*/copyright' \
  --dpkgopt='path-exclude=/usr/share/locale/*' \
  --customize-hook="sync-in $LAB_DIR/image/rootfs /" \
  --customize-hook="upload $work/systemctl /usr/bin/systemctl" \
  --customize-hook="mkdir \"\$1/usr/lib/sglang-lab\"" \
  --customize-hook="upload $work/systemctl.py /usr/lib/sglang-lab/systemctl3.py" \
  --customize-hook='chroot "$1" /bin/sh -eu -c "
    chown -R root:root /etc/ssh/sshd_config.d /etc/systemd/system/ssh.service.d /etc/sudoers.d
    chmod 0440 /etc/sudoers.d/sglang-lab
    useradd --create-home --shell /bin/bash --comment \"sglang-fleet lab operator\" fleet
    visudo -c -q
    chmod 0755 /usr/bin/systemctl /usr/bin/journalctl
    chmod 0644 /usr/lib/sglang-lab/systemctl3.py
    python3 -m py_compile /usr/lib/sglang-lab/systemctl3.py
    ln -sf /usr/bin/systemctl /usr/sbin/init
    rm -f /etc/ssh/ssh_host_*
    install -d -m 0700 /root/.ssh
    install -d -m 0755 /etc/ssh/lab /run/systemd/system /var/log/journal
    systemctl enable ssh.service
    systemctl disable e2scrub_reap.service
    rm -f /etc/systemd/system/timers.target.wants/*.timer
    echo LANG=C.UTF-8 > /etc/default/locale
    rm -f /etc/apt/apt.conf.d/99mmdebstrap /etc/dpkg/dpkg.cfg.d/99mmdebstrap
  "' \
  "$SUITE" "$work/rootfs.tar" \
  "deb $MIRROR $SUITE main" \
  "deb $MIRROR $SUITE-updates main" \
  "deb $SECURITY_MIRROR $SUITE-security main"
t_strap=$SECONDS

podman import --quiet \
  --change 'CMD ["/usr/sbin/init"]' \
  --change 'STOPSIGNAL SIGTERM' \
  --change "LABEL $LABEL=$hash" \
  --message "sglang-fleet lab image, inputs $hash" \
  "$work/rootfs.tar" "$IMAGE" >/dev/null
new_id=$(podman image inspect --format '{{.Id}}' "$IMAGE")
if [[ -n $old_id && $old_id != "$new_id" ]]; then
  podman rmi "$old_id" >/dev/null 2>&1 || true  # still used by a container: leave it
fi
size=$(podman image inspect --format '{{.Size}}' "$IMAGE")
echo "build-image.sh: built $IMAGE (inputs $hash, $((size / 1000000)) MB)" \
  "in ${SECONDS}s (mmdebstrap ${t_strap}s, import $((SECONDS - t_strap))s)"
