"""Only the optional C accelerators (packing vectors; reading a body's vectors; the scoped
search's candidate cut); everything else about the package is in pyproject.toml.

``optional=True``: where no C compiler is found the install still succeeds and the store
runs its pure-Python and numpy paths (same results, slower ``upsert_many`` and small
scoped searches).
"""

from setuptools import Extension, setup

setup(
    ext_modules=[
        Extension(
            "ratatoskr.memory._pack",
            ["ratatoskr/memory/_pack.c"],
            depends=["ratatoskr/memory/_narrow.h"],
            optional=True,
            extra_compile_args=["-O2"],
        ),
        Extension(
            "ratatoskr.memory._body",
            ["ratatoskr/memory/_body.c"],
            depends=["ratatoskr/memory/_narrow.h", "ratatoskr/memory/_decimal.h"],
            optional=True,
            extra_compile_args=["-O3"],
        ),
        Extension(
            "ratatoskr.memory.search._rank",
            ["ratatoskr/memory/search/_rank.c", "ratatoskr/memory/search/_rank_exact.c"],
            depends=["ratatoskr/memory/search/_rank.h"],
            optional=True,
            extra_compile_args=["-O3", "-ffp-contract=off"],  # exact sums: see _rank.c
        ),
    ]
)
