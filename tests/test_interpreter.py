"""The interpreter settled for serving (``ratatoskr.core.interpreter``): a gunicorn worker
hands the GIL over within 0.5 ms and its collector no longer walks the startup objects,
without keeping any garbage. Each check runs in a fresh interpreter, since the settings
are the whole process's."""

from __future__ import annotations

import json
import subprocess
import sys

from ratatoskr.core.interpreter import SWITCH_INTERVAL_SECONDS

# a cycle made before settling, unreachable: the collection before the freeze frees it
PROBE = """
import gc, json, sys, weakref
{setup}
class Node:
    pass
cycle = Node(); cycle.self = cycle
dead = weakref.ref(cycle)
del cycle
before = sys.getswitchinterval()
{settle}
print(json.dumps({{"before": before, "after": sys.getswitchinterval(),
    "frozen": gc.get_freeze_count(), "cycle_freed": dead() is None}}))
"""


def _probe(setup: str, settle: str) -> dict[str, object]:
    code = PROBE.format(setup=setup, settle=settle)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, check=True, text=True)
    result: dict[str, object] = json.loads(out.stdout)
    return result


def test_a_gunicorn_worker_settles_the_interpreter_once_the_app_is_imported() -> None:
    got = _probe(
        "import ratatoskr.server.gunicorn_conf as conf, ratatoskr.server.app",
        "conf.post_worker_init(None)",
    )
    assert got["before"] == 0.005  # CPython's default, until the worker settles it
    assert got["after"] == SWITCH_INTERVAL_SECONDS
    # the app's modules, functions and classes are out of the collector's walks
    assert isinstance(got["frozen"], int) and got["frozen"] > 10_000
    assert got["cycle_freed"] is True  # collected before the freeze, not kept for good


def test_without_settling_nothing_is_frozen() -> None:
    got = _probe("import ratatoskr.server.app", "")
    assert got["after"] == 0.005 and got["frozen"] == 0
