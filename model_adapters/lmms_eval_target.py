"""The ``lmms-eval`` target backend: any model of lmms-eval's registry as a ``VisionChatModel``.

``edct run --model qwen3_vl --model_args pretrained=… --tasks edct_bench`` is an ordinary run whose
target role is this backend (``{backend: lmms-eval, model: qwen3_vl, model_args: …}``): the model
is built through lmms-eval's own registry (entry points included) and every batch of target
requests goes to it as one ``generate_until`` call with one ``Instance`` per conversation.

What the model receives (``rendering``, recorded in the identity and in every record):

``multi-turn``
    chat models (``is_simple`` false) get the real conversation through ``doc_to_messages``:
    question → answer → "why?", the image on the first user turn, as lmms-eval's chat models take it.
``single-turn-quoted``
    simple models take one text and the images (``doc_to_visual``), so the conversation is rendered
    as one user turn with the earlier turns quoted (``render_quoted``) — the rendering lmms-eval's
    own agentic loop gives every model.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping, Sequence
from typing import Any, Literal

from pydantic import Field

from model_adapters.contracts import ChatMessage, Completion, GenerationParams
from model_adapters.errors import OptionsError
from model_adapters.secrets import is_secret_name
from verification.backends import BackendOptions, check_options

Rendering = Literal["multi-turn", "single-turn-quoted"]

TASK = "edct"
"""The ``task_dict`` entry the Instances point at inside the lmms-eval model."""
SPLIT = "test"


class LmmsEvalOptions(BackendOptions):
    """``lmms-eval``: any lmms-eval model class as the target, in-process."""

    model: str | None = Field(
        None, description="An lmms-eval model name: qwen3_vl, llava, vllm, … (required)."
    )
    model_args: str | None = Field(
        None, description="lmms-eval's --model_args, e.g. pretrained=…,device=cpu."
    )
    gen_kwargs: str | dict[str, Any] | None = Field(
        None, description="lmms-eval's --gen_kwargs (text or a mapping)."
    )
    batch_size: int | str | None = Field(None, description="lmms-eval's --batch_size.")
    device: str | None = Field(None, description="lmms-eval's --device.")


CHECKPOINT_ARGS = ("pretrained", "model", "model_path")
"""``model_args`` keys that name a model's weights (lmms-eval's ``qwen3_vl``/``llava``, ``vllm``)."""

_HISTORY_HEAD = "Earlier in this conversation you were shown the image and asked:"
_HISTORY_ANSWER = "You answered:"


def render_quoted(conversation: Sequence[Any], *, tag: str | None = None) -> str:
    """A conversation as one user turn: system prompt, the earlier turns quoted, the ask (and
    ``tag`` last, when given). Shapes: ``[system] user`` and ``[system] user assistant user``;
    ``conversation`` holds anything with ``role`` and ``text``."""
    msgs = list(conversation)
    parts: list[str] = []
    if msgs and msgs[0].role == "system":
        parts.append(msgs.pop(0).text)
    if len(msgs) == 1 and msgs[0].role == "user":
        parts.append(msgs[0].text)
    elif len(msgs) == 3 and [m.role for m in msgs] == ["user", "assistant", "user"]:
        parts.append(f"{_HISTORY_HEAD}\n{quote(msgs[0].text)}\n{_HISTORY_ANSWER}\n{quote(msgs[1].text)}")
        parts.append(msgs[2].text)
    else:
        raise ValueError(f"cannot render a conversation of roles {[m.role for m in msgs]} as one turn")
    if tag:
        parts.append(tag)
    return "\n\n".join(parts)


def quote(text: str) -> str:
    return "\n".join("> " + line for line in text.split("\n"))


def history_marks() -> tuple[str, str]:
    """The two fixed lines of a quoted history (for the inverse, ``edct_task.lmms.turns``)."""
    return _HISTORY_HEAD, _HISTORY_ANSWER


def with_system_in_first_turn(conversation: Sequence[ChatMessage]) -> list[ChatMessage]:
    """A dataset's system prompt as the first paragraph of the first user turn, never a message.

    lmms-eval's chat models insert their own default system message in front of whatever they are
    given, and its agentic loop has no system message at all; a dataset's system prompt sent as a
    message would be a second system message. Every rendering carries it the same way.
    """
    msgs = list(conversation)
    if not msgs or msgs[0].role != "system":
        return msgs
    system, first, rest = msgs[0], msgs[1], msgs[2:]
    return [ChatMessage(first.role, f"{system.text}\n\n{first.text}", first.images), *rest]


def checkpoint_stamp(model_args: str) -> str | None:
    """A stamp (``folder_stamp``) of the local checkpoint folder ``model_args`` names, or None (a
    hub id, no folder): part of the identity, so a folder trained again in place is not answered
    with the old weights' cached replies."""
    from verification.localization import folder_stamp

    for arg in model_args.split(","):
        key, _, value = arg.partition("=")
        if key.strip() in CHECKPOINT_ARGS and value.strip():
            stamp = folder_stamp(value.strip())
            if stamp:
                return stamp
    return None


def parse_gen_kwargs(text: str | Mapping[str, Any] | None) -> dict[str, Any]:
    """lmms-eval's ``--gen_kwargs`` (``max_new_tokens=64,temperature=0``) as lmms-eval parses it
    (``simple_parse_args_string``), or a mapping; malformed text is an ``OptionsError``."""
    if text is None:
        return {}
    if isinstance(text, Mapping):
        return dict(text)
    if not str(text).strip():
        return {}
    from lmms_eval.utils import simple_parse_args_string

    try:
        return dict(simple_parse_args_string(str(text)))
    except (ValueError, TypeError) as exc:
        raise OptionsError(
            f"gen_kwargs {text!r}: expected key=value pairs separated by commas ({exc})"
        ) from None


def build_model(
    model: str, model_args: str = "", *, batch_size: Any = None, device: str | None = None
) -> Any:
    """An lmms-eval model instance, through its own registry (entry points included)."""
    from lmms_eval.models import get_model

    extra = {"batch_size": batch_size, "device": device}
    cls = get_model(model)
    problem = cuda_problem(cls, model, model_args, device)
    if problem is not None:  # once, before any weights load: not one error per batch
        raise OptionsError(problem)
    return cls.create_from_arg_string(model_args or "", {k: v for k, v in extra.items() if v is not None})


DEVICE_ARGS = ("device", "device_map")
"""The constructor arguments by which an lmms-eval model class places its tensors."""


def cuda_problem(cls: Any, model: str, model_args: str = "", device: str | None = None) -> str | None:
    """Why the lmms-eval model class ``cls`` cannot run on this machine (one line naming the fix),
    or None.

    The rule: where the machine has no CUDA device (``torch.cuda.is_available()`` false), a model
    whose ``device`` or ``device_map`` — from ``model_args``, ``--device``, else the class's own
    default — is ``cuda…`` or ``auto`` cannot run: lmms-eval's models move their inputs to
    ``device``, and most send them to ``"cuda"`` when ``device_map`` is ``auto`` (``qwen3_vl``'s
    defaults are ``device=cuda, device_map=auto``). Without this check the model loads, then every
    batch fails with "Found no NVIDIA driver"."""
    import inspect

    try:
        import torch
    except ImportError:  # a model that needs torch says so itself
        return None
    if torch.cuda.is_available():
        return None
    try:
        params = inspect.signature(cls.__init__).parameters
    except (TypeError, ValueError):
        return None
    given = _args(model_args)
    if device:
        given.setdefault("device", device)
    wrong = []
    for name in DEVICE_ARGS:
        if name not in params:
            continue
        value = given.get(name, params[name].default)
        if isinstance(value, str) and (value.strip().lower().startswith("cuda") or value.strip() == "auto"):
            wrong.append(f"{name}={value}" + ("" if name in given else " (its default)"))
    if not wrong:
        return None
    fix = ",".join(f"{n}=cpu" for n in DEVICE_ARGS if n in params)
    return (
        f"the lmms-eval model {model} would run on {' and '.join(wrong)}, and this machine has no CUDA "
        f"device: add {fix} to --model_args (model_args) to run it on the CPU"
    )


def _args(model_args: str) -> dict[str, str]:
    """``k=v,k=v`` as text pairs (lmms-eval parses values further; only device names matter here)."""
    pairs = (a.partition("=") for a in (model_args or "").split(",") if "=" in a)
    return {k.strip(): v.strip() for k, _, v in pairs}


class _DocIds(dict):
    """``lm.task_dict[task][split]``: a document lookup returns the id (the callables ignore it)."""

    def __missing__(self, key: Any) -> Any:
        return key


class LmmsTarget:
    """A ``VisionChatModel`` over an lmms-eval model: one ``generate_until`` call per batch."""

    name = "lmms-eval"

    def __init__(
        self, lm: Any, model: str, model_args: str = "", gen_kwargs: Mapping[str, Any] | None = None
    ) -> None:
        self.lm = lm
        self.model = model
        self.model_args = model_args
        self.gen_kwargs = dict(gen_kwargs or {})
        """``--gen_kwargs``: override the protocol's decoding for this target's requests."""
        self.calls = 0
        if not isinstance(getattr(lm, "task_dict", None), dict):
            lm.task_dict = {}
        lm.task_dict.setdefault(TASK, {})[SPLIT] = _DocIds()
        self._next_id = 0
        self._checkpoint = checkpoint_stamp(model_args or "")

    @property
    def is_chat(self) -> bool:
        return not getattr(self.lm, "is_simple", True)

    @property
    def rendering(self) -> Rendering:
        return "multi-turn" if self.is_chat else "single-turn-quoted"

    def identity(self) -> dict[str, Any]:
        args = ",".join(
            a for a in (self.model_args or "").split(",") if not is_secret_name(a.split("=", 1)[0])
        )
        out: dict[str, Any] = {
            "backend": "lmms-eval",
            "model": self.model,
            "model_args": args,
            "chat": self.is_chat,
            "rendering": self.rendering,
        }
        if self._checkpoint:
            out["checkpoint"] = self._checkpoint
        return {**out, "gen_kwargs": dict(self.gen_kwargs)} if self.gen_kwargs else out

    def _gen_kwargs(self, params: GenerationParams) -> dict[str, Any]:
        kw: dict[str, Any] = {
            "max_new_tokens": params.max_new_tokens,
            "temperature": params.temperature,
            "do_sample": params.temperature > 0,
            "until": [],
        }
        if params.top_p < 1.0:
            kw["top_p"] = params.top_p
        kw.update(self.gen_kwargs)
        return kw

    def instance(self, conversation: Sequence[ChatMessage], params: GenerationParams) -> Any:
        """The ``generate_until`` Instance of one conversation, as this model's kind takes it."""
        from lmms_eval.api.instance import Instance

        doc_id = self._next_id
        self._next_id += 1
        conversation = with_system_in_first_turn(conversation)
        gen_kwargs = self._gen_kwargs(params)
        args: tuple[Any, ...]
        if self.is_chat:
            messages = [
                {
                    "role": m.role,
                    "content": [
                        *({"type": "image", "url": i} for i in m.images),
                        {"type": "text", "text": m.text},
                    ],
                }
                for m in conversation
            ]

            def doc_to_messages(_doc: Any, _messages: list = messages) -> list:
                return copy.copy(_messages)  # models insert their system prompt into the list

            args = (conversation[-1].text, doc_to_messages, gen_kwargs, doc_id, TASK, SPLIT)
        else:
            images = [img for m in conversation for img in m.images]

            def doc_to_visual(_doc: Any, _images: list = images) -> list:
                return list(_images)

            args = (render_quoted(conversation), gen_kwargs, doc_to_visual, doc_id, TASK, SPLIT)
        return Instance(
            request_type="generate_until",
            arguments=args,
            idx=0,
            metadata={"task": TASK, "doc_id": doc_id, "repeats": 1},
        )

    def usage(self) -> dict[str, Any]:
        """What the run log records under ``usage``: lmms-eval models report no tokens or cost,
        only how many ``generate_until`` calls (batches) the run made."""
        return {"generate_until_calls": self.calls, "cost_usd": None}

    def generate(
        self, conversations: Sequence[Sequence[ChatMessage]], params: GenerationParams
    ) -> list[Completion | Exception]:
        from lmms_eval.api.instance import unwrap_generation_output

        instances = [self.instance(c, params) for c in conversations]
        self.calls += 1
        outputs = self.lm.generate_until(instances)
        replies: list[Completion | Exception] = []
        for out in outputs:
            text, _ = unwrap_generation_output(out)
            replies.append(Completion(text if isinstance(text, str) else str(text)))
        return replies


def from_options(options: Mapping[str, Any]) -> LmmsTarget:
    """``roles.target: {backend: lmms-eval, model: NAME, model_args: "k=v,…", gen_kwargs: …,
    batch_size: …, device: …}``."""
    check_options(LmmsEvalOptions, options, "backend 'lmms-eval'")
    model = options.get("model")
    if not isinstance(model, str) or not model:
        raise OptionsError("backend 'lmms-eval' needs model: an lmms-eval model name (qwen3_vl, vllm, …)")
    model_args = str(options.get("model_args") or "")
    gen_kwargs = parse_gen_kwargs(options.get("gen_kwargs"))
    lm = build_model(model, model_args, batch_size=options.get("batch_size"), device=options.get("device"))
    return LmmsTarget(lm, model, model_args, gen_kwargs)
