"""The solver: one sample's ``SampleRun`` advanced with Inspect's model as the target.

Every ``AskTarget`` goes to the task's model as the real conversation (system, user turns with
their images, the model's earlier answers); every other request (extractor, judge, edit parser,
editor, verification) goes through the run's stage-cached dispatcher, in a worker thread. The
finished record is appended to the EDCT run folder and kept in the sample's store for the scorer;
the sample's messages are the conversations the target saw, in order (what ``inspect view``
shows as the chat).
"""

from __future__ import annotations

import base64
from typing import Any

from edct_task.core.records import SampleInput, SampleRecord
from edct_task.core.requests import AskTarget, Message
from edct_task.engine.drive import SampleRun
from edct_task.inspect.role_model import STOP_REASONS
from edct_task.inspect.session import InspectRun, set_target
from model_adapters.contracts import Completion

RECORD_KEY = "edct_record"
"""The sample store's key holding the finished record (JSON), read by the scorer."""


def edct_solver(run: InspectRun) -> Any:
    from inspect_ai.model import get_model
    from inspect_ai.solver import Generate, TaskState, solver

    @solver(name="edct_protocol")
    def edct_protocol() -> Any:
        async def solve(state: TaskState, generate: Generate) -> TaskState:
            model = get_model()
            set_target(run, model)
            item = item_of(state.metadata, run)
            shown: list[Any] = []
            record = item if isinstance(item, SampleRecord) else await drive(item, run, model, shown)
            run.append(record)
            state.store.set(RECORD_KEY, record.model_dump(mode="json"))
            state.messages = shown
            if record.baseline is not None:
                state.output.completion = record.baseline.answer
            return state

        return solve

    return edct_protocol()


def item_of(metadata: dict[str, Any], run: InspectRun) -> SampleInput | SampleRecord:
    """The sample's item: a calibration scene rendered now (by index), a dataset row's input, or
    the error record of a row whose image could not be read."""
    if "edct_record" in metadata:
        return SampleRecord.model_validate(metadata["edct_record"])
    if "edct_input" in metadata:
        return SampleInput.model_validate(metadata["edct_input"])
    from edct_task.run.runner import CalibrationItems

    index, seed = int(metadata["edct_index"]), int(metadata["edct_seed"])
    return CalibrationItems(index + 1, seed, run.images)[index]


async def drive(sample: SampleInput, run: InspectRun, model: Any, shown: list[Any]) -> SampleRecord:
    """Advance the protocol to its record: target requests to ``model``, the rest to the dispatcher."""
    import anyio

    dispatcher = run.engine.dispatcher
    sample_run = SampleRun(sample, run.config.protocol)
    requests = sample_run.start()
    try:
        while requests is not None:
            replies: list[object] = [None] * len(requests)
            others = [i for i, r in enumerate(requests) if not isinstance(r, AskTarget)]
            if others:
                answered = await anyio.to_thread.run_sync(dispatcher.resolve, [requests[i] for i in others])
                for i, reply in zip(others, answered, strict=True):
                    replies[i] = reply
            for i, r in enumerate(requests):
                if isinstance(r, AskTarget):
                    replies[i] = await ask_target(r, run, model, shown)
            requests = sample_run.send(tuple(replies))
    finally:
        sample_run.close()
    assert sample_run.record is not None
    return sample_run.record


async def ask_target(request: AskTarget, run: InspectRun, model: Any, shown: list[Any]) -> Completion:
    messages = [inspect_message(m, run) for m in request.conversation]
    output = await model.generate(messages)
    show(shown, messages, output.message)
    return Completion(output.completion, finish_reason=STOP_REASONS.get(output.stop_reason))


def show(shown: list[Any], messages: list[Any], reply: Any) -> None:
    """Add one exchange to the sample's chat: the turns not shown yet (a follow-up continues the
    conversation shown last; a new conversation is shown whole, its system prompt once) and the
    model's reply."""
    earlier = [m for m in messages[:-1] if m.role != "system"]
    if shown and earlier and _same(shown[-len(earlier) :], earlier):
        new = messages[-1:]
    else:
        seen_system = any(getattr(m, "role", "") == "system" for m in shown)
        new = [m for m in messages if not (seen_system and m.role == "system")]
    shown.extend([*new, reply])


def _same(a: list[Any], b: list[Any]) -> bool:
    return len(a) == len(b) and all(x.role == y.role and x.text == y.text for x, y in zip(a, b, strict=True))


def inspect_message(message: Message, run: InspectRun) -> Any:
    """One protocol turn as Inspect's chat message, images as PNG data URIs."""
    from inspect_ai.model import (
        ChatMessageAssistant,
        ChatMessageSystem,
        ChatMessageUser,
        ContentImage,
        ContentText,
    )

    if message.role == "system":
        return ChatMessageSystem(content=message.text)
    if message.role == "assistant":
        return ChatMessageAssistant(content=message.text)
    if not message.images:
        return ChatMessageUser(content=message.text)
    images = [ContentImage(image=data_uri(run.images.path(ref).read_bytes())) for ref in message.images]
    return ChatMessageUser(content=[*images, ContentText(text=message.text)])


def data_uri(png: bytes) -> str:
    return "data:image/png;base64," + base64.b64encode(png).decode("ascii")
