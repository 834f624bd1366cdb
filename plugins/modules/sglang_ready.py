#!/usr/bin/python
"""Ansible module: wait until the server generates, and stop early when its process exits."""

DOCUMENTATION = r"""
module: sglang_ready
short_description: Wait for an SGLang server's first generation, failing fast when it exits during start-up
description:
  - Polls O(url)C(/health_generate) (a real one-token generation) every O(delay) seconds until it
    answers 200, for at most O(timeout) seconds.
  - Between tries reads the systemd O(service) (ActiveState, MainPID and the process's start time).
    When the process that was starting exits (the unit is failed or inactive, or systemd restarted
    it under another PID), the wait stops at once with C(exited=true). So a flag the release refuses
    at start-up is known in seconds, not after the whole ready timeout (30 minutes by default for a
    large model).
  - Read-only; does nothing in check mode.
options:
  url: {description: The server's base URL (the host model's C(url))., type: str, required: true}
  service: {description: The systemd service running the server., type: str, required: true}
  timeout: {description: Seconds to wait for the first 200., type: int, default: 1800}
  delay: {description: Seconds between tries., type: int, default: 5}
extends_documentation_fragment: [sglang.fleet.api_key]
author:
  - sglang-fleet developers (@sglang-fleet)
"""

EXAMPLES = r"""
- name: Wait for the model to answer
  sglang.fleet.sglang_ready:
    url: http://127.0.0.1:30000
    service: sglang
    timeout: 600
  register: __ready
"""

RETURN = r"""
ready: {description: Whether /health_generate answered 200., type: bool, returned: always}
exited: {description: The server's process exited during the wait (a start-up failure)., type: bool, returned: always}
waited_s: {description: Seconds waited., type: float, returned: always}
tries: {description: Requests made., type: int, returned: always}
last: {description: "What the last try saw: the HTTP status or why there was none, and the unit's state.", type: str, returned: always}
"""

import time

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.sglang.fleet.plugins.module_utils.module_options import api_key_option
from ansible_collections.sglang.fleet.plugins.module_utils.transport.observe import (
    http_status,
    main_pid,
    process_start,
    systemd_show,
)


def process_of(service):
    """(state, (pid, start time) or None) of the service's main process."""
    props, error = systemd_show(service, ("ActiveState", "MainPID"))
    if error:
        return f"unknown ({error})", None
    pid = main_pid(props)
    return props.get("ActiveState") or "unknown", ((pid, process_start(pid)) if pid else None)


def main():
    module = AnsibleModule(
        argument_spec={
            "url": {"type": "str", "required": True},
            "service": {"type": "str", "required": True},
            **api_key_option(),
            "timeout": {"type": "int", "default": 1800},
            "delay": {"type": "int", "default": 5},
        },
        supports_check_mode=True,
    )
    p = module.params
    if module.check_mode:
        module.exit_json(changed=False, ready=False, exited=False, waited_s=0.0, tries=0, last="check mode")
    start, tries, starting = time.monotonic(), 0, None
    while True:
        tries += 1
        status, why = http_status(p["url"].rstrip("/") + "/health_generate", p["api_key"], timeout=30)
        waited = round(time.monotonic() - start, 1)
        if status == 200:
            module.exit_json(changed=False, ready=True, exited=False, waited_s=waited, tries=tries, last="200")
        state, process = process_of(p["service"])
        last = f"HTTP {status or why}; {p['service']} {state}"
        exited = starting is not None and (state in ("failed", "inactive") or (process and process != starting))
        if exited:
            module.fail_json(msg=f"{p['service']} exited during start-up after {waited} s ({state}"
                             + (f", restarted as PID {process[0]}" if process and state not in ("failed", "inactive") else "")
                             + ")", ready=False, exited=True, waited_s=waited, tries=tries, last=last)
        starting = starting or process
        if waited >= p["timeout"]:
            module.fail_json(msg=f"no 200 from {p['url']}/health_generate within {p['timeout']} s ({last})",
                             ready=False, exited=False, waited_s=waited, tries=tries, last=last)
        time.sleep(max(1, p["delay"]))


if __name__ == "__main__":
    main()
