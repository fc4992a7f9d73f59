"""Black Forest Labs API editor: FLUX.2 [pro|max|flex|klein-4b|klein-9b] and FLUX.1 Kontext [pro|max].

Submit ``POST <base>/v1/<model>`` with the prompt and the image (base64) → ``{id, polling_url,
cost}``; poll the returned polling URL as given (it is regional, e.g. ``api.eu2.bfl.ai``; with the
``x-key`` header when it is on BFL's domain) until ``Ready``, then download ``result.sample`` at once,
*without* the key and following redirects (a delivery URL; BFL's official client does the same).
Statuses as BFL's official client reads them (``src/bfl/_jobs.py``): ``Pending`` keeps polling;
``Request Moderated`` / ``Content Moderated`` raise ``EditRefused``; ``Error`` is the job's failure;
``Task not found`` (HTTP 200 with that status) means the job is gone; any other status is raised at
once, never polled to the timeout.

A paid call is made once. The submit is retried only where BFL certainly did not take it (429,
a connection never made); after a 5xx or a read timeout it is not re-sent (``SubmitUncertain``).
A job is submitted again only when BFL says it is gone (``Task not found``), at most
``job_attempts - 1`` times, each counted (``resubmits``) and its cost added (the cost ceiling,
``max_cost_usd``, reads it: ``model_adapters.cost_ceiling``). HTTP 402 (no credits) stops the run
(``ProviderStop``, exit 3).

Across runs, a submit's outcome is looked up before the request is paid for again
(``job_journal``: ``model_adapters.job_journal``; ``edct run`` keeps it in its cache folder): a
rerun polls the job a killed or cut-off run had submitted (``lookups``), and a submit whose reply
never came (``SubmitUncertain``) is not re-sent by the rerun either.

``prompt_upsampling`` (FLUX.2 pro/max/flex default ``true``: BFL rewrites the edit instruction
server-side) is sent as ``false`` to the models that have it, unless ``extra`` sets it; the
identity records the value sent.

Options::

    model: flux-2-max            # or flux-2-pro, flux-2-flex, flux-2-klein-9b, flux-kontext-pro, …
    api_key_env: BFL_API_KEY     # default BFL_API_KEY
    base_url: https://api.bfl.ai
    send_size: true              # FLUX.2: ask for the input's size (rounded to multiples of 16)
    extra: {safety_tolerance: 2, output_format: png}
    poll_interval_s: 0.5         # first poll wait; grows ×1.5 up to poll_max_interval_s
    poll_max_interval_s: 4.0
    poll_timeout_s: 600
    job_attempts: 2              # submissions per edit when BFL says the job is gone
    job_journal: null            # file of submitted jobs (edct run: <cache>/paid_jobs/bfl.jsonl)
    max_cost_usd: null           # the run's ceiling on this role's reported cost (cost_ceiling)
    concurrency: 8               # BFL allows 24 tasks in flight per account (shared by every run on the key)
    timeout_s: 120
    max_retries: 6
"""

from __future__ import annotations

import base64
import copy
import time
import urllib.parse
from collections.abc import Callable, Mapping
from typing import Any

from PIL import Image
from pydantic import Field

from model_adapters.errors import (
    EditRefused,
    OptionsError,
    PermanentBackendError,
    TransientBackendError,
)
from model_adapters.errors import Timeout as BackendTimeout
from model_adapters.images import decode_image, png_bytes
from model_adapters.job_journal import JobJournal, request_key
from model_adapters.remote_editor import EditorHttpOptions, EditorUsage, HttpCaller, SubmitUncertain, finish
from model_adapters.transport import MalformedReply, check_base_url, secret_from_env
from verification.backends import check_options


class BFLOptions(EditorHttpOptions):
    """``bfl``: Black Forest Labs' API (FLUX.2, FLUX.1 Kontext)."""

    model: str | None = Field(
        None, description="flux-2-max, flux-2-pro, flux-2-flex, flux-kontext-pro, … (required)."
    )
    api_key_env: str | None = Field("BFL_API_KEY", description="The environment variable holding the key.")
    base_url: str | None = Field("https://api.bfl.ai", description="BFL's API root.")
    send_size: bool | None = Field(None, description="Ask for the input's size (default: FLUX.2 models).")
    extra: dict[str, Any] | None = Field(None, description="More request fields, e.g. {safety_tolerance: 2}.")
    poll_interval_s: float = Field(0.5, description="First poll wait; grows x1.5 up to poll_max_interval_s.")
    poll_max_interval_s: float = Field(4.0, description="Longest poll wait.")
    poll_timeout_s: float = Field(600.0, description="Seconds a job may stay pending.")
    job_attempts: int = Field(2, description="Submissions per edit when BFL says the job is gone.")
    job_journal: str | None = Field(
        None,
        description="File recording each paid submit's job (edct run: <cache>/paid_jobs/bfl.jsonl): a "
        "rerun polls a job submitted before instead of paying for it again.",
    )


MODERATED = ("Request Moderated", "Content Moderated")
UPSAMPLING_MODELS = ("flux-2-pro", "flux-2-max", "flux-2-flex", "flux-kontext-pro", "flux-kontext-max")
"""Models whose request takes ``prompt_upsampling`` (BFL API reference; FLUX.2 default ``true``)."""


class _JobLost(TransientBackendError):
    """BFL says the job is gone (``Task not found``): it may be submitted again."""


class BFLEditor:
    """An ImageEditor on the BFL API."""

    backend = "bfl"

    def __init__(
        self,
        model: str,
        api_key: str,
        *,
        base_url: str = "https://api.bfl.ai",
        send_size: bool | None = None,
        extra: Mapping[str, Any] | None = None,
        poll_interval_s: float = 0.5,
        poll_max_interval_s: float = 4.0,
        poll_timeout_s: float = 600.0,
        job_attempts: int = 2,
        journal: JobJournal | None = None,
        caller: HttpCaller,
        sleep: Callable[[float], None] = time.sleep,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.model = model
        self.name = f"bfl:{model}"
        self._key = api_key
        self.base_url = base_url.rstrip("/")
        self.send_size = model.startswith("flux-2") if send_size is None else bool(send_size)
        self.extra = dict(extra or {})
        if model.startswith(UPSAMPLING_MODELS):
            self.extra.setdefault("prompt_upsampling", False)
        self.poll_interval_s = poll_interval_s
        self.poll_max_interval_s = poll_max_interval_s
        self.poll_timeout_s = poll_timeout_s
        self.job_attempts = max(1, job_attempts)
        self.journal = journal
        self.caller = caller
        self.sleep = sleep
        self.clock = clock
        self.stats = EditorUsage.of(caller)

    def identity(self) -> dict[str, Any]:
        return {
            "backend": self.backend,
            "model": self.model,
            "send_size": self.send_size,
            "prompt_upsampling": self.extra.get("prompt_upsampling"),
            "extra": copy.deepcopy(self.extra),
        }

    def usage(self) -> dict[str, Any]:
        return {"backend": self.backend, "model": self.model, **self.stats.as_dict()}

    def edit(self, image: Image.Image, instruction: str, *, seed: int) -> Image.Image:
        body: dict[str, Any] = {
            "prompt": instruction,
            "input_image": base64.b64encode(png_bytes(image)).decode(),
            "seed": int(seed),
            "output_format": "png",
            **copy.deepcopy(self.extra),
        }
        if self.send_size:
            body.setdefault("width", _multiple_of_16(image.width))
            body.setdefault("height", _multiple_of_16(image.height))
        with self.stats.counting_failures():
            for job in range(self.job_attempts):
                try:
                    return finish(self._job(body), image, self.stats)
                except _JobLost as exc:
                    if job + 1 >= self.job_attempts:
                        raise PermanentBackendError(
                            f"{exc}; not submitted again (job_attempts: {self.job_attempts})"
                        ) from None
                    self.stats.add("resubmits")
        raise AssertionError("unreachable")

    def _submit(self, body: dict[str, Any], headers: dict[str, str]) -> tuple[str, str]:
        """The job of this request: the one a journal recorded (looked up, not paid again), else
        a new submit, recorded before it is polled."""
        key = request_key(self.model, body)
        known = self.journal.get(key) if self.journal is not None else None
        if known is not None and known.get("status") == "submitted":
            self.stats.add("lookups")
            return str(known["id"]), str(known["polling_url"])
        if known is not None and known.get("status") == "uncertain":
            raise SubmitUncertain(
                f"BFL {self.model}: this edit was submitted before and its reply never came (it may "
                f"have been billed); not re-sent: remove its line from {self.journal.path} to pay again"
            )
        try:
            submitted = self.caller.request_json(
                "POST",
                f"{self.base_url}/v1/{self.model}",
                "BFL submit",
                paid=True,
                json=body,
                headers=headers,
            )
        except SubmitUncertain:
            if self.journal is not None:
                self.journal.put(key, "uncertain")
            raise
        if not isinstance(submitted, dict) or not submitted.get("id"):
            raise MalformedReply("BFL submit: reply has no job id")
        self.stats.add_cost(_credits_usd(submitted.get("cost")))
        job_id = str(submitted["id"])
        polling_url = str(submitted.get("polling_url") or f"{self.base_url}/v1/get_result?id={job_id}")
        if self.journal is not None:
            self.journal.put(key, "submitted", id=job_id, polling_url=polling_url)
        return job_id, polling_url

    def _job(self, body: dict[str, Any]) -> Image.Image:
        headers = {"x-key": self._key, "accept": "application/json"}
        job_id, polling_url = self._submit(body, headers)
        poll_headers = headers if _same_site(polling_url, self.base_url) else {"accept": "application/json"}
        deadline = self.clock() + self.poll_timeout_s
        wait = self.poll_interval_s
        while True:
            self.sleep(wait)
            wait = min(self.poll_max_interval_s, wait * 1.5)
            self.stats.add("polls")
            result = self.caller.request_json("GET", polling_url, "BFL poll", headers=poll_headers)
            status = result.get("status") if isinstance(result, dict) else None
            if status == "Ready":
                sample = (result.get("result") or {}).get("sample")
                if not isinstance(sample, str):
                    raise MalformedReply("BFL poll: Ready without result.sample")
                return self._download(sample)
            if status in MODERATED:
                raise EditRefused(f"BFL {self.model}: {status}{_reason(result)}")
            if status == "Task not found":
                if self.journal is not None:
                    self.journal.put(request_key(self.model, body), "lost", id=job_id)
                raise _JobLost(f"BFL {self.model}: job {job_id}: Task not found{_reason(result)}")
            if status == "Error":
                raise PermanentBackendError(f"BFL {self.model}: job {job_id} failed (Error){_reason(result)}")
            if status != "Pending":
                raise PermanentBackendError(  # like BFL's client: surfaced at once, never polled on
                    f"BFL {self.model}: job {job_id}: unknown status {status!r}{_reason(result)}"
                )
            if self.clock() > deadline:
                raise BackendTimeout(
                    f"BFL {self.model}: job still {status!r} after {self.poll_timeout_s:.0f} s"
                )

    def _download(self, url: str) -> Image.Image:
        try:
            response = self.caller.request("GET", url, "BFL download", follow_redirects=True)
        except PermanentBackendError as exc:  # 403/404: the signed URL expired (they last ~10 minutes)
            raise PermanentBackendError(
                f"BFL download failed ({str(exc).split(':')[-1].strip()[:80]}): the delivery URL "
                "may have expired; the job is not submitted again"
            ) from None
        return decode_image(response.content, source="BFL result")

    def close(self) -> None:
        self.caller.close()


def _multiple_of_16(n: int) -> int:
    return int(min(2048, max(256, round(n / 16) * 16)))


def _same_site(url: str, base: str) -> bool:
    a, b = urllib.parse.urlsplit(url).hostname or "", urllib.parse.urlsplit(base).hostname or ""
    if a == b:
        return True
    return a.count(".") >= 1 and b.count(".") >= 1 and a.split(".")[-2:] == b.split(".")[-2:]


def _reason(result: object) -> str:
    if not isinstance(result, dict):
        return ""
    details = result.get("details") or result.get("error") or result.get("result")
    return f" ({str(details)[:200]})" if details else ""


def _credits_usd(cost: object) -> float | None:
    """BFL reports ``cost`` in credits (1 credit = 0.01 USD)."""
    return float(cost) * 0.01 if isinstance(cost, (int, float)) and not isinstance(cost, bool) else None


def from_options(
    options: Mapping[str, Any],
    *,
    sleep: Callable[[float], None] = time.sleep,
    clock: Callable[[], float] = time.monotonic,
) -> BFLEditor:
    check_options(BFLOptions, options, "backend 'bfl'")
    model = options.get("model")
    if not isinstance(model, str) or not model or "/" in model:
        raise OptionsError("backend 'bfl' needs model: e.g. flux-2-max, flux-2-pro, flux-kontext-pro")
    key = secret_from_env(options, "bfl", default_env="BFL_API_KEY", required=True)
    assert key is not None
    extra = options.get("extra") or {}
    if not isinstance(extra, Mapping) or {"prompt", "input_image", "seed"} & set(extra):
        raise OptionsError("bfl: extra must be a mapping and may not set prompt, input_image or seed")
    caller = HttpCaller.from_options(options, key, timeout_s=120, sleep=sleep, concurrency=8)
    return BFLEditor(
        model,
        key,
        base_url=check_base_url(options.get("base_url", "https://api.bfl.ai"), "bfl"),
        send_size=options.get("send_size"),
        extra=extra,
        poll_interval_s=float(options.get("poll_interval_s", 0.5)),
        poll_max_interval_s=float(options.get("poll_max_interval_s", 4.0)),
        poll_timeout_s=float(options.get("poll_timeout_s", 600)),
        job_attempts=int(options.get("job_attempts", 2)),
        journal=JobJournal(options["job_journal"]) if options.get("job_journal") else None,
        caller=caller,
        sleep=sleep,
        clock=clock,
    )
