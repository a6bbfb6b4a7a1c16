"""Retries, backoff and error mapping against a scripted local HTTP server: what a healthy
Casement rarely does (503 with Retry-After, 429, dropped connections)."""

from __future__ import annotations

import random
import time
from email.utils import formatdate

import pytest
from conftest import Reply, ScriptedServer, free_port, window_json

from casement_client import (
    AsyncClient,
    CasementConnectionError,
    Client,
    InvalidRequestError,
    RateLimitedError,
    RetryPolicy,
    UnavailableError,
)
from casement_client._retry import parse_retry_after

FAST = RetryPolicy(max_attempts=3, backoff=0.01, max_backoff=0.05)
OK = Reply(200, {"windows": [window_json()], "reranker": None})


def unavailable(retry_after: str) -> Reply:
    return Reply(
        503,
        {"error": {"code": "unavailable", "message": "store: busy"}},
        {"retry-after": retry_after},
    )


def test_503_is_retried_after_waiting_its_retry_after_then_succeeds(scripted: ScriptedServer) -> None:
    scripted.replies = [unavailable("1"), OK]
    with Client(scripted.url, retry=FAST) as client:
        started = time.monotonic()
        answer = client.search("reset my vpn token")
    assert [w.doc_id for w in answer.windows] == ["kb/vpn"]
    assert len(scripted.requests) == 2
    waited = scripted.requests[1].at - scripted.requests[0].at
    assert waited >= 1.0, f"retried after {waited:.3f} s, before the Retry-After of 1 s"
    assert time.monotonic() - started < 5
    assert scripted.requests[0].body == scripted.requests[1].body == {"query": "reset my vpn token"}


def test_503_gives_up_after_the_configured_attempts_with_the_servers_message(scripted: ScriptedServer) -> None:
    scripted.replies = [unavailable("0")]
    with Client(scripted.url, retry=FAST) as client, pytest.raises(UnavailableError) as raised:
        client.search("reset my vpn token")
    assert len(scripted.requests) == 3
    error = raised.value
    assert (error.status_code, error.code, error.message, error.attempts) == (503, "unavailable", "store: busy", 3)


def test_retry_after_longer_than_max_retry_after_is_not_waited_for(scripted: ScriptedServer) -> None:
    scripted.replies = [unavailable("120"), OK]
    policy = RetryPolicy(max_attempts=3, backoff=0.01, max_retry_after=10)
    with Client(scripted.url, retry=policy) as client, pytest.raises(UnavailableError):
        client.search("reset my vpn token")
    assert len(scripted.requests) == 1


def test_429_without_retry_after_backs_off_and_retries(scripted: ScriptedServer) -> None:
    limited = Reply(429, {"error": {"code": "rate_limited", "message": "slow down"}})
    scripted.replies = [limited, limited, OK]
    with Client(scripted.url, retry=FAST) as client:
        assert client.search("vpn").windows[0].doc_id == "kb/vpn"
    assert len(scripted.requests) == 3
    scripted.replies, scripted.requests = [limited], []
    with Client(scripted.url, retry=FAST) as client, pytest.raises(RateLimitedError) as raised:
        client.search("vpn")
    assert raised.value.message == "slow down" and len(scripted.requests) == 3


def test_a_dropped_connection_is_retried(scripted: ScriptedServer) -> None:
    scripted.replies = [Reply(drop=True), OK]
    with Client(scripted.url, retry=FAST) as client:
        assert client.search("vpn").windows[0].doc_id == "kb/vpn"
    assert len(scripted.requests) == 2


def test_connection_refused_is_retried_then_raises_connection_error() -> None:
    with Client(f"http://127.0.0.1:{free_port()}", retry=FAST) as client:
        with pytest.raises(CasementConnectionError) as raised:
            client.search("vpn")
    assert raised.value.attempts == 3


def test_4xx_is_not_retried(scripted: ScriptedServer) -> None:
    scripted.replies = [Reply(422, {"error": {"code": "invalid_request", "message": "top_k = 0 must be between 1 and 50"}})]
    with Client(scripted.url, retry=FAST) as client, pytest.raises(InvalidRequestError):
        client.search("vpn", top_k=0)
    assert len(scripted.requests) == 1


def test_retry_policy_of_one_attempt_never_retries(scripted: ScriptedServer) -> None:
    scripted.replies = [unavailable("0"), OK]
    with Client(scripted.url, retry=RetryPolicy(max_attempts=1)) as client, pytest.raises(UnavailableError):
        client.search("vpn")
    assert len(scripted.requests) == 1


@pytest.mark.anyio
async def test_async_client_retries_503_honouring_retry_after(scripted: ScriptedServer) -> None:
    scripted.replies = [unavailable("1"), OK]
    async with AsyncClient(scripted.url, retry=FAST) as client:
        answer = await client.search("reset my vpn token")
    assert answer.windows[0].doc_id == "kb/vpn"
    assert len(scripted.requests) == 2
    assert scripted.requests[1].at - scripted.requests[0].at >= 1.0


@pytest.mark.anyio
async def test_async_client_gives_up_after_the_configured_attempts(scripted: ScriptedServer) -> None:
    scripted.replies = [unavailable("0")]
    async with AsyncClient(scripted.url, retry=FAST) as client:
        with pytest.raises(UnavailableError) as raised:
            await client.search("vpn")
    assert raised.value.attempts == 3 and len(scripted.requests) == 3


def test_backoff_is_exponential_capped_and_jittered() -> None:
    policy = RetryPolicy(max_attempts=10, backoff=0.5, max_backoff=4.0)
    rng = random.Random(7)
    for retry, cap in [(1, 0.5), (2, 1.0), (3, 2.0), (4, 4.0), (5, 4.0), (9, 4.0)]:
        delays = [policy.backoff_delay(retry, rng) for _ in range(200)]
        assert all(0.0 <= d <= cap for d in delays)
        assert max(delays) > 0.8 * cap, "the whole range is used"
        assert len(set(delays)) > 150, "jittered, not one fixed delay"
    assert policy.delay(10, None) is None, "no retry after the last attempt"
    assert 3.0 <= policy.delay(1, 3.0, rng) <= 3.125  # type: ignore[operator]


def test_retry_after_is_read_as_seconds_or_an_http_date() -> None:
    assert parse_retry_after("5") == 5.0
    assert parse_retry_after(None) is None and parse_retry_after("soon") is None
    now = time.time()
    date = formatdate(now + 30, usegmt=True)
    assert 28.0 <= parse_retry_after(date, now=now) <= 31.0  # type: ignore[operator]
    assert parse_retry_after(formatdate(now - 30, usegmt=True), now=now) == 0.0
