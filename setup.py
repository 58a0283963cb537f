"""Only the optional C accelerator; everything else about the package is in pyproject.toml.

``optional=True``: where no C compiler is found the install still succeeds and the store
runs its pure-Python path (same results, slower ``upsert_many``).
"""

from setuptools import Extension, setup

setup(
    ext_modules=[
        Extension(
            "ratatoskr.provider._pack",
            ["ratatoskr/provider/_pack.c"],
            optional=True,
            extra_compile_args=["-O2"],
        )
    ]
)
