"""Drift of one router host: the inventory's router against what the host really runs.

Three views of reality (sglang_router role, router hosts):

- the service: ``sglang-router.service`` installed, enabled, active (``systemctl show``, as the
  server's drift reads it: plugins/module_utils/drift/host_drift.py ``read_service``);
- the running main process: its argv (``<venv>/bin/python <launcher> sglang_router.launch_router <argv>``)
  is ``/proc/<MainPID>/cmdline``, or, as the real router overwrites that with its title (0.3.2
  launch_router.py:32 ``setproctitle("sglang::router")``), the unit's ExecStart= when the process
  started after the unit was written (else: pending restart); its venv against the release's, its
  argv parsed with the release's own argparse (plugins/module_utils/router/parser.py) and compared
  field by field with the argv the unit is rendered from (sglang_router_args + the inventory's
  workers), and the unit on disk against the running process (pending restart);
- the router's live workers: ``GET /workers`` (sglang-router 0.3.2: ``{"workers": [{"id", "url",
  "is_healthy", ...}]}``; the route is in the wheel's sglang_router_rs.abi3.so, src/server.rs)
  against the URLs of the hosts of sglang_router_workers_group: a worker the inventory does not
  know, an inventory server the router does not route to, a worker the router holds unhealthy.

    observed = observe(run, service, unit_file, api_url)      # on the router host, reads only
    report = drift_report(desired, observed, running, wanted)  # on the controller, pure

Items and reports have the server drift's shape (``{what, desired, actual, fix}``, ``in_sync``,
``differences``, ``lines``), so ``sglang_drift``'s fleet summary and scripts/fleet_report.py read
them unchanged. Secret fields (api_key, oracle_password, control_plane_api_keys) are never
compared and appear as ``<redacted>``. Stdlib only.
"""

import os
import urllib.error
import urllib.request

from ansible_collections.sglang.fleet.plugins.module_utils.drift.host_drift import (
    item_line,
    split_launch,
    summary_line,
)
from ansible_collections.sglang.fleet.plugins.module_utils.host.args import REDACTED, ROUTER_SECRET_FIELDS
from ansible_collections.sglang.fleet.plugins.module_utils.transport.observe import (
    get_json,
    process_start,
    read_cmdline,
    read_service,
    read_unit_argv,
)

ENTRYPOINT = "sglang_router.launch_router"
SECRET_FLAGS = frozenset("--" + f.replace("_", "-") for f in ROUTER_SECRET_FIELDS)


def redact_router_argv(argv):
    """argv with the values after secret flags (and of ``--flag=value``) as REDACTED."""
    out, hide = [], False
    for word in argv or []:
        word = str(word)
        if word.startswith("--"):
            flag, eq, _ = word.partition("=")
            hide = flag in SECRET_FLAGS and not eq
            out.append(flag + "=" + REDACTED if flag in SECRET_FLAGS and eq else word)
        elif hide:
            out.append(REDACTED)
        else:
            out.append(word)
    return out


def _item(what, desired, actual, fix):
    return {"what": what, "desired": desired, "actual": actual, "fix": fix}


def read_workers(api_url, timeout=10.0, api_key=None):
    """The router's live workers ({url, id, is_healthy}) or an error string."""
    try:
        data = get_json(api_url.rstrip("/") + "/workers", api_key or "", timeout)
    except (OSError, ValueError, urllib.error.URLError) as exc:
        return None, f"GET {api_url.rstrip('/')}/workers failed: {exc}"
    if not isinstance(data, dict) or not isinstance(data.get("workers"), list):
        return None, f"GET {api_url.rstrip('/')}/workers answered without a workers list: {str(data)[:200]}"
    return [{"url": w.get("url"), "id": w.get("id"), "is_healthy": w.get("is_healthy")}
            for w in data["workers"] if isinstance(w, dict)], None


def observe(run, service, unit_file, api_url, timeout=10.0, proc="/proc", api_key=None):
    """What the router host shows: service, unit argv, running argv, live workers. Reads only.

    The real router renames its process (sglang-router 0.3.2 launch_router.py:32
    ``setproctitle("sglang::router")``), which overwrites /proc/<MainPID>/cmdline with that title:
    its argv is then the unit's ExecStart= (systemd passes it word for word) provided the process
    started after the unit file was last written; a unit written since is a pending restart.
    """
    svc = read_service(run, service, unit_file)
    observed = {"service": svc, "unit": None, "running": None, "running_from": None, "workers": None,
                "workers_error": None, "unit_newer_than_process": False}
    # Secret values are masked here, on the host: never compared, and never in a registered result.
    if svc["installed"]:
        observed["unit"] = redact_router_argv(read_unit_argv(unit_file))
    if svc["active_state"] not in ("active", "reloading"):
        return observed
    cmd = read_cmdline(svc["main_pid"], proc)
    if cmd and ENTRYPOINT in cmd:
        observed["running"], observed["running_from"] = redact_router_argv(cmd), f"/proc/{svc['main_pid']}/cmdline"
    elif cmd and observed["unit"]:
        started = process_start(svc["main_pid"], proc)
        written = os.stat(unit_file).st_mtime
        observed["running"] = observed["unit"]
        observed["running_from"] = (f"the unit ({svc['main_pid']} renamed itself {cmd[0]!r}, "
                                    "sglang-router launch_router.py:32)")
        # btime is whole seconds: a unit written within 1 s before the start is not "newer"
        observed["unit_newer_than_process"] = started is None or written > started + 1.0
        observed["process_started_at"], observed["unit_written_at"] = started, written
    observed["workers"], observed["workers_error"] = read_workers(api_url, timeout, api_key)
    return observed


def diff_parsed(desired, actual):
    """[(field, desired, actual)] of RouterArgs fields that differ, secrets and workers left out."""
    out = []
    for key in sorted(set(desired) | set(actual)):
        if key in ROUTER_SECRET_FIELDS or key == "worker_urls":
            continue
        if desired.get(key) != actual.get(key):
            out.append((key, desired.get(key), actual.get(key)))
    return out


def compare(desired, observed, running_parsed):
    """Drift items of one router host, in a fixed order.

    ``desired``: {host, version, venv, service, argv, parsed (the inventory argv parsed by the
    release), workers ({url: inventory host}), workers_group}. ``running_parsed``: the running
    argv parsed by the release ({"parsed": ...} or {"error": ...}; None when nothing runs).
    """
    host, service = desired["host"], desired["service"]
    fix = f"run router.yml -l {host}"
    items = []
    svc = observed.get("service") or {}
    if not svc.get("installed"):
        return [_item("service installed", True, False, f"{fix} (installs and starts {service})")]
    if svc.get("unit_file_state") != "enabled":
        items.append(_item("service enabled", "enabled", svc.get("unit_file_state") or "unknown", fix))
    if svc.get("active_state") != "active" or not observed.get("running"):
        items.append(_item("service active", "active", svc.get("active_state") or "unknown",
                           f"{fix} (starts it); if it keeps stopping: journalctl -u {service}"))
        return items

    running = split_launch(observed["running"], desired.get("launcher") or "")
    if (running["venv"] != desired["venv"] or running["entrypoint"] != ENTRYPOINT
            or running["launcher"] != desired.get("launcher")):
        items.append(_item("running venv", f"{desired['venv']} {desired.get('launcher') or '-m'} {ENTRYPOINT}",
                           f"{running['venv'] or running['python']} {running['launcher'] or '-m'} {running['entrypoint']}",
                           f"{fix} (restarts it on sglang-router {desired['version']})"))
    if running_parsed is None or "error" in running_parsed:
        items.append(_item("running argv", f"parses with sglang-router {desired['version']}",
                           (running_parsed or {}).get("error", "not parsed"), fix))
    else:
        got = running_parsed["parsed"]
        items += [_item(key, d, a, f"{fix} (renders sglang_router_args into the unit and restarts {service})")
                  for key, d, a in diff_parsed(desired["parsed"], got)]
        want_urls, got_urls = sorted(desired["parsed"].get("worker_urls") or []), sorted(got.get("worker_urls") or [])
        if want_urls != got_urls:
            items.append(_item("worker_urls", want_urls, got_urls,
                               f"{fix} (renders the hosts of {desired['workers_group']} into the unit)"))
    unit = observed.get("unit")
    if observed.get("unit_newer_than_process"):
        items.append(_item("pending restart (the unit on disk differs from the running process)",
                           "the router started from the unit on disk",
                           "the unit was written after the router started (its argv above is the unit's)",
                           f"systemctl restart {service} on {host}, or {fix}"))
    elif unit is not None and unit != observed["running"]:
        changed = sorted(set(redact_router_argv(unit)) ^ set(redact_router_argv(observed["running"])))
        items.append(_item("pending restart (the unit on disk differs from the running process)",
                           "the unit's ExecStart", "words not in both: " + " ".join(changed),
                           f"systemctl restart {service} on {host}, or {fix}"))

    if observed.get("workers_error"):
        items.append(_item("router workers", "GET /workers answers", observed["workers_error"],
                           f"journalctl -u {service} on {host}"))
        return items
    listed = {w["url"]: w for w in observed.get("workers") or []}
    group = desired["workers_group"]
    for url, name in sorted(desired["workers"].items()):
        if url not in listed:
            items.append(_item(f"worker {url} ({name})", f"routed ({name} of {group})",
                               "missing from the router's /workers",
                               f"run deploy.yml -l {name} (puts it back once it generates), or POST /workers "
                               f"{{\"url\": \"{url}\"}} to the router"))
        elif listed[url].get("is_healthy") is False:
            items.append(_item(f"worker {url} ({name}) healthy", True, False,
                               f"journalctl -u sglang on {name}; the router routes to it again once it answers"))
    for url in sorted(set(listed) - set(desired["workers"])):
        items.append(_item(f"worker {url}", f"not routed (no host of {group} has this URL)",
                           f"routed (router worker id {listed[url].get('id')})",
                           f"DELETE /workers/{listed[url].get('id')} on the router, or add its server to {group} "
                           "(its URL: sglang_router_worker_url)"))
    return items


def drift_report(desired, observed, running_parsed):
    """The JSON report of one router host, in the server drift report's shape; nothing secret in it."""
    items = compare(desired, observed, running_parsed)
    host = desired["host"]
    lines = [summary_line(host, items)] + [item_line(host, i) for i in items]
    return {
        "host": host, "role": "router", "in_sync": not items, "differences": len(items), "items": items,
        "summary": lines[0], "lines": lines,
        "desired": {"version": desired["version"], "venv": desired["venv"],
                    "argv": redact_router_argv(desired["argv"]), "workers": desired["workers"]},
        "service": observed.get("service"),
        "unit": {"argv": redact_router_argv(observed["unit"]) if observed.get("unit") else None},
        "running": {"argv": redact_router_argv(observed["running"])} if observed.get("running") else None,
        "workers": observed.get("workers"),
    }
