"""Where the seed contract imports the memory provider from (``provider.memory_store``).

Only names live here; the stores themselves are ``ratatoskr.memory`` and ``ratatoskr.affect``.
"""
