"""One small exception hierarchy for every backend (cf. httpx._exceptions).

Backends map their library's or server's errors into these at the boundary; drivers turn them
into per-sample failure records. Messages never contain secrets.
"""

from __future__ import annotations

from verification.backends import OptionsError

__all__ = [
    "BackendError",
    "BadInput",
    "EditRefused",
    "OptionsError",
    "PermanentBackendError",
    "ProviderStop",
    "RateLimited",
    "Timeout",
    "TransientBackendError",
]


class BackendError(Exception):
    """A backend could not produce a result for one request."""

    kind: str = "backend_error"
    retryable: bool = False


class TransientBackendError(BackendError):
    """A failure that may go away on retry (5xx, dropped connection)."""

    kind = "transient"
    retryable = True


class RateLimited(TransientBackendError):
    """HTTP 429 or an equivalent quota signal; ``retry_after`` in seconds when the server said."""

    kind = "rate_limited"

    def __init__(self, message: str, retry_after: float | None = None) -> None:
        super().__init__(message)
        self.retry_after = retry_after


class Timeout(TransientBackendError):
    """The request did not complete in time."""

    kind = "timeout"


class PermanentBackendError(BackendError):
    """A failure that a retry will not fix (4xx other than 429, malformed reply after retries)."""

    kind = "permanent"


class BadInput(PermanentBackendError):
    """The input itself is unusable (corrupt, empty or oversized image, empty prompt)."""

    kind = "bad_input"


class EditRefused(PermanentBackendError):
    """The editor declined the edit (moderation, safety filter, unsupported instruction)."""

    kind = "edit_refused"


class ProviderStop(PermanentBackendError):
    """The provider refuses every further paid call, or the run may not pay for one more: no
    credits (BFL 402), an exhausted quota (OpenAI 429 ``insufficient_quota``), or the run's
    ``max_cost_usd`` reached. No retry can fix it and no later sample would fare better, so it is
    no sample's failure: the run stops at once with this one line (``edct run`` exits 3), and
    every finished call stays in the stage cache for a rerun."""

    kind = "provider_stop"

    def line(self) -> str:
        return f"edct: stopped, {self}. Finished calls are cached: rerun the same command to resume."
