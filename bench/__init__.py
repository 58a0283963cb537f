"""Benchmarks for ratatoskr (``python -m bench.memory_search``).

numpy's BLAS runs on one thread here, as in every process the server starts
(``ratatoskr.core.blas``, set before anything imports numpy): each search is measured as a
request thread runs it.
"""

from ratatoskr.core.blas import single_threaded

single_threaded()
