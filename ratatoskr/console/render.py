"""Server-rendered HTML: Jinja2 templates shipped in the package, autoescaped.

Templates see only what the ops functions return for lists, counts and reports; a
record's content is handed to the one template that shows an opened record.
"""

from __future__ import annotations

from importlib import resources
from typing import Any

import jinja2
import orjson
from starlette.responses import HTMLResponse

from ratatoskr.console import values
from ratatoskr.console.tree import href as tree_href
from ratatoskr.core.scope import AXES

_ENV = jinja2.Environment(
    loader=jinja2.PackageLoader("ratatoskr.console", "templates"),
    autoescape=jinja2.select_autoescape(["html"]),
    undefined=jinja2.StrictUndefined,
    trim_blocks=True,
    lstrip_blocks=True,
)
STATIC_TYPES = {".css": "text/css; charset=utf-8", ".js": "text/javascript; charset=utf-8"}


def static_files() -> dict[str, tuple[bytes, str]]:
    """The stylesheet and script, read once: no CDN, no build step."""
    folder = resources.files("ratatoskr.console").joinpath("static")
    out: dict[str, tuple[bytes, str]] = {}
    for item in folder.iterdir():
        suffix = "." + item.name.rsplit(".", 1)[-1]
        if suffix in STATIC_TYPES:
            out[item.name] = (item.read_bytes(), STATIC_TYPES[suffix])
    return out


def size(n: int) -> str:
    value = float(n)
    for unit in ("B", "KiB", "MiB", "GiB"):
        if value < 1024 or unit == "GiB":
            return f"{value:,.0f} {unit}" if unit == "B" else f"{value:,.1f} {unit}"
        value /= 1024
    return f"{n} B"


def pairs_text(pairs: list[tuple[str, str]] | list[str]) -> str:
    items = [p if isinstance(p, str) else f"{p[0]}={p[1]}" for p in pairs]
    return " ".join(items) or "everything"


def shown_record(record: dict[str, Any]) -> str:
    """An opened record as indented JSON, embeddings shortened as ``admin get`` does."""
    shown = dict(record)
    for key in ("embedding", "vector"):
        if isinstance(shown.get(key), list):
            shown[key] = f"<{len(shown[key])} numbers>"
    return orjson.dumps(shown, option=orjson.OPT_INDENT_2 | orjson.OPT_SORT_KEYS).decode()


_ENV.filters["size"] = size
_ENV.filters["num"] = lambda n: f"{n:,}"
_ENV.filters["pairs"] = pairs_text
_ENV.filters["v"] = values.html
_ENV.filters["vpairs"] = values.pairs_html
_ENV.filters["shown_value"] = values.shown
_ENV.filters["shown"] = shown_record
_ENV.globals["AXES"] = AXES
_ENV.globals["tree_href"] = tree_href


def page(name: str, context: dict[str, Any], status: int = 200) -> HTMLResponse:
    return HTMLResponse(_ENV.get_template(name).render(**context), status_code=status)
