"""The router's API key (plugins/filter/sglang_router.py): one key for the
router and the servers behind it, never in argv, and no open router beyond loopback by accident.
The real router requiring it and passing it on runs in tests/lab/test_router_lab.py."""
import importlib.util
import pathlib

import pytest

REPO = pathlib.Path(__file__).resolve().parents[2]
_SPEC = importlib.util.spec_from_file_location("sglang_router_filters",
                                               REPO / "plugins/filter/sglang_router.py")
router = importlib.util.module_from_spec(_SPEC)
_SPEC.loader.exec_module(router)

KEY, OTHER = "k-3f9c2e", "k-other"


def hostvars(*keys):
    return {f"rep{i}": ({"sglang_service_secrets": {"SGLANG_API_KEY": k}} if k is not None else {})
            for i, k in enumerate(keys)}


def problems(router_key, worker_keys, args=None, allow_open=False):
    hv = hostvars(*worker_keys)
    return router.key_problems(router_key, router.worker_keys(list(hv), hv), args or {"host": "0.0.0.0"},
                               allow_open, "router")


def test_the_workers_keys_are_read_once_each():
    hv = hostvars(KEY, KEY, None)
    assert router.worker_keys(list(hv), hv) == ["", KEY]
    assert router.worker_keys(["rep0", "rep1"], hv) == [KEY]


@pytest.mark.parametrize("router_key, worker_keys", [
    (KEY, [KEY, KEY]),  # one key for all: the default
    (KEY, [None, None]),  # a key at the router only: it guards the router, workers ignore the header
])
def test_one_key_for_the_router_and_its_workers_is_accepted(router_key, worker_keys):
    assert problems(router_key, worker_keys) == []


def test_workers_with_different_keys_or_some_without_are_refused():
    for keys in ([KEY, OTHER], [KEY, None]):
        (msg,) = problems(KEY, keys)
        assert "its workers do not share one SGLANG_API_KEY" in msg and "401" in msg


def test_a_router_key_other_than_its_workers_is_refused_without_showing_either():
    (msg,) = problems(OTHER, [KEY, KEY])
    assert msg.startswith("router: sglang_router_api_key is not its workers' SGLANG_API_KEY")
    assert KEY not in msg and OTHER not in msg


@pytest.mark.parametrize("key", ["api_key", "api-key", "control_plane_api_keys", "oracle_password"])
def test_a_secret_in_the_router_args_is_refused_with_where_it_goes(key):
    (msg,) = problems(KEY, [KEY], {"host": "127.0.0.1", key: "x"})
    assert f"sglang_router_args sets {key}" in msg and "sglang_router_api_key" in msg


@pytest.mark.parametrize("args, allow_open, refused", [
    ({}, False, True),  # RouterArgs.host defaults to 0.0.0.0
    ({"host": "0.0.0.0"}, False, True),
    ({"host": "10.0.0.5"}, False, True),
    ({"host": "127.0.0.1"}, False, False),
    ({"host": "::1"}, False, False),
    ({"host": "0.0.0.0"}, True, False),
])
def test_an_open_router_beyond_loopback_needs_saying_so(args, allow_open, refused):
    found = problems("", [None, None], args, allow_open)
    assert bool(found) is refused
    if refused:
        assert "without an API key" in found[0] and "sglang_router_allow_unauthenticated_bind" in found[0]


def test_the_router_and_the_servers_share_one_loopback_test():
    """The open-bind refusal means the same host set for a server (sglang_service preflight) and a router."""
    sglang_args = router.sglang_args
    assert [h for h in ("127.0.0.1", "127.8.9.10", "::1", "[::1]", "localhost", "0.0.0.0", "::", "10.0.0.5",
                        "127.0.0.1.example.internal") if sglang_args.is_loopback(h)] == [
        "127.0.0.1", "127.8.9.10", "::1", "[::1]", "localhost"]
