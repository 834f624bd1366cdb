"""The systemd hardening every unit of the collection starts from: the one base of the three roles'
hardening variables (sglang_service_hardening, sglang_router_hardening, sglang_schedule_hardening).

Each role's default is this base with the unit's own settings over it (the filter
sglang.fleet.sglang_unit_hardening, plugins/filter/sglang_args.py): what it may touch of the
devices, the home folders, the sockets and the system calls, and what of /proc it sees. A value is
one [Service] line (``name=value``), a list one line per item; the templates render the settings
sorted by name, so their order here does not matter. Stdlib only (controller side).
"""

import copy

# What no unit of the project needs (systemd.exec(5)); `systemd-analyze security` scores of each unit
# are in its role's README.
BASE = {
    # Runs as its own unprivileged user with no capabilities at all, and can never gain any.
    "CapabilityBoundingSet": "",
    "AmbientCapabilities": "",
    "NoNewPrivileges": "yes",
    "RestrictSUIDSGID": "yes",
    # Files: the OS read-only (each unit lists what it may write: ReadWritePaths), a private /tmp and
    # mount namespace, files made readable by their owner only.
    "ProtectSystem": "strict",
    "PrivateTmp": "yes",
    "PrivateMounts": "yes",
    "UMask": "0077",
    # System calls of the host's own architecture only; a call the unit's SystemCallFilter denies fails
    # with EPERM instead of killing the process.
    "SystemCallArchitectures": "native",
    "SystemCallErrorNumber": "EPERM",
    # The kernel and the rest of the host: nothing a service of the project touches.
    "ProtectKernelTunables": "yes",
    "ProtectKernelModules": "yes",
    "ProtectKernelLogs": "yes",
    "ProtectControlGroups": "yes",
    "ProtectClock": "yes",
    "ProtectHostname": "yes",
    "ProtectProc": "invisible",
    "RestrictNamespaces": "yes",
    "RestrictRealtime": "yes",
    "LockPersonality": "yes",
    "RemoveIPC": "yes",
}


def hardening(own=None):
    """BASE with the unit's `own` settings (a mapping: name -> value or list of values) over it, a new
    mapping each call (its lists are copies)."""
    if own is not None and not isinstance(own, dict):
        raise TypeError(f"a unit's own hardening is a mapping of [Service] settings, got {type(own).__name__}")
    return copy.deepcopy({**BASE, **(own or {})})
