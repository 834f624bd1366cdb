"""Argument specs of the options several modules share, written once (issue #43).

Each one's documentation is a doc fragment (plugins/doc_fragments/), named in the function's
docstring; a module that uses one names the fragment in `extends_documentation_fragment`, and
ansible-test's validate-modules (`make sanity`) checks that spec and documentation agree. Each call
returns a new dict, to unpack into the module's argument_spec: `dict(venv=..., **server_options())`.
"""


def api_key_option():
    """`api_key`, the server's API key sent as a Bearer token, never logged (sglang.fleet.api_key)."""
    return {"api_key": {"type": "str", "default": "", "no_log": True}}


def http_timeout_option():
    """`timeout`, seconds for each HTTP request (sglang.fleet.http_timeout)."""
    return {"timeout": {"type": "int", "default": 10}}


def server_options():
    """`api_key` and `timeout` of a module that reads a server over HTTP (sglang.fleet.api_key and
    sglang.fleet.http_timeout)."""
    return {**api_key_option(), **http_timeout_option()}


def inventory_host_option():
    """`host`, the inventory name used in messages, "" for none (sglang.fleet.inventory_host)."""
    return {"host": {"type": "str", "default": ""}}


def bench_client_options():
    """`base_url`, `api` and `timeout_s` of a module that drives a server with the bench client
    (module_utils/verify/bench_client.py): its URL, endpoint and one request's deadline
    (sglang.fleet.bench_client)."""
    return {"base_url": {"type": "str", "required": True},
            "api": {"type": "str", "choices": ["completions", "chat", "generate"], "default": "completions"},
            "timeout_s": {"type": "float", "default": 60.0}}
