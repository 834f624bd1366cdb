"""The collection as a user gets it (issue #43): `ansible-galaxy collection build`, the tarball
installed into a scratch collections path, and a playbook outside the checkout that uses a filter
(sglang.fleet.sglang_argv) and a role (sglang.fleet.sglang_common, whose check_vars entry point
calls a filter of the collection) by FQCN. Offline: localhost, no connection, no package index."""

import os
import pathlib
import subprocess
import sys
import tarfile

REPO = pathlib.Path(__file__).resolve().parents[2]
BIN = pathlib.Path(sys.executable).parent

PLAYBOOK = """\
- name: A playbook of the user's own, outside the checkout
  hosts: localhost
  gather_facts: false
  connection: local
  tasks:
    - name: A filter of the collection by FQCN
      ansible.builtin.assert:
        that: "({'tp_size': 2} | sglang.fleet.sglang_argv) == ['--tp-size', '2']"
        quiet: true
    - name: A role of the collection that calls its own filters
      ansible.builtin.include_role:
        name: sglang.fleet.sglang_common
        tasks_from: check_vars
      vars:
        sglang_common_role: sglang_service
        sglang_service_ready_timeout_s: 30
    - name: The same role refuses a misspelled variable
      block:
        - name: Check a misspelled variable of sglang_service
          ansible.builtin.include_role:
            name: sglang.fleet.sglang_common
            tasks_from: check_vars
          vars:
            sglang_common_role: sglang_service
            sglang_service_ready_timout_s: 30
        - name: Not reached
          ansible.builtin.fail:
            msg: the misspelled variable was not refused
      rescue:
        - name: Show the refusal
          ansible.builtin.debug:
            msg: "REFUSED: {{ ansible_failed_result.msg }}"
"""


def run(args, cwd, env):
    return subprocess.run(args, cwd=cwd, env=env, capture_output=True, text=True, check=False, timeout=120)


def test_an_installed_collection_offers_its_filters_and_roles(tmp_path):
    user = tmp_path / "user"
    user.mkdir()
    (user / "ansible.cfg").write_text("[defaults]\n")   # no setting of the checkout's ansible.cfg
    env = {k: v for k, v in os.environ.items() if not k.startswith("ANSIBLE_")}
    env.update(ANSIBLE_CONFIG=str(user / "ansible.cfg"), ANSIBLE_COLLECTIONS_PATH=str(tmp_path / "collections"),
               ANSIBLE_NOCOLOR="1", ANSIBLE_LOCAL_TEMP=str(tmp_path / "tmp"), ANSIBLE_HOME=str(tmp_path / "home"))

    built = run([str(BIN / "ansible-galaxy"), "collection", "build", "--output-path", str(tmp_path / "dist"),
                 str(REPO)], cwd=user, env=env)
    assert built.returncode == 0, built.stdout + built.stderr
    tarball = tmp_path / "dist" / "sglang-fleet-0.5.0.tar.gz"
    with tarfile.open(tarball) as tar:
        members = {m.name: m for m in tar.getmembers()}
    # what the collection ships: its filters in plugins/filter, filter_plugins/ links to them
    assert "plugins/filter/sglang_args.py" in members and members["plugins/filter/sglang_args.py"].isfile()
    assert members["filter_plugins/sglang_args.py"].issym()
    assert members["filter_plugins/sglang_args.py"].linkname == "../plugins/filter/sglang_args.py"
    # and none of the checkout's caches, venv, lab state, tests or reports
    tops = {name.split("/")[0] for name in members}
    assert tops.isdisjoint({".cache", ".venv", ".lab", ".collections", "tests", "lab", "bench", "molecule",
                            "reports"}), sorted(tops)
    assert tarball.stat().st_size < 2_000_000

    installed = run([str(BIN / "ansible-galaxy"), "collection", "install", "-p", str(tmp_path / "collections"),
                     str(tarball)], cwd=user, env=env)
    assert installed.returncode == 0, installed.stdout + installed.stderr
    home = tmp_path / "collections" / "ansible_collections" / "sglang" / "fleet"
    assert (home / "plugins" / "filter" / "sglang_args.py").is_file()

    (user / "site.yml").write_text(PLAYBOOK)
    played = run([str(BIN / "ansible-playbook"), "-i", "localhost,", "site.yml"], cwd=user, env=env)
    assert played.returncode == 0, played.stdout + played.stderr
    assert "ok=5" in played.stdout and "failed=0" in played.stdout and "rescued=1" in played.stdout, played.stdout
    assert ("REFUSED: unknown variable sglang_service_ready_timout_s: did you mean sglang_service_ready_timeout_s?"
            in played.stdout), played.stdout
