"""The batched driver: runs the sans-IO protocol of many samples in lockstep.

Every round, the driver collects the pending requests of all active samples, answers what the
stage cache already knows, and sends the rest out at once: all target requests as batched
``generate`` calls, and text-LLM, editor and verification requests concurrently on per-role
thread pools. Each finished call is committed to the stage cache before its reply is used, so a
run killed at any point resumes without repeating a finished call.

With ``window=1`` and every concurrency limit at 1 the same driver runs one sample at a time,
which is the baseline of ``benchmarks/bench_driver.py``.
"""

from __future__ import annotations

import json
import logging
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from PIL import Image
from tqdm import tqdm

from edct_task import __version__
from edct_task.engine.protocol import Protocol, ProtocolConfig, sample_protocol
from edct_task.engine.records import SampleInput, SampleRecord
from edct_task.engine.requests import AskLLM, AskTarget, EditedImage, EditImage, Failure, Request, VerifyEdit
from edct_task.engine.stage_cache import ImageStore, StageCache, fingerprint
from edct_task.roles import Roles
from model_adapters.contracts import ChatMessage, Completion, GenerationParams
from model_adapters.errors import BackendError
from model_adapters.images import RESIZE_INFO_KEY as RESIZED_FROM_KEY
from verification.check import EditCheck, GateParams, check_edit

log = logging.getLogger(__name__)

STAGES = ("target", "concepts", "instructions", "edit_parse", "edit", "verify", "judge")


@dataclass(frozen=True)
class Limits:
    """Concurrency per role (requests in flight) and the target batch size."""

    target_batch_size: int = 64
    target_concurrency: int = 1
    """Batches in flight at once (1 for an in-process model; more for HTTP servers)."""
    text_concurrency: int = 16
    editor_concurrency: int = 8
    verify_concurrency: int = 2
    window: int | None = None
    """Samples advanced together; None = all. 1 runs one sample at a time."""

    @classmethod
    def sequential(cls) -> Limits:
        return cls(
            target_batch_size=1,
            target_concurrency=1,
            text_concurrency=1,
            editor_concurrency=1,
            verify_concurrency=1,
            window=1,
        )


@dataclass
class CallStats:
    calls: dict[str, int] = field(default_factory=dict)
    cache_hits: dict[str, int] = field(default_factory=dict)
    failures: dict[str, int] = field(default_factory=dict)
    seconds: dict[str, float] = field(default_factory=dict)

    def add(self, bucket: dict, stage: str, amount: float = 1) -> None:
        bucket[stage] = bucket.get(stage, 0) + amount

    def as_dict(self) -> dict[str, Any]:
        return {
            "calls": self.calls,
            "cache_hits": self.cache_hits,
            "failures": self.failures,
            "seconds": {k: round(v, 3) for k, v in self.seconds.items()},
        }


class _Progress:
    """One tqdm bar per stage; totals grow as requests are issued."""

    def __init__(self, enabled: bool) -> None:
        self.enabled = enabled
        self.bars: dict[str, tqdm] = {}
        self.lock = threading.Lock()

    def issue(self, stage: str, n: int = 1) -> None:
        if not self.enabled:
            return
        with self.lock:
            bar = self.bars.get(stage)
            if bar is None:
                bar = self.bars[stage] = tqdm(
                    total=0,
                    desc=f"{stage:>12}",
                    position=STAGES.index(stage),
                    leave=True,
                    dynamic_ncols=True,
                    unit="req",
                )
            bar.total += n
            bar.refresh()

    def done(self, stage: str, n: int = 1) -> None:
        if self.enabled:
            with self.lock:
                self.bars[stage].update(n)

    def close(self) -> None:
        for bar in self.bars.values():
            bar.close()


def _identity(backend: Any) -> dict[str, Any]:
    """A backend's identity for cache keys; mask providers may not define ``identity``."""
    identity = getattr(backend, "identity", None)
    return identity() if callable(identity) else {"name": backend.name}


class Dispatcher:
    """Answers requests: cache first, then the role's backend; failures become ``Failure``."""

    def __init__(
        self,
        roles: Roles,
        images: ImageStore,
        cache: StageCache | None,
        *,
        protocol: ProtocolConfig,
        gate: GateParams,
        limits: Limits,
        call_log: Path | None = None,
        progress: bool = False,
    ) -> None:
        self.roles = roles
        self.images = images
        self.cache = cache
        self.protocol = protocol
        self.gate = gate
        self.limits = limits
        self.stats = CallStats()
        self.progress = _Progress(progress)
        self._call_log = call_log.open("a", encoding="utf-8") if call_log else None
        self._lock = threading.Lock()
        self._pools = {
            "target": ThreadPoolExecutor(limits.target_concurrency, thread_name_prefix="edct-target"),
            "text": ThreadPoolExecutor(limits.text_concurrency, thread_name_prefix="edct-llm"),
            "edit": ThreadPoolExecutor(limits.editor_concurrency, thread_name_prefix="edct-edit"),
            "verify": ThreadPoolExecutor(limits.verify_concurrency, thread_name_prefix="edct-verify"),
        }
        self._pil: OrderedDict[str, Image.Image] = OrderedDict()
        self.identities = {
            "target": roles.target.identity() if roles.target else None,
            "extractor": roles.extractor.identity(),
            "judge": [judge.identity() for judge in roles.judges],
            "edit_parser": roles.edit_parser.identity() if roles.edit_parser else None,
            "editor": roles.editor.identity(),
            "detector": _identity(roles.detector),
        }

    # -- keys -----------------------------------------------------------------------------------
    def target_params(self) -> GenerationParams:
        return GenerationParams(max_new_tokens=self.protocol.max_new_tokens, seed=self.protocol.seed)

    def key(self, request: Request) -> str:
        """The cache key: everything that changes the output, nothing that does not."""
        if isinstance(request, AskTarget):
            payload: dict[str, Any] = {
                "kind": "target",
                "backend": self.identities["target"],
                "params": self.target_params().as_dict(),
                "conversation": [[m.role, m.text, list(m.images)] for m in request.conversation],
            }
        elif isinstance(request, AskLLM):
            payload = {
                "kind": "llm",
                "role": request.role,
                "backend": self._text_identity(request),
                "template": request.template,
                "prompt": request.prompt,
                "params": self._llm_params(request).as_dict(),
            }
        elif isinstance(request, EditImage):
            payload = {
                "kind": "edit",
                "backend": self.identities["editor"],
                "image": request.image,
                "instruction": request.instruction,
                "seed": request.seed,
                "attempt": request.attempt,
            }
        else:
            payload = {
                "kind": "verify",
                "code": __version__,
                "detector": self.identities["detector"],
                "gate": self.gate.model_dump(mode="json"),
                "original": request.original,
                "edited": request.edited,
                "edit_type": request.edit_type,
                "target": request.target,
            }
        return fingerprint(payload)

    def _text_identity(self, request: AskLLM) -> Any:
        if request.role == "judge":
            return self.identities["judge"][request.member]
        return self.identities[request.role]

    def _llm_params(self, request: AskLLM) -> GenerationParams:
        return GenerationParams(
            max_new_tokens=request.max_new_tokens,
            temperature=request.temperature,
            seed=self.protocol.seed + request.sample,
        )

    # -- resolution -----------------------------------------------------------------------------
    def resolve(self, requests: Sequence[Request]) -> list[object]:
        """Replies for ``requests``, in order.

        Identical requests in one round (same cache key, e.g. the same judge prompt for two
        samples) are sent once; the twins are counted as cache hits.
        """
        replies: list[object] = [None] * len(requests)
        futures: list[tuple[list[int], Future]] = []
        target_misses: list[int] = []
        waiting: dict[str, list[int]] = {}  # key -> indices answered by the one call in flight
        keys: list[str] = []
        for i, request in enumerate(requests):
            stage = request.stage
            self.progress.issue(stage)
            key = self.key(request)
            keys.append(key)
            if key in waiting:
                waiting[key].append(i)
                self.stats.add(self.stats.cache_hits, stage)
                self.progress.done(stage)
                continue
            cached = self.cache.get(key) if self.cache is not None else None
            if cached is not None:
                replies[i] = self._decode(request, cached)
                self.stats.add(self.stats.cache_hits, stage)
                self.progress.done(stage)
                continue
            waiting[key] = [i]
            if isinstance(request, AskTarget):
                target_misses.append(i)
            else:
                pool = {AskLLM: "text", EditImage: "edit", VerifyEdit: "verify"}[type(request)]
                futures.append(([i], self._pools[pool].submit(self._call_one, request, key)))
        size = max(1, self.limits.target_batch_size)
        for start in range(0, len(target_misses), size):
            idx = target_misses[start : start + size]
            batch = [requests[i] for i in idx]
            futures.append(
                (idx, self._pools["target"].submit(self._call_target, batch, [keys[i] for i in idx]))
            )
        for idx, future in futures:
            result = future.result()
            for i, reply in zip(idx, result if isinstance(result, list) else [result], strict=True):
                for j in waiting[keys[i]]:
                    replies[j] = reply
        return replies

    def _decode(self, request: Request, value: dict[str, Any]) -> object:
        if isinstance(request, VerifyEdit):
            return EditCheck.model_validate(value["check"])
        if isinstance(request, EditImage):
            return EditedImage(value["image"], value.get("resized_from"))
        return value["text"]

    def _store(self, request: Request, key: str, value: dict[str, Any], seconds: float) -> None:
        stage = request.stage
        if self.cache is not None:
            self.cache.put(key, value, stage=stage)
        with self._lock:
            self.stats.add(self.stats.calls, stage)
            self.stats.add(self.stats.seconds, stage, seconds)
            if self._call_log is not None:
                self._call_log.write(
                    json.dumps({"key": key, "stage": stage, "seconds": round(seconds, 4)}) + "\n"
                )
                self._call_log.flush()
        self.progress.done(stage)

    def _failed(self, request: Request, exc: BaseException) -> Failure:
        with self._lock:
            self.stats.add(self.stats.failures, request.stage)
        self.progress.done(request.stage)
        if isinstance(exc, BackendError):
            return Failure(exc.kind, str(exc))
        log.warning("%s request failed with an unexpected %s: %s", request.stage, type(exc).__name__, exc)
        return Failure("internal_error", f"{type(exc).__name__}: {exc}")

    def image(self, ref: str) -> Image.Image:
        with self._lock:
            if ref in self._pil:
                self._pil.move_to_end(ref)
                return self._pil[ref]
        img = self.images.get(ref)
        with self._lock:
            self._pil[ref] = img
            while len(self._pil) > 256:
                self._pil.popitem(last=False)
        return img

    def _call_target(self, batch: list[AskTarget], keys: list[str]) -> list[object]:
        conversations = [
            [ChatMessage(m.role, m.text, tuple(self.image(r) for r in m.images)) for m in req.conversation]
            for req in batch
        ]
        start = time.perf_counter()
        try:
            if self.roles.target is None:
                raise BackendError("no target model configured in this driver")
            outputs = self.roles.target.generate(conversations, self.target_params())
            if len(outputs) != len(batch):
                raise BackendError(f"target returned {len(outputs)} replies for {len(batch)} conversations")
        except Exception as exc:  # the whole batch failed
            return [self._failed(req, exc) for req in batch]
        per_item = (time.perf_counter() - start) / len(batch)
        replies: list[object] = []
        for req, key, out in zip(batch, keys, outputs, strict=True):
            if isinstance(out, Exception):
                replies.append(self._failed(req, out))
            elif not isinstance(out, Completion):
                replies.append(self._failed(req, BackendError(f"target returned {type(out).__name__}")))
            else:
                self._store(req, key, {"text": out.text, "reasoning": out.reasoning}, per_item)
                replies.append(out.text)
        return replies

    def _call_one(self, request: Request, key: str) -> object:
        start = time.perf_counter()
        try:
            if isinstance(request, AskLLM):
                model = self.roles.text_model(request.role, request.member)
                completion = model.complete(request.prompt, self._llm_params(request))
                if not isinstance(completion, Completion):
                    raise BackendError(f"{request.role} returned {type(completion).__name__}, not text")
                value: dict[str, Any] = {"text": completion.text, "reasoning": completion.reasoning}
                reply: object = completion.text
            elif isinstance(request, EditImage):
                edited = self.roles.editor.edit(
                    self.image(request.image), request.instruction, seed=request.seed
                )
                ref = self.images.put(edited)
                resized = edited.info.get(RESIZED_FROM_KEY)
                value = {"image": ref, "resized_from": resized}
                reply = EditedImage(ref, resized)
            else:
                assert isinstance(request, VerifyEdit)
                check = check_edit(
                    self.image(request.original),
                    self.image(request.edited),
                    edit_type=request.edit_type,
                    target=request.target,
                    locator=self.roles.detector,
                    params=self.gate,
                )
                value, reply = {"check": check.model_dump(mode="json")}, check
        except Exception as exc:
            return self._failed(request, exc)
        self._store(request, key, value, time.perf_counter() - start)
        return reply

    def close(self) -> None:
        for pool in self._pools.values():
            pool.shutdown(wait=True)
        self.progress.close()
        if self._call_log is not None:
            self._call_log.close()


def run_lockstep(
    samples: Iterable[SampleInput],
    protocol: ProtocolConfig,
    dispatcher: Dispatcher,
    *,
    window: int | None = None,
    on_record: Callable[[SampleRecord], None] | None = None,
) -> list[SampleRecord]:
    """Advance every sample's protocol in lockstep, ``window`` samples at a time (None = all)."""
    queue = list(samples)
    order = {s.id: i for i, s in enumerate(queue)}
    records: dict[str, SampleRecord] = {}
    active: dict[str, tuple[Protocol, tuple[Request, ...]]] = {}
    limit = window or len(queue) or 1
    samples_by_id = {s.id: s for s in queue}

    def finished(record: SampleRecord) -> None:
        records[record.sample.id] = record
        if on_record is not None:
            on_record(record)

    def admit() -> None:
        while queue and len(active) < limit:
            sample = queue.pop(0)
            gen = sample_protocol(sample, protocol)
            active[sample.id] = (gen, next(gen))

    admit()
    while active:
        flat = [(sid, req) for sid, (_, reqs) in active.items() for req in reqs]
        replies = dispatcher.resolve([req for _, req in flat])
        by_sample: dict[str, list[object]] = {}
        for (sid, _), reply in zip(flat, replies, strict=True):
            by_sample.setdefault(sid, []).append(reply)
        for sid, sample_replies in by_sample.items():
            gen, _ = active[sid]
            try:
                active[sid] = (gen, gen.send(tuple(sample_replies)))
            except StopIteration as stop:
                del active[sid]
                finished(stop.value)
            except Exception as exc:  # a bug must cost one sample, not the run
                log.exception("sample %s: protocol error", sid)
                del active[sid]
                finished(
                    SampleRecord(
                        sample=samples_by_id[sid],
                        status="error",
                        reason=f"internal error: {type(exc).__name__}: {exc}",
                    )
                )
        admit()
    return sorted(records.values(), key=lambda r: order[r.sample.id])
