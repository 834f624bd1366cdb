"""Test harness only: one AnsiballZ payload cache for every ansible-playbook of a test session.

ansible-core builds each module's payload (its imports walked with `ast`, zipped) once per distinct
module per run, in the run's own temporary folder (`C.DEFAULT_LOCAL_TMP/ansiballz_cache`,
executor/module_common.py), keyed by the module's name, not its content: a quarter of a deploy's
controller CPU (bench/README.md, "Where a deploy's controller CPU goes"). Within one test session the
modules do not change, so this callback points each run's cache at the session's folder
(SGLANG_FLEET_PAYLOAD_CACHE, made and removed by tests/conftest.py). The payloads are the ones the run
would build; a user's ansible-playbook never loads this plugin. Without the variable, or on any error,
it does nothing and the run builds its payloads as usual.
"""

import os

from ansible import constants as C
from ansible.plugins.callback import CallbackBase

DOCUMENTATION = """
name: session_payload_cache
type: aggregate
short_description: Share AnsiballZ payloads between the runs of one test session (sglang-fleet's tests only)
description:
  - Links the run's AnsiballZ cache folder to the folder named by E(SGLANG_FLEET_PAYLOAD_CACHE).
requirements:
  - enabled in callbacks_enabled
"""


class CallbackModule(CallbackBase):
    CALLBACK_VERSION = 2.0
    CALLBACK_TYPE = "aggregate"
    CALLBACK_NAME = "session_payload_cache"
    CALLBACK_NEEDS_ENABLED = True

    def __init__(self):
        super().__init__()
        shared = os.environ.get("SGLANG_FLEET_PAYLOAD_CACHE")
        own = os.path.join(C.DEFAULT_LOCAL_TMP, "ansiballz_cache")
        if not shared or os.path.lexists(own):   # a payload already built in this run: leave it its own
            return
        try:
            os.makedirs(shared, exist_ok=True)
            os.symlink(shared, own)
        except OSError:
            pass
