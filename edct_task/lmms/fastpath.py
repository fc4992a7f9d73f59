"""The fast path: ``edct run --model <lmms-eval model> --model_args … --tasks edct_bench``.

Builds the model through lmms-eval's registry and the tasks through lmms-eval's ``TaskManager``
(so documents are exactly those of ``lmms-eval --tasks …``; the manager indexes the EDCT task
folder alone, and the EDCT hooks build only the documents ``--limit`` asks for — the calibration
world's in a worker process while lmms-eval is imported, ``render_ahead``), then runs the
samples through ``edct_task.engine.lockstep.run_samples`` (the pipelined driver,
``engine.pipeline.run_pipelined``, by default; ``limits.schedule: lockstep`` picks
``run_lockstep``), as ``edct run --config`` does: every step's target requests go to
the model as ONE ``generate_until`` call with one ``Instance`` per conversation, chat models
receiving the real multi-turn history (answer → why), simple models the same single-turn
rendering the agentic task uses. Scores come from the task's own ``process_results`` and
aggregations applied to the same final responses the agentic task produces, and lmms-eval's
``EvaluationTracker`` writes the results and sample logs, so both paths give identical scores for
identical responses and every downstream tool reads the output.
"""

from __future__ import annotations

import copy
import json
import logging
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from edct_task.config import RunConfig
from edct_task.core.errors import ConfigError
from edct_task.core.records import SampleInput, SampleRecord
from edct_task.lmms import documents, turns
from edct_task.lmms import results as lmms_results
from edct_task.lmms.deferred import defer_imports, import_in_background, imports_refused
from edct_task.lmms.settings import Settings, build_settings, open_work_dir
from edct_task.lmms.turns import render_turn
from edct_task.roles import refuse_calibration_roles
from edct_task.run.log import LmmsRunBlock, run_versions
from edct_task.scoring.health import judge_health
from model_adapters.contracts import ChatMessage, Completion, GenerationParams
from model_adapters.secrets import is_secret_name
from verification.localization import folder_stamp

log = logging.getLogger(__name__)

FASTPATH_TASK = "edct_fastpath"
"""The ``task_dict`` entry our Instances point at inside the lmms-eval model."""
FASTPATH_SPLIT = "test"
HOOKS_MODULE = "edct_task.lmms.hooks"
"""Where an EDCT task's ``!function`` hooks live (named, not imported: nothing imports the hooks)."""
EDCT_TASKS = ("edct_bench", "edct_bench_okvqa", "edct_bench_drivelm", "edct_bench_3dsr", "edct_calibration")


@dataclass
class FastPathOutcome:
    results: dict[str, Any]
    """lmms-eval's results dict, as written by its ``EvaluationTracker``."""
    records: list[SampleRecord]
    """The sample records, in document order."""
    samples: dict[str, list[dict[str, Any]]]
    """lmms-eval's logged samples per task (empty without ``log_samples``)."""


class _DocIds(dict):
    """``lm.task_dict[task][split]``: document lookups return the id; our callables ignore it."""

    def __missing__(self, key: Any) -> Any:
        return key


def build_model(
    model: str,
    model_args: str = "",
    *,
    batch_size: int | str | None = None,
    device: str | None = None,
    force_simple: bool = False,
) -> Any:
    """An lmms-eval model instance, through its own registry (entry points included)."""
    defer_imports()  # before lmms-eval's first import: what it imports and the fast path never uses
    from lmms_eval.models import get_model  # its registry loads the entry points (not evaluator: 0.2 s)

    cls = get_model(model, force_simple=force_simple)
    extra = {"batch_size": batch_size, "device": device}
    return cls.create_from_arg_string(model_args or "", {k: v for k, v in extra.items() if v is not None})


class LmmsTarget:
    """A ``VisionChatModel`` over an lmms-eval model: one ``generate_until`` call per batch."""

    name = "lmms-eval"

    def __init__(
        self, lm: Any, model: str, model_args: str = "", gen_kwargs: dict[str, Any] | None = None
    ) -> None:
        self.lm = lm
        self.model = model
        self.model_args = model_args
        self.gen_kwargs = dict(gen_kwargs or {})
        """``--gen_kwargs``: override the protocol's decoding for this target's requests."""
        self.calls = 0
        if not isinstance(getattr(lm, "task_dict", None), dict):
            lm.task_dict = {}
        lm.task_dict.setdefault(FASTPATH_TASK, {})[FASTPATH_SPLIT] = _DocIds()
        self._next_id = 0
        self._checkpoint = checkpoint_stamp(model_args or "")
        """The local checkpoint folder's stamp, once: ``identity`` is part of every request's key."""

    @property
    def is_chat(self) -> bool:
        return not getattr(self.lm, "is_simple", True)

    def identity(self) -> dict[str, Any]:
        args = ",".join(
            a for a in (self.model_args or "").split(",") if not is_secret_name(a.split("=", 1)[0])
        )
        out = {"backend": "lmms-eval", "model": self.model, "model_args": args, "chat": self.is_chat}
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
        from lmms_eval.api.instance import Instance

        doc_id = self._next_id
        self._next_id += 1
        conversation = with_system_in_first_turn(conversation)
        images = [img for m in conversation for img in m.images]
        gen_kwargs = self._gen_kwargs(params)
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

            args: tuple = (
                conversation[-1].text,
                doc_to_messages,
                gen_kwargs,
                doc_id,
                FASTPATH_TASK,
                FASTPATH_SPLIT,
            )
        else:

            def doc_to_visual(_doc: Any, _images: list = images) -> list:
                return list(_images)

            args = (
                render_turn(conversation),
                gen_kwargs,
                doc_to_visual,
                doc_id,
                FASTPATH_TASK,
                FASTPATH_SPLIT,
            )
        return Instance(
            request_type="generate_until",
            arguments=args,
            idx=0,
            metadata={"task": FASTPATH_TASK, "doc_id": doc_id, "repeats": 1},
        )

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


CHECKPOINT_ARGS = ("pretrained", "model", "model_path")
"""``--model_args`` keys that name a model's weights (lmms-eval's ``qwen3_vl``/``llava``, ``vllm``)."""


def checkpoint_stamp(model_args: str) -> str | None:
    """``verification.localization.folder_stamp`` of the local checkpoint folder ``model_args``
    names, or None (a hub id, no folder): part of the target's identity, so a folder trained
    again in place is not answered with the old weights' cached replies."""
    for arg in model_args.split(","):
        key, _, value = arg.partition("=")
        if key.strip() in CHECKPOINT_ARGS and value.strip():
            stamp = folder_stamp(value.strip())
            if stamp:
                return stamp
    return None


def with_system_in_first_turn(conversation: Sequence[ChatMessage]) -> list[ChatMessage]:
    """A dataset's system prompt at the head of the first user turn, as in lmms-eval's agentic loop.

    lmms-eval's chat models insert their own default system message in front of whatever they are
    given; a dataset's system prompt sent as a message would be a second system message on the
    fast path and absent from the loop. Both paths therefore carry it the same way: as the first
    paragraph of the first user turn (``turns.render_turn``'s convention), never as a message.
    """
    msgs = list(conversation)
    if not msgs or msgs[0].role != "system":
        return msgs
    system, first, rest = msgs[0], msgs[1], msgs[2:]
    return [ChatMessage(first.role, f"{system.text}\n\n{first.text}", first.images), *rest]


def parse_gen_kwargs(text: str | dict[str, Any]) -> dict[str, Any]:
    """lmms-eval's ``--gen_kwargs`` (``max_new_tokens=64,temperature=0``) parsed as lmms-eval parses
    it (``simple_parse_args_string``); a malformed string is a ``ConfigError``."""
    if isinstance(text, dict):
        return dict(text)
    if not text.strip():
        return {}
    from lmms_eval.utils import simple_parse_args_string

    try:
        return dict(simple_parse_args_string(text))
    except (ValueError, TypeError) as exc:
        raise ConfigError(
            f"--gen_kwargs {text!r}: expected key=value pairs separated by commas ({exc})"
        ) from None


def run_fastpath(
    model: str,
    model_args: str,
    tasks: str,
    *,
    config: RunConfig,
    output_path: Path,
    log_samples: bool = True,
    limit: int | None = None,
    batch_size: int | str | None = None,
    device: str | None = None,
    lm: Any = None,
    bootstrap_iters: int = 100_000,
    gen_kwargs: str | dict[str, Any] = "",
) -> FastPathOutcome:
    """Run the EDCT tasks ``tasks`` on lmms-eval model ``model``: lmms-eval's results dict and the
    records behind it. ``gen_kwargs`` (lmms-eval's ``--gen_kwargs`` string, or a mapping) applies to
    the target's requests."""
    defer_imports()  # before lmms-eval's first import: what it imports and the fast path never uses
    overrides = parse_gen_kwargs(gen_kwargs)
    opened = open_work_dir(config)  # a bad cache folder is refused before anything is built
    ahead: documents.RenderAhead | None = None
    settings: Settings | None = None
    try:
        ahead = render_ahead(tasks, limit, opened[0])
        manager, names = edct_tasks(tasks, model)  # other names are refused before the model is built
        if lm is None:
            lm = build_model(model, model_args, batch_size=batch_size, device=device)
        target = LmmsTarget(lm, model, model_args, overrides)
        settings = build_settings(config, target=target, run_name=f"{model} on {tasks}", opened=opened)
        return _evaluate(
            settings,
            target,
            model,
            model_args,
            tasks,
            manager,
            names,
            output_path,
            log_samples,
            limit,
            batch_size,
            device,
            bootstrap_iters,
            ahead,
        )
    finally:
        if ahead is not None:
            ahead.close()
        if settings is not None:
            settings.close()
        else:
            opened[1].close()


def render_ahead(tasks: str, limit: int | None, work_dir: Path) -> documents.RenderAhead | None:
    """Start building the calibration documents a run of ``tasks`` will use while lmms-eval is
    imported and builds its tasks (``documents.RenderAhead``); None unless every name in ``tasks``
    is an EDCT task and one is ``edct_calibration`` (a run whose names are refused builds nothing)."""
    requested = set(requested_tasks(tasks))
    if "edct_calibration" not in requested or not requested <= set(EDCT_TASKS):
        return None
    try:
        return documents.RenderAhead(work_dir, documents.calibration_rows(limit))
    except OSError as exc:  # no process to be had: the hook builds every document itself
        log.warning("building the calibration documents in place (no worker process: %s)", exc)
        return None


def _evaluate(
    settings: Settings,
    target: LmmsTarget,
    model: str,
    model_args: str,
    tasks: str,
    manager: Any,
    names: list[str],
    output_path: Path,
    log_samples: bool,
    limit: int | None,
    batch_size: int | str | None,
    device: str | None,
    bootstrap_iters: int,
    ahead: documents.RenderAhead | None = None,
) -> FastPathOutcome:
    from lmms_eval.evaluator_utils import (
        consolidate_group_results,
        consolidate_results,
        get_subtask_list,
        get_task_list,
        prepare_print_tasks,
    )
    from lmms_eval.loggers import EvaluationTracker
    from lmms_eval.tasks import get_task_dict
    from lmms_eval.utils import get_datetime_str, handle_non_serializable, hash_string

    from edct_task.engine.dispatch import Progress
    from edct_task.engine.driver import run_samples

    started = time.perf_counter()
    tracker = EvaluationTracker(output_path=str(output_path))

    scope = documents.DocumentScope(settings.images, settings.config.role_specs(), limit, ahead)
    with documents.document_scope(scope):  # the hooks build only the documents used, in our store
        task_dict = get_task_dict(names, manager)
    eval_tasks = get_task_list(task_dict)

    # documents → samples, in lmms-eval's document order
    plan: list[tuple[Any, documents.ChosenRows]] = []
    for task_output in eval_tasks:
        task = task_output.task
        if task is None:
            continue
        if (
            task.config.output_type != "generate_until_agentic"
            or getattr(task.config.process_results, "__module__", None) != HOOKS_MODULE
        ):
            raise ValueError(f"task {task_output.task_name} is not an EDCT task")
        docs = task.eval_docs
        used = len(docs) if limit is None else min(limit, len(docs))
        plan.append((task_output, documents.ChosenRows(docs, used)))

    refuse_calibration_roles(  # before any model call; no image is decoded for it
        {r: s for r, s in settings.config.role_specs().items() if r != "target"},
        f"task {tasks}",
        (documents.doc_source(row) for _, chosen in plan for row in chosen.rows_without_images()),
    )
    limits, dispatcher = settings.config.limits, settings.dispatcher
    progress = next((o for o in dispatcher.observers if isinstance(o, Progress)), None)
    if progress is not None:
        progress.expect(sum(chosen.used for _, chosen in plan))
    unreadable: list[SampleRecord] = []

    def drawn_samples() -> Iterator[SampleInput]:
        """Each document's sample, the document read and its image decoded as the driver draws
        it: the first target batch goes out while the later documents are decoded."""
        for _, chosen in plan:
            for doc_id in range(chosen.used):
                try:
                    doc = chosen.draw(doc_id)
                    image, notes = documents.doc_image_and_notes(doc)
                    ref = settings.pixels.put(image)  # kept decoded: the first target batches read it
                except documents.IMAGE_ERRORS as exc:  # a bad image costs its document, recorded
                    unreadable.append(documents.unreadable_record(chosen.doc(doc_id), exc))
                    if progress is not None:
                        progress.sample_done()
                    continue
                yield documents.sample_of(doc, ref, notes)
        import_in_background()  # every document is drawn: from here on the run waits on its backends

    records = run_samples(
        drawn_samples(),
        settings.protocol,
        dispatcher,
        limits,
        on_record=progress.sample_done if progress else None,
    )
    by_id = {r.sample.id: r for r in [*records, *unreadable]}
    setup = settings.describe()

    # score through the task's own hooks, as lmms-eval's evaluator would
    for task_output, chosen in plan:
        task = task_output.task
        for doc_id in range(chosen.used):
            doc = chosen.doc(doc_id)
            record = by_id[str(doc["id"])]
            response = lmms_results.final_response(record)  # what lmms-eval's loop logs as the response
            metrics = lmms_results.record_results(record, settings.images, setup)
            for metric, value in metrics.items():
                task_output.sample_metrics[(metric, "none")].append(value)
            if log_samples:
                saved = {k: v for k, v in doc.items() if k != "image"}
                task_output.logged_samples.append(
                    {
                        "doc_id": doc_id,
                        "doc": saved,
                        "target": task.doc_to_target(doc),
                        "arguments": [
                            turns.first_turn_text(doc),
                            task.config.generation_kwargs,
                            doc_id,
                            task_output.task_name,
                            FASTPATH_SPLIT,
                        ],
                        "resps": [[response]],
                        "filtered_resps": [response],
                        "doc_hash": hash_string(  # the whole document, as lmms-eval hashes it
                            json.dumps(doc, indent=2, default=handle_non_serializable, ensure_ascii=False)
                        ),
                        **metrics,
                    }
                )
    # from here on, what lmms-eval's `evaluate` does with the per-document metrics (evaluator.py,
    # rank 0), step for step; tests/lmms/test_fastpath_results.py pins the result to its own output
    with imports_refused():  # other tasks' metric modules: never an EDCT task's aggregation
        for task_output, _chosen in plan:
            task_output.calculate_aggregate_metric(bootstrap_iters=bootstrap_iters)
            task_output.calculate_clt_aggregate_metric()
            task_output.calculate_stability_metrics()
    results, logged, configs, versions, num_fewshot, higher_is_better = consolidate_results(eval_tasks)
    show_group_table = False
    if results:
        results, versions, show_group_table, *_ = consolidate_group_results(results, versions, task_dict)
    results_agg, group_agg = prepare_print_tasks(task_dict, results)
    subtask_list = get_subtask_list(task_dict)
    merged: dict[str, Any] = {}  # one dict across groups, as lmms-eval 0.7.3 has it
    for group, members in subtask_list.items():
        if members:
            for t in members:
                for m, h in higher_is_better[t].items():
                    if m not in merged:
                        merged[m] = h
                    if m in merged and merged[m] is not None and merged[m] != h:
                        merged[m] = None
            higher_is_better[group] = merged
    results_dict: dict[str, Any] = {
        "results": dict(results_agg.items()),
        **({"groups": dict(group_agg.items())} if (bool(group_agg) and show_group_table) else {}),
        "group_subtasks": dict(reversed(subtask_list.items())),
        "configs": dict(sorted(configs.items())),
        "versions": dict(sorted(versions.items())),
        "n-shot": dict(sorted(num_fewshot.items())),
        "higher_is_better": dict(sorted(higher_is_better.items())),
        "n-samples": {
            to.task_name: {"original": scope.rows(to.task.eval_docs), "effective": chosen.used}
            for to, chosen in plan
        },
        "config": {
            "model": model,
            "model_args": target.identity()["model_args"],
            "batch_size": batch_size,
            "device": device,
            "limit": limit,
            "driver": f"edct run ({limits.schedule} schedule)",
        },
        "edct": LmmsRunBlock(
            **setup,
            limits=limits.model_dump(mode="json"),
            target=target.identity(),
            target_generate_calls=target.calls,
            calls=dispatcher.stats.as_dict(),
            judge_health=judge_health(records),
            versions=run_versions(),
            wall_seconds=round(time.perf_counter() - started, 3),
        ).model_dump(mode="json"),
    }
    outcome = FastPathOutcome(results_dict, records, copy.deepcopy(dict(logged)))  # the tracker edits them
    tracker.general_config_tracker.log_experiment_args(
        model_source=model,
        model_args=model_args or "",
        system_instruction=None,
        chat_template=None,
        fewshot_as_multiturn=False,
    )
    datetime_str = get_datetime_str()
    tracker.save_results_aggregated(
        results=results_dict, samples=logged if log_samples else None, datetime_str=datetime_str
    )
    if log_samples:
        for task_name in results_dict["configs"]:
            tracker.save_results_samples(task_name=task_name, samples=logged[task_name])
    return outcome


def requested_tasks(tasks: str) -> list[str]:
    """The task names of ``--tasks`` (comma-separated, blanks ignored)."""
    return [t.strip() for t in tasks.split(",") if t.strip()]


def edct_tasks(tasks: str, model: str) -> tuple[Any, list[str]]:
    """lmms-eval's ``TaskManager`` over the EDCT task folder alone and the task names ``tasks``
    (``--tasks``) resolves to in it; ``ConfigError`` for any other name (``unknown_tasks``).
    lmms-eval's own index (3,223 YAML files) is read only to say which names are its tasks."""
    from lmms_eval.tasks import TaskManager

    from edct_task.lmms.plugin import task_dir

    requested = requested_tasks(tasks)
    manager = TaskManager("WARNING", include_path=task_dir(), include_defaults=False, model_name=model)
    names = manager.match_tasks(requested)
    unknown = sorted(set(requested) - set(names))
    if unknown or not requested:
        raise ConfigError(unknown_tasks(unknown, model))
    return manager, names


def unknown_tasks(unknown: Sequence[str], model: str) -> str:
    """What to say about task names the EDCT task folder does not have: lmms-eval's own tasks are
    named as such (the fast path runs EDCT tasks only), the rest as unknown."""
    listed = ", ".join(EDCT_TASKS)
    if not unknown:
        return f"--tasks names no task; EDCT tasks: {listed}"
    from lmms_eval.tasks import TaskManager

    theirs = set(TaskManager("WARNING", model_name=model).match_tasks(list(unknown)))
    parts = []
    if theirs:
        parts.append(
            f"{', '.join(sorted(theirs))}: lmms-eval task(s), not EDCT tasks; `edct run --model` runs EDCT "
            "tasks only (run them with lmms-eval, which runs the EDCT tasks too)"
        )
    rest = [t for t in unknown if t not in theirs]
    if rest:
        parts.append(f"unknown task(s) {', '.join(rest)}")
    return "; ".join(parts) + f"; EDCT tasks: {listed}"


def results_files(output_path: Path) -> list[Path]:
    """The ``*_results.json`` files lmms-eval's tracker wrote under ``output_path``."""
    from edct_task.run.lmms_results import find_results_files

    return find_results_files(Path(output_path))
