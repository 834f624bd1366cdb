"""sglang.fleet.sglang_system_user: ansible.builtin.group, then ansible.builtin.user, in one task
(sglang_service's user and group), on localhost under --check only: this machine's users stay as they are."""

import grp
import pwd
import uuid

from ansible_run import run_module


def test_a_new_user_and_group_would_be_created_and_nothing_is():
    name = f"sglang-t{uuid.uuid4().hex[:8]}"
    rc, result, out = run_module({"name": name, "group": name, "home": f"/var/lib/{name}"}, module="sglang_system_user",
                                 check=True)
    assert rc == 0 and result["changed"] is True, out
    assert name not in {p.pw_name for p in pwd.getpwall()} and name not in {g.gr_name for g in grp.getgrall()}


def test_a_user_already_as_asked_is_no_change():
    rc, result, out = run_module({"name": "daemon", "group": "daemon", "home": "/usr/sbin", "shell": "/usr/sbin/nologin"},
                                 module="sglang_system_user", check=True)
    assert rc == 0 and result["changed"] is False, out
    assert (result["name"], result["home"], result["shell"]) == ("daemon", "/usr/sbin", "/usr/sbin/nologin")


def test_the_group_comes_first_and_the_user_modules_refusal_is_the_tasks():
    """Under --check the group is not made, so the user module refuses it, as the second of two tasks did."""
    group = f"sglang-t{uuid.uuid4().hex[:8]}"
    rc, result, out = run_module({"name": "daemon", "group": group, "home": "/usr/sbin"}, module="sglang_system_user",
                                 check=True)
    assert rc != 0, out
    assert result["msg"] == f"Group {group} does not exist"


def test_the_home_is_required():
    rc, result, out = run_module({"name": "sglang", "group": "sglang"}, module="sglang_system_user", check=True)
    assert rc != 0, out
    assert result["msg"] == "sglang_system_user needs home"
