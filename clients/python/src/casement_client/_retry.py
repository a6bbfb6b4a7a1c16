"""When to retry a request, and how long to wait first.

Retried: 429 and 503 answers (waiting what their ``Retry-After`` says, when they say) and
failures to connect or a connection dropped before the answer. Not retried: every other
status (a 4xx will fail again; a 409 already waited on the server) and a read timeout (the
server is working on it; a retry would double its load). Searches are reads and events
are fenced by revision, so repeating any request of this API is safe.

Backoff is exponential with full jitter (AWS Architecture Blog, "Exponential Backoff And
Jitter"): before retry ``n`` (1-based) wait a uniform random time in
``[0, min(max_backoff, backoff * 2 ** (n - 1))]``.
"""

from __future__ import annotations

import email.utils
import random
import time
from dataclasses import dataclass
from typing import Optional

import httpx

RETRY_STATUSES = frozenset({429, 503})

#: Transport failures after which the request certainly or very probably did not reach
#: the server's handler, or the answer was lost: safe and useful to retry.
RETRY_EXCEPTIONS: tuple[type[Exception], ...] = (
    httpx.ConnectError,
    httpx.ConnectTimeout,
    httpx.ReadError,
    httpx.WriteError,
    httpx.RemoteProtocolError,
)


@dataclass(frozen=True)
class RetryPolicy:
    """How many times and how patiently to retry. ``RetryPolicy(max_attempts=1)`` never
    retries."""

    #: Requests in all, the first included.
    max_attempts: int = 4
    #: Seconds; the cap of the first backoff, doubled for each later one.
    backoff: float = 0.5
    #: Seconds; no backoff is longer.
    max_backoff: float = 8.0
    #: Seconds; a ``Retry-After`` longer than this is not waited for: the error is raised.
    max_retry_after: float = 60.0

    def __post_init__(self) -> None:
        if self.max_attempts < 1:
            raise ValueError("max_attempts must be at least 1")
        if self.backoff < 0 or self.max_backoff < 0 or self.max_retry_after < 0:
            raise ValueError("backoff, max_backoff and max_retry_after must not be negative")

    def backoff_delay(self, retry: int, rng: Optional[random.Random] = None) -> float:
        """Seconds to wait before retry number ``retry`` (1-based), without a Retry-After."""
        cap = min(self.max_backoff, self.backoff * (2 ** (retry - 1)))
        return (rng or random).uniform(0.0, cap)

    def delay(
        self, retry: int, retry_after: Optional[float], rng: Optional[random.Random] = None
    ) -> Optional[float]:
        """Seconds to wait before retry ``retry``; ``None``: do not retry (the attempts are
        used up, or the server asks for a longer wait than ``max_retry_after``)."""
        if retry >= self.max_attempts:
            return None
        if retry_after is None:
            return self.backoff_delay(retry, rng)
        if retry_after > self.max_retry_after:
            return None
        # At least what the server asked, plus a little jitter so that clients told the
        # same Retry-After do not all come back in the same instant.
        return retry_after + (rng or random).uniform(0.0, min(self.backoff, 1.0) / 4)


def parse_retry_after(value: Optional[str], now: Optional[float] = None) -> Optional[float]:
    """``Retry-After`` as seconds from now: delta-seconds or an HTTP date (RFC 9110 §10.2.3)."""
    if value is None:
        return None
    value = value.strip()
    if value.isdigit():
        return float(value)
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError, IndexError):
        return None
    return max(0.0, when.timestamp() - (time.time() if now is None else now))
