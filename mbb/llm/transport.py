"""The HTTP layer under every OpenAI-compatible client mbb makes: a byte cap on each answer,
counted as it arrives and after decompression, and no redirects followed.

Why (a red team's finds against hostile endpoints): the client read a whole body before mbb
could check it, so an endless body, a 200 MB answer or a 2 MB gzip that inflates to 2 GB took
mbb past 3 GB in seconds; and a redirect was followed silently, so another endpoint (any URL
the first chose) answered every call of a study that names the first, without the key but with
every prompt.
"""

from __future__ import annotations

import urllib.parse
import urllib.request
import zlib
from collections.abc import AsyncIterator
from typing import Any

import openai

try:  # the HTTP library the openai client is built on: httpx2 from openai 3, httpx before
    import httpx2 as http
except ImportError:  # pragma: no cover - older openai releases
    import httpx as http  # type: ignore[no-redef]

__all__ = ["MAX_ANSWER_BYTES", "AnswerRefused", "http_client"]

# The largest answer body mbb reads (mbb's choice): the longest answer fields the provider
# accepts (`provider.check_size`: 64 characters per token of max_tokens, reasoning up to 1 M
# characters) take a few MB of JSON even escaped; 16 MiB leaves room and bounds the memory a
# call can take (a body costs mbb about nine times its size once parsed).
MAX_ANSWER_BYTES = 16 * 1024 * 1024
# the encodings mbb can inflate under the cap, and so the only ones it asks for
_ENCODINGS = ("gzip", "deflate")


class AnswerRefused(ValueError):
    """An answer body mbb will not read: over `MAX_ANSWER_BYTES` (as sent or inflated), or in
    an encoding it did not ask for."""


class _CappedBody(http.AsyncByteStream):
    """The body as it arrives, inflated when its encoding says so, refused at the cap."""

    def __init__(self, inner: Any, encoding: str, cap: int) -> None:
        self._inner = inner
        self._cap = cap
        # gzip and zlib headers are detected (32 + 15); a "deflate" body without the zlib
        # header (raw deflate, as some servers send it) is retried raw on its first chunk
        self._inflate = zlib.decompressobj(47) if encoding else None
        self._raw_deflate = encoding == "deflate"

    async def __aiter__(self) -> AsyncIterator[bytes]:
        total = 0
        async for chunk in self._inner:
            if self._inflate is not None:
                chunk = self._inflated(chunk, self._cap - total)
            total += len(chunk)
            if total > self._cap:
                raise AnswerRefused(f"an answer over {self._cap:,} bytes")
            yield chunk
        if self._inflate is not None:
            tail = self._inflate.flush()
            if total + len(tail) > self._cap:
                raise AnswerRefused(f"an answer over {self._cap:,} bytes once inflated")
            if tail:
                yield tail

    def _inflated(self, chunk: bytes, room: int) -> bytes:
        assert self._inflate is not None
        try:
            out = self._inflate.decompress(chunk, room + 1)
        except zlib.error:
            if not self._raw_deflate:
                raise AnswerRefused("a compressed answer that does not inflate") from None
            self._raw_deflate = False
            self._inflate = zlib.decompressobj(-zlib.MAX_WBITS)
            return self._inflated(chunk, room)
        self._raw_deflate = False  # the header was read: no retry after the first chunk
        if len(out) > room or self._inflate.unconsumed_tail:
            raise AnswerRefused(f"an answer over {self._cap:,} bytes once inflated")
        return out

    async def aclose(self) -> None:
        await self._inner.aclose()


class _CappedTransport(http.AsyncBaseTransport):
    """A connection pool whose answers are `_CappedBody`s: decoded here, under the cap, so
    the client above never inflates anything itself."""

    def __init__(self, cap: int, proxy: str | None = None) -> None:
        self._pool = http.AsyncHTTPTransport(limits=openai.DEFAULT_CONNECTION_LIMITS, proxy=proxy)
        self._cap = cap

    async def handle_async_request(self, request: Any) -> Any:
        request.headers["Accept-Encoding"] = ", ".join(_ENCODINGS)
        response = await self._pool.handle_async_request(request)
        encoding = response.headers.get("Content-Encoding", "").strip().lower()
        if encoding in ("", "identity"):
            encoding = ""
        elif encoding not in _ENCODINGS:
            await response.aclose()
            # the header's value is not echoed: an endpoint can put anything there (the key it
            # was sent, lower-cased past the redactor: F2 of red team rt37)
            raise AnswerRefused(
                "an answer in an encoding mbb did not ask for (its Content-Encoding header "
                f"names none of {', '.join(_ENCODINGS)})"
            )
        headers = [
            (k, v)
            for k, v in response.headers.multi_items()
            if k.lower() not in ("content-encoding", "content-length")
        ]
        return http.Response(
            response.status_code,
            headers=headers,
            stream=_CappedBody(response.stream, encoding, self._cap),
            extensions=response.extensions,
        )

    async def aclose(self) -> None:
        await self._pool.aclose()


def env_proxy(base_url: str) -> str | None:
    """The proxy the environment names for `base_url` (HTTP_PROXY, HTTPS_PROXY, ALL_PROXY and
    NO_PROXY, as the HTTP client would read them), or None.

    base_url: the endpoint's base URL."""
    parts = urllib.parse.urlsplit(base_url)
    if not parts.hostname or urllib.request.proxy_bypass(parts.hostname):
        return None
    proxies = urllib.request.getproxies()
    return proxies.get(parts.scheme) or proxies.get("all")


def http_client(timeout_s: float, base_url: str, cap: int | None = None) -> Any:
    """The HTTP client for one `openai.AsyncOpenAI`: answers capped at `cap` bytes, redirects
    answered as what they are (a 3xx the caller reports), never followed. A proxy the
    environment names is used by the capped transport: the client reads no proxy from the
    environment once it is given a transport, so behind a proxy every call failed to connect.

    timeout_s: each read's timeout, as the openai client would set it; base_url: the endpoint
    (for its proxy); cap: the byte cap (default `MAX_ANSWER_BYTES`, read when the client is
    made)."""
    transport = _CappedTransport(MAX_ANSWER_BYTES if cap is None else cap, env_proxy(base_url))
    return openai.DefaultAsyncHttpxClient(
        transport=transport, timeout=timeout_s, follow_redirects=False, trust_env=False
    )
