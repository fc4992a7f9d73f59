"""The lmms-eval side of the plugin: the ``edct_reference`` model and the entry-point manifest.

``pyproject.toml`` declares::

    [project.entry-points."lmms_eval.models"]
    edct = "edct_task.lmms.plugin:manifests"

lmms-eval calls ``manifests()`` while it builds its model registry (on ``import lmms_eval.models``,
which ``lmms_eval.evaluator`` imports, before any ``TaskManager`` exists). That call is the only
early hook a plugin gets, so besides returning the model manifest it adds this package's task folders to every
``TaskManager`` built afterwards (``task_configs/``, and the YAMLs of domains registered outside the
repository: ``edct_task.lmms.tasks.task_folders``): ``lmms-eval --tasks edct_bench`` works without
``--include_path``.
If a future lmms-eval no longer lets it do that, it says so and prints the ``--include_path`` form.
"""

from __future__ import annotations

import functools
import importlib.abc
import importlib.util
import inspect
import logging
import sys
import time
from collections.abc import Sequence
from typing import Any

from edct_task.lmms import state
from edct_task.lmms.turns import parse_turn
from model_adapters.contracts import ChatMessage, Completion, GenerationParams

log = logging.getLogger(__name__)

MODEL_NAME = "edct_reference"
_PATCHED = "_edct_task_dir_added"


def task_dir() -> str:
    from task_configs import TASK_DIR

    return str(TASK_DIR)


def include_path_hint() -> str:
    return f"lmms-eval --include_path {task_dir()} --tasks edct_bench ..."


def register_task_folder() -> bool:
    """Make every ``lmms_eval.tasks.TaskManager`` built from now on index our task folder.

    ``lmms_eval.tasks`` costs seconds to import (``evaluate``, ``datasets``, transformers'
    pipelines), and an ``edct run --model`` whose model registry calls this may never need it
    before its export: so when it is not imported yet, it is patched the moment someone imports
    it (a finder on ``sys.meta_path`` that wraps that one module's loader), not imported here.
    True when it is patched or will be.
    """
    module = sys.modules.get(TASKS_MODULE)
    if module is None:
        if not any(isinstance(f, _PatchOnImport) for f in sys.meta_path):
            sys.meta_path.insert(0, _PatchOnImport())
        return True
    return _patch(module)


TASKS_MODULE = "lmms_eval.tasks"


class _PatchOnImport(importlib.abc.MetaPathFinder):
    """Finds nothing itself: lets the other finders find ``lmms_eval.tasks`` and patches the module
    once its loader has run, then leaves ``sys.meta_path``."""

    def find_spec(self, name: str, path: Any = None, target: Any = None) -> Any:
        if name != TASKS_MODULE:
            return None
        sys.meta_path.remove(self)
        spec = importlib.util.find_spec(name)
        if spec is None:  # lmms-eval without its task module: its own import error says so
            return None
        loader = spec.loader
        if loader is None or not hasattr(loader, "exec_module"):
            _warn(f"{TASKS_MODULE} is not loaded by a loader with exec_module ({loader!r})")
            return spec
        run_module = loader.exec_module

        def exec_module(module: Any) -> None:
            run_module(module)
            _patch(module)

        loader.exec_module = exec_module
        return spec


def _patch(tasks_module: Any) -> bool:
    manager = getattr(tasks_module, "TaskManager", None)
    original = getattr(manager, "initialize_tasks", None)
    if original is None:
        _warn(f"{TASKS_MODULE} has no TaskManager.initialize_tasks()")
        return False
    if getattr(original, _PATCHED, False):
        return True

    @functools.wraps(original)
    def initialize_tasks(self: Any, include_path: Any = None, include_defaults: bool = True) -> Any:
        from edct_task.lmms.tasks import task_folders

        paths = (
            []
            if include_path is None
            else ([include_path] if isinstance(include_path, str) else list(include_path))
        )
        given = {str(p).rstrip("/") for p in paths}
        paths += [folder for folder in task_folders() if folder not in given]
        watch_evaluations()  # lmms-eval's evaluator is loaded whole by now
        return original(self, include_path=paths, include_defaults=include_defaults)

    setattr(initialize_tasks, _PATCHED, True)
    manager.initialize_tasks = initialize_tasks  # type: ignore[union-attr]
    return True


EVALUATOR_MODULE = "lmms_eval.evaluator"


def watch_evaluations() -> None:
    """Wrap lmms-eval's ``simple_evaluate`` (once): each call runs with its arguments as the
    hooks' invocation (``state.invoked``), and a command-line call whose model cannot run here
    stops first (``preflight``). lmms-eval's command line calls it through its module, after it has
    built a ``TaskManager`` (which calls this): so the wrapper sees every command-line run."""
    module = sys.modules.get(EVALUATOR_MODULE)
    original = getattr(module, "simple_evaluate", None)
    if original is None or getattr(original, _PATCHED, False):
        return
    signature = inspect.signature(original)

    @functools.wraps(original)
    def simple_evaluate(*args: Any, **kwargs: Any) -> Any:
        try:
            arguments = {**signature.bind_partial(*args, **kwargs).arguments, **kwargs}
        except TypeError:  # lmms-eval's own call says what is wrong with its arguments
            return original(*args, **kwargs)
        call = state.Invocation.of_call(arguments)
        with state.invoked(call):
            if call.command_line:
                preflight(call)
            return original(*args, **kwargs)

    setattr(simple_evaluate, _PATCHED, True)
    module.simple_evaluate = simple_evaluate  # type: ignore[union-attr]


def preflight(call: state.Invocation) -> None:
    """``lmms-eval --model M --tasks <an EDCT task>`` on a machine where ``M`` cannot run (a CUDA
    default without a CUDA device: ``lmms_eval_target.cuda_problem``) stops here, before lmms-eval
    loads the model, in one line and with exit code 2: lmms-eval itself would load it, fail on
    every request, print a traceback and exit 0."""
    from edct_task.lmms.tasks import edct_tasks

    if not call.model or not set(call.tasks) & set(edct_tasks()):
        return
    from lmms_eval.models import get_model

    from edct_task.lmms.documents import TaskLoadError
    from model_adapters.lmms_eval_target import cuda_problem

    try:
        cls = get_model(call.model)
    except Exception:  # an unknown model: lmms-eval says so itself
        return
    problem = cuda_problem(cls, call.model, call.model_args, call.device)
    if problem is not None:
        message = f"edct: {problem}"
        print(message, file=sys.stderr, flush=True)
        raise TaskLoadError(message)


def _warn(why: str) -> None:
    print(
        f"edct-bench: could not register the EDCT task folder with lmms-eval ({why}).\n"
        f"Pass it explicitly:\n  {include_path_hint()}",
        file=sys.stderr,
    )


def manifests() -> list[Any]:
    """Entry point of group ``lmms_eval.models``: our model manifest (and the task folder)."""
    from lmms_eval.models.registry_v2 import ModelManifest

    register_task_folder()
    return [ModelManifest(model_id=MODEL_NAME, chat_class_path=f"{__name__}.EdctReference")]


# ----------------------------------------------------------------------------- the reference model


def messages_to_chat(
    messages: Sequence[dict[str, Any]], system_prompts: Sequence[str] = ()
) -> list[ChatMessage]:
    """lmms-eval chat messages → our ``ChatMessage`` list.

    A single user turn that carries a rendered history (the agentic path) is expanded back into
    the conversation it stands for, with its images on the first user turn.
    """
    out: list[ChatMessage] = []
    for m in messages:
        content = m.get("content")
        if isinstance(content, str):
            texts, images = [content], []
        else:
            texts = [c.get("text", "") for c in content or [] if c.get("type") == "text"]
            images = [c.get("url") for c in content or [] if c.get("type") == "image"]
        out.append(ChatMessage(m["role"], "\n".join(texts), tuple(i.convert("RGB") for i in images)))
    users = [m for m in out if m.role == "user"]
    if users and any(m.role == "assistant" for m in out):  # real history: split a leading system prompt
        first = out.index(users[0])
        for sp in system_prompts:
            if sp and users[0].text.startswith(sp + "\n\n"):
                text = users[0].text[len(sp) + 2 :]
                out[first : first + 1] = [
                    ChatMessage("system", sp),
                    ChatMessage("user", text, users[0].images),
                ]
                break
        return out
    if len(users) == 1:
        user = users[0]
        turns = parse_turn(user.text, system_prompts)
        expanded: list[ChatMessage] = [m for m in out if m.role == "system"]
        first_user = True
        for role, text in turns:
            images = user.images if role == "user" and first_user else ()
            first_user = first_user and role != "user"
            expanded.append(ChatMessage(role, text, images))  # type: ignore[arg-type]
        return expanded
    return out


def _lmms_base() -> type:
    from lmms_eval.api.model import lmms

    return lmms


class EdctReference(_lmms_base()):  # type: ignore[misc]
    """``--model edct_reference --model_args behavior=faithful|prior|stale|mixed:P[:seed=N][,latency_s=S]``.

    The calibration world's reference VLM as an lmms-eval chat model. ``latency_s`` sleeps once
    per ``generate_until`` call (per batch, like a batched server) to simulate a remote model.
    """

    is_simple = False

    def __init__(
        self,
        behavior: str = "faithful",
        latency_s: float = 0.0,
        batch_size: int | str = 1,
        device: str | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__()
        from edct_task.calibration import ReferenceVLM

        if kwargs:
            log.warning("edct_reference ignores model_args %s", sorted(kwargs))
        self.model = ReferenceVLM(str(behavior))
        self.latency_s = float(latency_s)
        self.batch_size_per_gpu = int(batch_size) if str(batch_size).isdigit() else 1
        self.calls = 0
        self.device = device or "cpu"
        """Where lmms-eval puts the tensors it gathers across ranks (accelerate / torchrun runs)."""

    def _system_prompts(self) -> tuple[str, ...]:
        from edct_task.calibration import world

        return (world.DRIVING_SYSTEM_PROMPT,)

    def generate_until(self, requests: list[Any]) -> list[str]:
        self.calls += 1
        if self.latency_s:
            time.sleep(self.latency_s)
        conversations = []
        for req in requests:
            _ctx, doc_to_messages, _gen_kwargs, doc_id, task, split = req.args
            messages = doc_to_messages(self.task_dict[task][split][doc_id])
            conversations.append(messages_to_chat(messages, self._system_prompts()))
        replies = self.model.generate(conversations, GenerationParams())
        return [r.text if isinstance(r, Completion) else f"(reference model error: {r})" for r in replies]

    def loglikelihood(self, requests: list[Any]) -> list[tuple[float, bool]]:
        raise NotImplementedError("edct_reference only generates text")

    def generate_until_multi_round(self, requests: list[Any]) -> list[str]:
        raise NotImplementedError("edct_reference: use generate_until / generate_until_agentic")
