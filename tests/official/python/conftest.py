"""Fixtures for the official Python client's own test suite (queen-mq, unchanged), run
against our broker by scripts/official-clients.sh.

The sdist ships tests/ without the conftest.py its tests need. Upstream's provides a
`client` fixture (one `Queen` per test, closed after it) and a session fixture that empties
upstream's own tables (`queen.queues`, `queen.seg_*`) with SQL before the run. We keep the
first; the second has no counterpart here, since every run starts on a fresh broker with an
empty data directory, so there is nothing to clean up.

The broker's URL comes from QUEEN_URL (set by the script; the tests that make a client of
their own read QUEEN_URL or QUEEN_SERVER_URL, which the script sets too).

With QUEEN_HTTP_TRACE=FILE every exchange is appended to FILE (method, URL, request body,
status, answer body, each cut to 2,000 characters) under a line naming the test, so a
failure can be reported with what the client sent and what the broker answered. It wraps
httpx's `AsyncClient.send`, beneath the client, whose code is left as it is.
"""

import os

import httpx
import pytest

from queen import Queen

TRACE = os.environ.get("QUEEN_HTTP_TRACE")


def _cut(data: bytes) -> str:
    text = data.decode("utf-8", "replace")
    return text if len(text) <= 2000 else text[:2000] + "..."


if TRACE:
    _send = httpx.AsyncClient.send

    async def _traced_send(self, request, *args, **kwargs):
        response = await _send(self, request, *args, **kwargs)
        try:
            body = _cut(request.content or b"")
        except httpx.RequestNotRead:
            body = "(streamed)"
        try:
            await response.aread()
            answer = _cut(response.content)
        except Exception as error:  # a stream the caller reads itself
            answer = f"(not read: {error})"
        with open(TRACE, "a", encoding="utf-8") as out:
            out.write(f">> {request.method} {request.url} {body}\n<< {response.status_code} {answer}\n")
        return response

    httpx.AsyncClient.send = _traced_send

    @pytest.fixture(autouse=True)
    def _trace_test_name(request):
        with open(TRACE, "a", encoding="utf-8") as out:
            out.write(f"== {request.node.nodeid}\n")
        yield

SERVER_URL = os.environ.get("QUEEN_URL") or os.environ.get("QUEEN_SERVER_URL", "http://localhost:6632")


@pytest.fixture
async def client():
    """One official client per test, pointed at the broker under test."""
    queen = Queen(SERVER_URL)
    try:
        yield queen
    finally:
        await queen.close()
