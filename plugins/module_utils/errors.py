"""SglangFleetError: the root of the collection's own errors.

Every error class in plugins/module_utils derives from it, keeping its older base (ValueError,
RuntimeError) beside it where callers catch that; the message is always the whole story for the
user. Not in it: the self-contained code copied to hosts alone (source/ and verify/bench_client.py
import nothing of the collection).
"""


class SglangFleetError(Exception):
    """An error of sglang-fleet's own; its message says what went wrong and what to do."""
