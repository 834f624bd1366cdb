#!/usr/bin/env bash
# End-to-end check of the lab, on its own scratch inventory and network (10.89.99.0/24,
# prefix sglang-lab-smoke), so it never touches the real lab (10.89.77.0/24):
# up -> ansible ping -> service_facts -> lab/smoke/probe.yml -> restart the hosts ->
# lab/smoke/probe-boot.yml -> down. Prints timings. Usage: lab/smoke.sh [--keep]
set -euo pipefail

LAB_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
REPO_DIR=$(dirname "$LAB_DIR")
VENV_BIN=${VENV_BIN:-$REPO_DIR/.venv/bin}
PREFIX=sglang-lab-smoke
INV=$REPO_DIR/.lab/smoke/hosts.yml
keep=0
[[ ${1:-} == --keep ]] && keep=1

mkdir -p "$(dirname "$INV")"
cat >"$INV" <<YAML
# written by lab/smoke.sh
all:
  children:
    sglang_lab_smoke:
      hosts:
        ct129: {ansible_host: 10.89.99.11}
        h200x2: {ansible_host: 10.89.99.12}
        h200x1: {ansible_host: 10.89.99.13}
      vars:
        ansible_user: root
        ansible_ssh_private_key_file: $REPO_DIR/.lab/ssh/id_ed25519
        ansible_ssh_common_args: -o UserKnownHostsFile=$REPO_DIR/.lab/known_hosts/$PREFIX
YAML

lab() { "$VENV_BIN/python" "$LAB_DIR/lab.py" "$1" --inventory "$INV" --prefix "$PREFIX" "${@:2}"; }
if ((keep == 0)); then
  trap 'lab down >/dev/null' EXIT
fi
cd "$REPO_DIR"  # ansible.cfg (pipelining, ControlPersist)
export ANSIBLE_CONFIG=$REPO_DIR/ansible.cfg ANSIBLE_DEPRECATION_WARNINGS=false

SECONDS=0
lab up
echo "smoke: up ${SECONDS}s"
"$VENV_BIN/ansible" all -i "$INV" -m ansible.builtin.ping
"$VENV_BIN/ansible" all -i "$INV" -m ansible.builtin.service_facts >/dev/null
echo "smoke: ping + service_facts ok (${SECONDS}s)"
"$VENV_BIN/ansible-playbook" -i "$INV" "$LAB_DIR/smoke/probe.yml"
echo "smoke: probe.yml ok (${SECONDS}s)"
CONTAINERS_CONF=$("$VENV_BIN/python" "$LAB_DIR/lab.py" conf) \
  podman restart --time 0 "$PREFIX-ct129" "$PREFIX-h200x2" "$PREFIX-h200x1" >/dev/null
lab up >/dev/null  # waits for SSH again
"$VENV_BIN/ansible-playbook" -i "$INV" "$LAB_DIR/smoke/probe-boot.yml"
echo "smoke: probe-boot.yml ok (${SECONDS}s); all good"
