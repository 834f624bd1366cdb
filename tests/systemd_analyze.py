"""systemd-analyze for unit-file tests: whether it is here, and a unit's overall exposure level."""

import re
import shutil
import subprocess

import pytest

ANALYZE = shutil.which("systemd-analyze")
needs_analyze = pytest.mark.skipif(ANALYZE is None, reason="systemd-analyze not installed")


def exposure(unit):
    """systemd-analyze's overall exposure level of a unit file (0.0 safe .. 10.0 unsafe)."""
    proc = subprocess.run([ANALYZE, "security", "--offline=true", "--no-pager", str(unit)], capture_output=True,
                          text=True, check=False)
    m = re.search(rf"Overall exposure level for {re.escape(unit.name)}: (\d+\.\d+) ", proc.stdout)
    assert m, proc.stdout + proc.stderr
    return float(m.group(1))
