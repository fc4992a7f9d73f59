"""Inspect's ``--model-role``: the text roles (extractor, judge, edit parser) answered by Inspect's
model for that role.

``inspect eval edct/edct_calibration --model edct/faithful --model-role judge=openai/gpt-5`` binds
Inspect's ``judge`` role; the task then names the text backend ``inspect-role`` (``role: judge``)
for EDCT's judge in place of the config's (``bind_model_roles``), so every judge request of the
samples *and* of the known-answer controls (one dispatcher) goes to that Inspect model. A role
bound to a list of models is a judge panel (``member`` picks each). Without ``--model-role`` the
roles come from the EDCT config. The backend is a ``BackendRecord`` like any other
(``roles.HOST_RECORDS``), so a config may also name it: ``judge: {backend: inspect-role, role: grader}``.

The dispatcher calls backends from its own worker threads; each call is handed to the event loop
Inspect runs on (captured when the task is created) and waited for there.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pydantic import Field

from edct_task.config import RunConfig
from model_adapters.contracts import Completion, GenerationParams
from model_adapters.errors import PermanentBackendError
from verification.backends import BackendOptions

BACKEND = "inspect-role"
TEXT_ROLES = ("extractor", "judge", "edit_parser")
"""EDCT's text roles that ``--model-role NAME=MODEL`` can bind (Inspect's role of the same name)."""

STOP_REASONS = {
    "stop": "stop",
    "max_tokens": "length",
    "model_length": "length",
    "content_filter": "content_filter",
}
"""Inspect's stop reasons as the ``finish_reason`` the protocol's parsers read."""


class InspectRoleOptions(BackendOptions):
    """``inspect-role``: Inspect's model for a model role (``--model-role ROLE=MODEL``); only inside
    an Inspect task."""

    role: str = Field(description="The Inspect model role whose model answers (`--model-role ROLE=…`).")
    member: int = Field(0, ge=0, description="Which model of a role bound to a list (a judge panel).")
    model: str | None = Field(
        None,
        description="The model the role must be bound to (`provider/name`), as the run records it; "
        "the task sets it from `--model-role`.",
    )


class InspectRoleText:
    """A ``TextModel`` over Inspect's model for ``role``: one prompt, one user message."""

    name = BACKEND

    def __init__(self, model: Any, role: str, token: Any) -> None:
        self.model, self.role, self._token = model, role, token

    def identity(self) -> dict[str, Any]:
        config = self.model.config.model_dump(exclude_none=True)
        return {"name": BACKEND, "role": self.role, "model": str(self.model), "config": config}

    def complete(self, prompt: str, params: GenerationParams) -> Completion:
        import anyio.from_thread
        from inspect_ai.model import GenerateConfig

        config = GenerateConfig(
            max_tokens=params.max_new_tokens,
            temperature=params.temperature,
            top_p=params.top_p,
            seed=params.seed,
        )
        try:
            output = anyio.from_thread.run(self.model.generate, prompt, [], None, config, token=self._token)
        except Exception as exc:  # the provider's error after Inspect's own retries
            reason = " ".join(str(exc).split())[:300]
            raise PermanentBackendError(
                f"Inspect model {self.model} ({self.role}): {type(exc).__name__}: {reason}"
            ) from None
        return Completion(output.completion, finish_reason=STOP_REASONS.get(output.stop_reason))


def inspect_role_text(options: Mapping[str, Any]) -> InspectRoleText:
    """The backend's factory: Inspect's model bound to ``options['role']``, called on the event
    loop of the Inspect task being created."""
    import anyio.lowlevel
    from inspect_ai.model import model_roles

    role, member = str(options["role"]), int(options.get("member", 0))
    bound = model_roles().get(role)
    models = bound if isinstance(bound, list) else [bound] if bound is not None else []
    if member >= len(models):
        raise ValueError(
            f"Inspect model role {role!r} is not bound{'' if not models else f' to {member + 1} models'}: "
            f"pass --model-role {role}=MODEL to `inspect eval` (this backend answers only in an Inspect task)"
        )
    model = models[member]
    if options.get("model") and str(options["model"]) != str(model):
        raise ValueError(f"Inspect model role {role!r} is bound to {model}, not {options['model']}")
    try:
        token = anyio.lowlevel.current_token()
    except RuntimeError:
        raise ValueError("backend inspect-role answers only inside an Inspect task (no event loop)") from None
    return InspectRoleText(model, role, token)


def bind_model_roles(config: RunConfig) -> RunConfig:
    """``config`` with each text role that Inspect's ``--model-role`` binds answered by that model
    (``inspect-role``; a list of models makes a panel); the others as configured."""
    from inspect_ai.model import model_roles

    bound = model_roles()
    roles: dict[str, Any] = {}
    for role in TEXT_ROLES:
        models = bound.get(role)
        if models is None:
            continue
        listed = models if isinstance(models, list) else [models]
        sections = [
            {"backend": BACKEND, "role": role, "member": i, "model": str(m)} for i, m in enumerate(listed)
        ]
        roles[role] = sections if len(sections) > 1 else sections[0]
    if not roles:
        return config
    dumped = config.model_dump(mode="json")
    if "edit_parser" in roles:
        dumped["protocol"]["llm_edit_parser"] = True
    return RunConfig.model_validate({**dumped, "roles": {**dumped["roles"], **roles}})
