#!/usr/bin/env bash
# Install what the sglang-fleet lab needs on a Debian 12 (bookworm) machine, as root.
# Idempotent: a fast no-op (dpkg-query only, no apt-get update) when everything is present.
#
#   podman runc conmon  - rootful containers; runc because crun fails on cgroup v1 hybrid hosts
#   netavark aardvark-dns iptables - container network + name resolution (left out by
#                         --no-install-recommends unless named; netavark 1.4 drives iptables)
#   mmdebstrap          - builds the bookworm base image from the Debian mirror (no registry)
#   openssh-client      - ssh/ssh-keygen: the lab key and the "SSH answers" check
#   python3 python3-yaml python3-pip - lab.py (PyYAML for the inventory), pip download of
#                         docker-systemctl-replacement in build-image.sh
#   python3-venv        - the controller's venv (.venv) on Debian's own python3, an optimised build
#                         (the Makefile's PYTHON; bench/README.md, "The controller's interpreter")
#   chromium fonts-dejavu-core - not the lab: headless Chromium renders the HTML fleet report in
#                         tests/unit/test_fleet_report_html.py (make test installs this before unit)
#   prometheus-node-exporter - not installed (its package starts a service on :9100): its
#                         binary is unpacked into .cache/node-exporter for the test that has a
#                         real node_exporter serve the fleet's metrics (test_fleet_metrics.py)
# rsync: sglang_model stages model revisions to the hosts with it (resumable, bandwidth-limited).
# uidmap is not installed: the lab is rootful and mmdebstrap runs in root mode.
set -euo pipefail

PACKAGES=(
  podman runc conmon netavark aardvark-dns iptables
  mmdebstrap openssh-client ca-certificates
  rsync
  python3 python3-yaml python3-pip python3-venv
  chromium fonts-dejavu-core
)

if [[ ${EUID} -ne 0 ]]; then
  echo "install-deps.sh: run as root (apt-get install)" >&2
  exit 1
fi
if [[ -r /etc/os-release ]]; then
  # shellcheck disable=SC1091
  . /etc/os-release
  if [[ ${ID:-} != debian || ${VERSION_ID:-} != 12 ]]; then
    echo "install-deps.sh: warning: written for Debian 12, this is ${PRETTY_NAME:-unknown}" >&2
  fi
fi

missing=()
for pkg in "${PACKAGES[@]}"; do
  status=$(dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null || true)
  if [[ $status != "install ok installed" ]]; then
    missing+=("$pkg")
  fi
done

NODE_EXPORTER=$(cd "$(dirname "$0")/.." && pwd)/.cache/node-exporter
export DEBIAN_FRONTEND=noninteractive
if [[ ${#missing[@]} -eq 0 ]]; then
  echo "install-deps.sh: all lab packages present (${#PACKAGES[@]})"
else
  echo "install-deps.sh: installing ${missing[*]}"
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi
if [[ ! -x $NODE_EXPORTER/usr/bin/prometheus-node-exporter ]]; then
  rm -rf "$NODE_EXPORTER" && mkdir -p "$NODE_EXPORTER"
  (cd "$NODE_EXPORTER" && { apt-get download -qq prometheus-node-exporter 2>/dev/null \
      || { apt-get update -qq && apt-get download -qq prometheus-node-exporter; }; } \
      && dpkg -x prometheus-node-exporter_*.deb . && rm prometheus-node-exporter_*.deb)
  echo "install-deps.sh: node_exporter unpacked into $NODE_EXPORTER"
fi
echo "install-deps.sh: done"
