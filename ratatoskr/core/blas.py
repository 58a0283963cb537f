"""numpy's BLAS held to one thread in every process ratatoskr starts.

Each request thread runs its own small mat-vec products, so a BLAS thread pool only adds
threads to the process: after every product large enough to split, OpenBLAS's helpers spin
for the next one for about a tenth of a second, and under a steady search load they take
a fifth to a third of a core from the requests, the writers and the mirror worker (on 2
cores). BLAS reads these variables once, when numpy loads it, so the entry points (the
command line, gunicorn's config, the benchmarks) call ``single_threaded`` before anything
imports numpy; a variable the operator set is left as it is.
"""

from __future__ import annotations

import os
from collections.abc import MutableMapping

THREAD_VARIABLES = ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS")


def single_threaded(environ: MutableMapping[str, str] = os.environ) -> None:
    """One BLAS thread, unless the environment already says how many."""
    for variable in THREAD_VARIABLES:
        environ.setdefault(variable, "1")
