"""Bounded retries with exponential backoff for remote judge calls.

Two bounds hold together: at most ``max_attempts`` tries per call, and a wall-clock *deadline* shared by
every call of one judge request (upload, processing wait, generation, repairs). Each try gets
``min(timeout_s, time left)`` as its own timeout, and a backoff sleep that would cross the deadline is
not taken, so a request never runs (much) past ``max_total_s``.
"""

from __future__ import annotations

import logging
import random
import re
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, TypeVar

from worldrecall.core.judges import JudgeError

log = logging.getLogger(__name__)
T = TypeVar("T")

# transport failures worth another try, recognised by class name (httpx / httpx2 / requests / builtins)
_TRANSIENT_NAMES = {
    "TimeoutException",
    "ConnectError",
    "RemoteProtocolError",
    "ReadError",
    "WriteError",
    "TimeoutError",
    "ConnectionError",
    "ConnectTimeout",
    "ReadTimeout",
}


@dataclass
class RetryPolicy:
    """How often and how long one judge request may retry (see the module docstring)."""

    max_attempts: int = 5
    initial_backoff_s: float = 2.0
    max_backoff_s: float = 60.0
    backoff_multiplier: float = 2.0
    jitter: float = 0.1  # fraction of the delay added at random (spreads synchronized clients)
    timeout_s: float = 300.0  # per try
    max_total_s: float = 1200.0  # per judge request, all tries and waits together
    retry_statuses: tuple[int, ...] = field(default=(408, 429, 500, 502, 503, 504))

    def backoff(self, attempt: int) -> float:
        """Delay after failed try number ``attempt`` (1-based), before jitter."""
        return min(self.max_backoff_s, self.initial_backoff_s * self.backoff_multiplier ** (attempt - 1))


class Deadline:
    """A point in time shared by every call of one request."""

    def __init__(self, seconds: float, clock: Callable[[], float] = time.monotonic):
        self.clock = clock
        self.end = clock() + float(seconds)
        self.seconds = float(seconds)

    def left(self) -> float:
        """Seconds until the deadline (negative once passed)."""
        return self.end - self.clock()


def status_of(exc: BaseException) -> int | None:
    """HTTP status carried by an SDK error (``google.genai.errors.APIError.code``), if any."""
    code = getattr(exc, "code", None)
    return code if isinstance(code, int) else None


def is_transient(exc: BaseException, policy: RetryPolicy) -> bool:
    """Retry on the policy's statuses (429, 5xx …) and on timeouts / dropped connections."""
    status = status_of(exc)
    if status is not None:
        return status in policy.retry_statuses
    return any(c.__name__ in _TRANSIENT_NAMES for c in type(exc).__mro__)


def server_retry_delay(exc: BaseException) -> float | None:
    """The ``retryDelay`` a 429 may carry in its RetryInfo detail (e.g. ``"12s"``), in seconds."""
    details = getattr(exc, "details", None)
    try:
        items = details["error"]["details"]  # type: ignore[index]
    except (TypeError, KeyError):
        return None
    for d in items if isinstance(items, list) else []:
        if isinstance(d, dict) and str(d.get("@type", "")).endswith("RetryInfo"):
            m = re.fullmatch(r"\s*([0-9.]+)s\s*", str(d.get("retryDelay", "")))
            if m:
                return float(m.group(1))
    return None


def describe(exc: BaseException) -> str:
    """One line for an error: ``429 RESOURCE_EXHAUSTED: quota`` or ``ReadTimeout: timed out``."""
    status = status_of(exc)
    if status is not None:
        msg = getattr(exc, "message", None) or ""
        return " ".join(f"{status} {getattr(exc, 'status', '') or ''}: {msg}".split())[:300]
    return " ".join(f"{type(exc).__name__}: {exc}".split())[:300]


def call_with_retry(
    fn: Callable[[float], T],
    policy: RetryPolicy,
    deadline: Deadline,
    what: str,
    *,
    sleep: Callable[[float], None] = time.sleep,
    rng: random.Random | None = None,
    redact: Callable[[str], str] = lambda s: s,
) -> tuple[T, int]:
    """Call ``fn(timeout_s)`` until it returns; return (result, tries used).

    Non-transient errors raise :class:`JudgeError` at once; transient ones are retried with exponential
    backoff until ``max_attempts`` or the deadline runs out, then raise :class:`JudgeError` naming the
    last error and how many tries were made.
    """
    rng = rng or random.Random()
    last = "no try made"
    for attempt in range(1, max(1, policy.max_attempts) + 1):
        left = deadline.left()
        if left <= 0:
            raise JudgeError(
                f"{what}: gave up after {attempt - 1} tries, {deadline.seconds:g} s total time "
                f"exhausted (last error: {last})"
            )
        try:
            return fn(max(0.001, min(policy.timeout_s, left))), attempt
        except JudgeError:
            raise
        except Exception as e:  # SDK and transport errors: classify, then retry or give up
            last = redact(describe(e))
            if not is_transient(e, policy):
                raise JudgeError(f"{what}: {last}") from None
            if attempt >= policy.max_attempts:
                break
            delay = policy.backoff(attempt)
            hinted = server_retry_delay(e)
            if hinted is not None:
                delay = min(policy.max_backoff_s, max(delay, hinted))
            delay *= 1.0 + policy.jitter * rng.random()
            if delay >= deadline.left():
                raise JudgeError(
                    f"{what}: gave up after {attempt} tries, next backoff {delay:.1f} s would pass "
                    f"the {deadline.seconds:g} s total time limit (last error: {last})"
                ) from None
            log.info(
                "%s: try %d/%d failed (%s); retrying in %.2f s",
                what,
                attempt,
                policy.max_attempts,
                last,
                delay,
            )
            sleep(delay)
    raise JudgeError(f"{what}: gave up after {policy.max_attempts} tries (last error: {last})")


def wait_until(
    check: Callable[[float], Any],
    deadline: Deadline,
    interval_s: float,
    what: str,
    *,
    sleep: Callable[[float], None] = time.sleep,
) -> Any:
    """Poll ``check(timeout)`` (returns a truthy value when done) every ``interval_s`` until the deadline."""
    while True:
        got = check(max(0.001, deadline.left()))
        if got:
            return got
        if deadline.left() <= interval_s:
            raise JudgeError(f"{what}: not ready within the {deadline.seconds:g} s total time limit")
        sleep(interval_s)
