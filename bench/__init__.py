"""Benchmarks for ratatoskr (``python -m bench.memory_search``).

The store answers a query on one thread, so numpy's BLAS is held to one thread as well
(set here, before anything imports numpy): on a small shared machine a multi-threaded
mat-vec mostly measures how long its worker threads take to wake up.
"""

import os

for _var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")
