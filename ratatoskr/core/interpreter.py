"""The interpreter's settings for a process that serves searches beside a mirror worker.

Two of CPython's defaults stall every thread of the process at once, since both act while
one thread holds the GIL:

- **The switch interval (5 ms).** A thread that wants the GIL waits that long before it
  asks the holder to let go. A search finishing its C scan waits behind the mirror
  worker's Python, and the worker behind the search's, each time for up to 5 ms. At 0.5 ms
  the hand-over is ten times sooner; the extra switches cost nothing measurable.
- **The oldest generation's collection.** It walks every object tracked since the start
  (the modules, functions and classes of the whole server: ~3.5 to 9 ms idle, 20 ms when
  the collecting thread loses its core midway) with the GIL held. Those objects live as
  long as the process, so ``gc.freeze`` moves them out of the collector's sight once
  startup has made them; later collections walk only what came after.

The entry points call ``settle_for_serving`` once the application is imported (a gunicorn
worker after loading the app; the benchmarks before they time searches), never the
library itself: a test process must keep collecting its own garbage normally.
"""

from __future__ import annotations

import gc
import sys

SWITCH_INTERVAL_SECONDS = 0.0005


def settle_for_serving() -> None:
    """The switch interval shortened, and the objects made so far frozen out of the cyclic
    collector (their unreachable cycles were collected first, so nothing is kept)."""
    sys.setswitchinterval(SWITCH_INTERVAL_SECONDS)
    gc.collect()
    gc.freeze()
