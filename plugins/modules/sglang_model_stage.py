#!/usr/bin/python
"""Ansible module: copy a locked model revision from the controller to a host with rsync over SSH."""

DOCUMENTATION = r"""
module: sglang_model_stage
short_description: Stage a model revision from the controller to a host (rsync over SSH, resumable)
description:
  - Runs on the controller (C(delegate_to=localhost)), once per host. rsync copies the lock's
    files from O(src) to O(dest) on O(address) over SSH with the host's own connection settings.
  - Resumable (an interrupted file waits in C(.rsync-partial) for the next run), limited to
    O(bwlimit), and a re-run of a staged revision sends 0 bytes (rsync's size + mtime check);
    O(link_dest) names revisions already on the host whose identical files are hard-linked, not sent.
  - Says what it sent (C(literal_bytes)) and how long it took; checking the staged bytes is
    sglang_model_files' job (state=check).
options:
  src: {description: "The controller folder of the revision (sglang_model_fetch's folder).", type: path, required: true}
  dest: {description: "The revision's folder on the host (sglang_host.model.path).", type: str, required: true}
  files: {description: "The lock's files (path is what is used).", type: list, elements: dict, required: true}
  address: {description: "C(user@host) as SSH reaches the host (ansible_user, ansible_host).", type: str, required: true}
  port: {description: "SSH port (ansible_port).", type: int}
  private_key: {description: "SSH key (ansible_ssh_private_key_file).", type: str, default: ""}
  ssh_args: {description: "Extra ssh arguments (ansible.cfg's ssh_args and ansible_ssh_common_args).", type: str, default: ""}
  become: {description: "Run rsync as root on the host (sudo -n).", type: bool, default: false}
  bwlimit: {description: "rsync's --bwlimit (KiB/s, or with a suffix: C(100M)); empty = no limit.", type: str, default: ""}
  link_dest: {description: "Folders on the host with earlier revisions of the same model.", type: list, elements: str, default: []}
  timeout: {description: "Seconds before the copy is stopped (it resumes on the next run); 0 = never.", type: int, default: 0}
author:
  - sglang-fleet developers (@sglang-fleet)
"""

EXAMPLES = r"""
- name: Stage the revision
  sglang.fleet.sglang_model_stage:
    src: "{{ __fetched.folder }}"
    dest: "{{ sglang_host.model.path }}"
    files: "{{ __fetched.lock.files }}"
    address: "{{ ansible_user }}@{{ ansible_host }}"
    become: true
    bwlimit: 100M
  delegate_to: localhost
"""

RETURN = r"""
files_transferred: {description: "Files rsync sent (in whole or in part).", type: int, returned: always}
literal_bytes: {description: "File bytes sent (0 on a re-run of a staged revision).", type: int, returned: always}
bytes_sent: {description: "Bytes on the wire, protocol included.", type: int, returned: always}
seconds: {description: "How long the copy took.", type: float, returned: always}
"""

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.sglang.fleet.plugins.module_utils.model.stage import ssh_command, stage


def main():
    module = AnsibleModule(
        argument_spec={
            "src": {"type": "path", "required": True},
            "dest": {"type": "str", "required": True},
            "files": {"type": "list", "elements": "dict", "required": True},
            "address": {"type": "str", "required": True},
            "port": {"type": "int"},
            "private_key": {"type": "str", "default": "", "no_log": False},
            "ssh_args": {"type": "str", "default": ""},
            "become": {"type": "bool", "default": False},
            "bwlimit": {"type": "str", "default": ""},
            "link_dest": {"type": "list", "elements": "str", "default": []},
            "timeout": {"type": "int", "default": 0},
        },
        supports_check_mode=True,
    )
    p = module.params
    if module.check_mode:
        module.exit_json(changed=True, files_transferred=None, literal_bytes=None, bytes_sent=None, seconds=0.0)
    ssh = ssh_command(p["port"], p["private_key"], p["ssh_args"])
    try:
        result = stage(p["src"], p["dest"], [f["path"] for f in p["files"]], p["address"], ssh, p["bwlimit"],
                       p["become"], p["link_dest"], p["timeout"] or None)
    except FileNotFoundError:
        module.fail_json(msg="rsync is not installed on the controller: install it (apt-get install rsync)")
    except Exception as exc:  # subprocess.TimeoutExpired: rsync's partial file waits for the next run
        module.fail_json(msg=f"staging to {p['address']}:{p['dest']} stopped: {exc}; the next run resumes it")
    if result["rc"] != 0:
        module.fail_json(msg=f"staging to {p['address']}:{p['dest']} failed (rsync exit {result['rc']}): {result['stderr']}; "
                             "what was sent is kept and the next run resumes it", **result)
    module.exit_json(changed=bool(result["files_transferred"]), **result)


if __name__ == "__main__":
    main()
