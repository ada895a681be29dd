"""Fixtures for the official Python client's own test suite (queen-mq, unchanged), run
against our broker by scripts/official-clients.sh.

The sdist ships tests/ without the conftest.py its tests need. Upstream's provides a
`client` fixture (one `Queen` per test, closed after it) and a session fixture that empties
upstream's own tables (`queen.queues`, `queen.seg_*`) with SQL before the run. We keep the
first; the second has no counterpart here, since every run starts on a fresh broker with an
empty data directory, so there is nothing to clean up.

The broker's URL comes from QUEEN_URL (set by the script; the tests that make a client of
their own read QUEEN_URL or QUEEN_SERVER_URL, which the script sets too).
"""

import os

import pytest

from queen import Queen

SERVER_URL = os.environ.get("QUEEN_URL") or os.environ.get("QUEEN_SERVER_URL", "http://localhost:6632")


@pytest.fixture
async def client():
    """One official client per test, pointed at the broker under test."""
    queen = Queen(SERVER_URL)
    try:
        yield queen
    finally:
        await queen.close()
