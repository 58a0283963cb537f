"""An httpx client behind the pools' ``post``: for an ``https://`` server, or the caller's
own (``http=``: TLS settings, proxies, event hooks)."""

from __future__ import annotations

from collections.abc import Mapping

import httpx


class HttpxTransport:
    """An ``httpx.Client`` of the caller's behind the pools' ``post``: requests go to the
    client's URL, whatever ``base_url`` the httpx client has."""

    def __init__(self, http: httpx.Client, base_url: str) -> None:
        self.http = http
        self.base_url = base_url.rstrip("/")

    @property
    def closed(self) -> bool:
        return self.http.is_closed

    def post(self, path: str, body: bytes, headers: Mapping[str, str]) -> tuple[int, bytes]:
        try:
            response = self.http.post(self.base_url + path, content=body, headers=dict(headers))
        except httpx.TransportError as exc:
            raise OSError(type(exc).__name__) from exc
        return response.status_code, response.content

    def close(self) -> None:
        self.http.close()


class AsyncHttpxTransport:
    """An ``httpx.AsyncClient`` of the caller's behind the pools' ``post`` (as
    ``HttpxTransport``)."""

    def __init__(self, http: httpx.AsyncClient, base_url: str) -> None:
        self.http = http
        self.base_url = base_url.rstrip("/")

    @property
    def closed(self) -> bool:
        return self.http.is_closed

    async def post(self, path: str, body: bytes, headers: Mapping[str, str]) -> tuple[int, bytes]:
        try:
            response = await self.http.post(
                self.base_url + path, content=body, headers=dict(headers)
            )
        except httpx.TransportError as exc:
            raise OSError(type(exc).__name__) from exc
        return response.status_code, response.content

    async def aclose(self) -> None:
        await self.http.aclose()
