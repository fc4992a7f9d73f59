"""Request handlers: one per request type, in one table (cf. h11's transition tables).

A handler knows, for its request type, the stage it counts under, the pool and batch size it
runs with, what goes into the cache key (everything that changes the output, nothing that does
not), how to call the role's backend, and how its reply is written to and read from the stage
cache. It never raises: a failed request becomes a ``Failure`` (our error kinds come from
``model_adapters.errors``). ``handler_table`` is the whole list; adding a request kind is one
request class in ``requests.py``, one handler here and one entry in the table.
"""

from __future__ import annotations

import logging
import threading
from collections import OrderedDict
from collections.abc import Sequence
from typing import Any, Generic, Protocol, TypeVar, runtime_checkable

from PIL import Image

from edct_task import __version__
from edct_task.core.requests import AskLLM, AskTarget, EditedImage, EditImage, Failure, Request, VerifyEdit
from edct_task.engine.protocol import ProtocolConfig
from edct_task.engine.redact import Redactor
from edct_task.engine.stage_cache import ImageStore
from edct_task.engine.storage import storage_error
from edct_task.reply_schemas import reply_schema
from model_adapters.contracts import (
    ChatMessage,
    Completion,
    GenerationParams,
    ImageEditor,
    TextModel,
    VisionChatModel,
)
from model_adapters.errors import BackendError, ProviderStop
from model_adapters.images import RESIZE_INFO_KEY
from verification.check import EditCheck, check_edit
from verification.gate import GateParams
from verification.localization import MaskProvider

log = logging.getLogger(__name__)

R = TypeVar("R", bound=Request, contravariant=True)


class Backends(Protocol):
    """What the handlers need of a run's live backends (``edct_task.roles.Roles`` is one)."""

    target: VisionChatModel | None
    editor: ImageEditor
    detector: MaskProvider

    def text_model(self, role: str, member: int = 0) -> TextModel: ...
    def identities(self) -> dict[str, Any]: ...


class Handler(Protocol, Generic[R]):
    pool: str
    """Executor the calls run on (``target``, ``text``, ``edit``, ``verify``)."""
    batch_size: int
    """Requests per call (1 for one-at-a-time backends)."""

    def stage(self, request: R) -> str: ...
    def key(self, request: R) -> dict[str, Any]: ...
    def call(self, batch: Sequence[R]) -> list[object]: ...
    def encode(self, reply: object) -> dict[str, Any]: ...
    def decode(self, value: dict[str, Any]) -> object: ...


@runtime_checkable
class Finishing(Protocol):
    """A handler whose call has a local part that need not hold the backend's slot: ``call`` is
    the backend (it holds a slot of the handler's pool), ``finish(batch, raw)`` turns its replies
    into the handler's replies afterwards, on the dispatcher's local pool (storing an edited
    image: PNG encoding, hashing and writing take ~10 ms of CPU per edit, and an editor pool
    limited to 8 calls in flight would otherwise wait for them)."""

    def finish(self, batch: Sequence[Any], raw: list[object]) -> list[object]: ...


def failure(stage: str, exc: BaseException) -> Failure:
    """An exception from a backend call as our ``Failure`` (unknown kinds are logged).

    A full or read-only disk is no sample's failure: it is raised as ``StorageError`` and stops
    the run; so is a provider's refusal of every further paid call (``ProviderStop``: no credits,
    an exhausted quota, the run's cost ceiling)."""
    stop = storage_error(exc)
    if stop is not None:
        raise stop from exc
    if isinstance(exc, ProviderStop):
        raise exc
    if isinstance(exc, BackendError):
        return Failure(exc.kind, str(exc))
    log.warning("%s request failed with an unexpected %s: %s", stage, type(exc).__name__, exc)
    return Failure("internal_error", f"{type(exc).__name__}: {exc}")


class PixelCache:
    """Decoded images by ref, shared by the handlers of one run (a small LRU over the store)."""

    def __init__(self, store: ImageStore, size: int = 256) -> None:
        self.store = store
        self.size = size
        self._lock = threading.Lock()
        self._images: OrderedDict[str, Image.Image] = OrderedDict()

    def __call__(self, ref: str) -> Image.Image:
        with self._lock:
            if ref in self._images:
                self._images.move_to_end(ref)
                return self._images[ref]
        img = self.store.get(ref)
        self._keep(ref, img)
        return img

    def put(self, image: Image.Image) -> str:
        """Store ``image`` and keep it decoded: the next request for its ref reads no file."""
        ref, stored = self.store.put_and_get(image)
        self._keep(ref, stored)
        return ref

    def _keep(self, ref: str, image: Image.Image) -> None:
        with self._lock:
            self._images[ref] = image
            self._images.move_to_end(ref)
            while len(self._images) > self.size:
                self._images.popitem(last=False)


class TargetHandler:
    """``AskTarget`` → the target VLM, a batch of conversations per call.

    When a whole batch fails (an exception, not per-item errors), each conversation is retried
    on its own, so one bad item costs one item.
    """

    pool = "target"

    def __init__(self, roles: Backends, pixels: PixelCache, config: ProtocolConfig, batch_size: int) -> None:
        self.roles, self.pixels, self.batch_size = roles, pixels, batch_size
        self.params = GenerationParams(max_new_tokens=config.max_new_tokens, seed=config.seed)
        self.redact = Redactor(getattr(roles, "secrets", ()))

    def stage(self, request: AskTarget) -> str:
        return "target"

    def key(self, request: AskTarget) -> dict[str, Any]:
        return {
            "kind": "target",
            "backend": self.roles.target.identity() if self.roles.target is not None else None,
            "params": self.params.as_dict(),
            "conversation": [[m.role, m.text, list(m.images)] for m in request.conversation],
        }

    def call(self, batch: Sequence[AskTarget]) -> list[object]:
        try:
            if self.roles.target is None:
                raise BackendError("no target model configured in this driver")
            conversations = [
                [
                    ChatMessage(m.role, m.text, tuple(self.pixels(r) for r in m.images))
                    for m in req.conversation
                ]
                for req in batch
            ]
            outputs = self.roles.target.generate(conversations, self.params)
            if len(outputs) != len(batch):
                raise BackendError(f"target returned {len(outputs)} replies for {len(batch)} conversations")
        except Exception as exc:
            if len(batch) > 1:
                return [reply for req in batch for reply in self.call([req])]
            return [self.redact.reply(failure("target", exc))]
        return [self.redact.reply(_completion_reply("target", out)) for out in outputs]

    def encode(self, reply: object) -> dict[str, Any]:
        assert isinstance(reply, Completion)
        return {"text": reply.text, "reasoning": reply.reasoning, "finish_reason": reply.finish_reason}

    def decode(self, value: dict[str, Any]) -> object:
        return Completion(value["text"], value.get("reasoning"), finish_reason=value.get("finish_reason"))


def _completion_reply(stage: str, out: object) -> object:
    if isinstance(out, Exception):
        return failure(stage, out)
    if not isinstance(out, Completion):
        return Failure("backend_error", f"{stage} returned {type(out).__name__}, not a Completion")
    return out


_TEMPLATE_STAGES = {
    "extract_concepts": "concepts",
    "edit_instructions": "instructions",
    "edit_parse": "edit_parse",
    "judge_binary": "judge",
    "judge_graded": "judge",
}


class LLMHandler:
    """``AskLLM`` → the extractor, a judge of the panel, or the edit parser; one prompt a call."""

    pool = "text"
    batch_size = 1

    def __init__(self, roles: Backends, config: ProtocolConfig) -> None:
        self.roles, self.seed = roles, config.seed
        self._identities = roles.identities()
        self.redact = Redactor(getattr(roles, "secrets", ()))

    def stage(self, request: AskLLM) -> str:
        return _TEMPLATE_STAGES.get(request.template.split("@")[0], request.role)

    def params(self, request: AskLLM) -> GenerationParams:
        return GenerationParams(
            max_new_tokens=request.max_new_tokens,
            temperature=request.temperature,
            seed=self.seed + request.sample,
            reply_schema=reply_schema(request.template),
        )

    def key(self, request: AskLLM) -> dict[str, Any]:
        backend = self._identities[request.role]
        return {
            "kind": "llm",
            "role": request.role,
            "backend": backend[request.member] if request.role == "judge" else backend,
            "template": request.template,
            "prompt": request.prompt,
            "params": self.params(request).as_dict(),
        }

    def call(self, batch: Sequence[AskLLM]) -> list[object]:
        (request,) = batch
        try:
            model = self.roles.text_model(request.role, request.member)
            out: object = model.complete(request.prompt, self.params(request))
        except Exception as exc:
            return [self.redact.reply(failure(self.stage(request), exc))]
        return [self.redact.reply(_completion_reply(request.role, out))]

    encode = TargetHandler.encode
    decode = TargetHandler.decode


class EditHandler:
    """``EditImage`` → the image editor; the edited image goes into the store once the editor's
    slot is free (``finish``)."""

    pool = "edit"
    batch_size = 1

    def __init__(self, roles: Backends, pixels: PixelCache) -> None:
        self.roles, self.pixels = roles, pixels
        self._identity = roles.identities()["editor"]

    def stage(self, request: EditImage) -> str:
        return "edit"

    def key(self, request: EditImage) -> dict[str, Any]:
        return {
            "kind": "edit",
            "backend": self._identity,
            "image": request.image,
            "instruction": request.instruction,
            "seed": request.seed,
            "attempt": request.attempt,
        }

    def call(self, batch: Sequence[EditImage]) -> list[object]:
        """The editor's part (its slot): the edited image, or the failure."""
        (request,) = batch
        try:
            source = self.pixels(request.image)
            return [self.roles.editor.edit(source, request.instruction, seed=request.seed)]
        except Exception as exc:
            return [failure("edit", exc)]

    def finish(self, batch: Sequence[EditImage], raw: list[object]) -> list[object]:
        """The edited image into the store, after the editor's slot is free (``Finishing``)."""
        (edited,) = raw
        if isinstance(edited, Failure):
            return [edited]
        assert isinstance(edited, Image.Image)
        try:
            ref = self.pixels.put(edited)  # verification reads it next: kept decoded
        except Exception as exc:
            return [failure("edit", exc)]
        return [EditedImage(ref, edited.info.get(RESIZE_INFO_KEY))]

    def encode(self, reply: object) -> dict[str, Any]:
        assert isinstance(reply, EditedImage)
        return {"image": reply.image, "resized_from": reply.resized_from}

    def decode(self, value: dict[str, Any]) -> object:
        # The cached reply names an image: it must still be in the store, intact (read and checked
        # against its id here, and kept decoded for the verification that follows); a KeyError
        # makes the entry a miss and the edit is made again.
        self.pixels(value["image"])
        return EditedImage(value["image"], value.get("resized_from"))


class VerifyHandler:
    """``VerifyEdit`` → the localized edit verification (the paper's Algorithm 1) with the detector role."""

    pool = "verify"
    batch_size = 1

    def __init__(self, roles: Backends, pixels: PixelCache, gate: GateParams) -> None:
        self.roles, self.pixels, self.gate = roles, pixels, gate
        self._identity = roles.identities()["detector"]

    def stage(self, request: VerifyEdit) -> str:
        return "verify"

    def key(self, request: VerifyEdit) -> dict[str, Any]:
        return {
            "kind": "verify",
            "code": __version__,
            "detector": self._identity,
            "gate": self.gate.model_dump(mode="json"),
            "original": request.original,
            "edited": request.edited,
            "edit_type": request.edit_type,
            "target": request.target,
        }

    def call(self, batch: Sequence[VerifyEdit]) -> list[object]:
        (request,) = batch
        try:
            check = check_edit(
                self.pixels(request.original),
                self.pixels(request.edited),
                edit_type=request.edit_type,
                target=request.target,
                locator=self.roles.detector,
                params=self.gate,
                store_maps=self.pixels.store.put,  # mask and change map, for the audit report
            )
        except Exception as exc:
            return [failure("verify", exc)]
        return [check]

    def encode(self, reply: object) -> dict[str, Any]:
        assert isinstance(reply, EditCheck)
        return {"check": reply.model_dump(mode="json")}

    def decode(self, value: dict[str, Any]) -> object:
        check = EditCheck.model_validate(value["check"])
        if check.maps and not self.pixels.store.intact(check.maps):
            raise KeyError(f"the gate maps {check.maps} of a cached check are missing or damaged")
        return check


HandlerTable = dict[type[Request], Handler[Any]]


def handler_table(
    roles: Backends,
    store: ImageStore,
    config: ProtocolConfig,
    gate: GateParams,
    *,
    target_batch_size: int,
    pixels: PixelCache | None = None,
) -> HandlerTable:
    """Every request type's handler for one run, sharing ``pixels`` (a new one over ``store`` if
    None; the runner and the lmms-eval hooks pass the one their composition root made)."""
    pixels = pixels if pixels is not None else PixelCache(store)
    return {
        AskTarget: TargetHandler(roles, pixels, config, target_batch_size),
        AskLLM: LLMHandler(roles, config),
        EditImage: EditHandler(roles, pixels),
        VerifyEdit: VerifyHandler(roles, pixels, gate),
    }
