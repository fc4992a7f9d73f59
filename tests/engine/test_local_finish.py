"""A handler's local work after its backend answered (``handlers.Finishing``: storing an edited
image) runs outside the role's slot: the editor's next call starts while the last edit is stored,
and the call's seconds are the backend's, its CPU the whole call's."""

from __future__ import annotations

import threading
import time
from collections.abc import Sequence
from typing import Any

import pytest
from support.hang_guard import hang_limit, scaled, wait_for

from edct_task.core.requests import EditImage, Failure
from edct_task.engine import dispatch
from edct_task.engine.handlers import Finishing


class _Editor:
    """An edit handler whose backend records when it starts and how long it ran, and whose finish
    waits on ``release`` (and records how long it waited)."""

    pool = "edit"
    batch_size = 1

    def __init__(self) -> None:
        self.started: list[str] = []
        self.called_s: list[float] = []
        self.release = threading.Event()
        self.waiting: list[str] = []
        self.held_s: list[float] = []
        self.finished: list[str] = []
        self.fail_finish = False

    def stage(self, request: EditImage) -> str:
        return "edit"

    def key(self, request: EditImage) -> dict[str, Any]:
        return {"instruction": request.instruction}

    def call(self, batch: Sequence[EditImage]) -> list[object]:
        started = time.perf_counter()
        self.started.append(batch[0].instruction)
        time.sleep(0.01)
        self.called_s.append(time.perf_counter() - started)
        return [f"raw:{batch[0].instruction}"]

    def finish(self, batch: Sequence[EditImage], raw: list[object]) -> list[object]:
        waiting = time.perf_counter()
        self.waiting.append(batch[0].instruction)
        assert self.release.wait(hang_limit(10))
        self.held_s.append(time.perf_counter() - waiting)
        if self.fail_finish:
            raise OSError(28, "No space left on device")
        spin = time.thread_time() + 0.02  # CPU the finish spends (counted as the stage's, locally)
        while time.thread_time() < spin:
            pass
        self.finished.append(batch[0].instruction)
        return [f"stored:{raw[0]}"]

    def encode(self, reply: object) -> dict[str, Any]:
        return {"reply": reply}

    def decode(self, value: dict[str, Any]) -> object:
        return value["reply"]


def _edit(text: str) -> EditImage:
    return EditImage(image="0" * 64, instruction=text, step=0, attempt=0, seed=0)


def _dispatcher(editor: _Editor) -> dispatch.Dispatcher:
    return dispatch.Dispatcher({EditImage: editor}, None, concurrency=dispatch.Concurrency(edit=1))


def test_the_editors_next_call_starts_while_the_last_edit_is_stored() -> None:
    editor = _Editor()
    assert isinstance(editor, Finishing)
    with _dispatcher(editor) as d:
        first, second = d.submit(_edit("a")), d.submit(_edit("b"))
        wait_for(lambda: len(editor.started) == 2 and len(editor.waiting) == 2, 10, every=0.005)
        # one editor slot: the second edit's backend call ran while the first edit's finish waits
        assert editor.started == ["a", "b"] and editor.finished == []
        assert not first.done() and not second.done()
        time.sleep(scaled(0.2))  # both finishes hold on: time that must not count as the backend's
        editor.release.set()
        assert first.result(hang_limit(10)) == "stored:raw:a"
        assert second.result(hang_limit(10)) == "stored:raw:b"
        stats = d.stats.as_dict()
        seconds = d.stats.seconds["edit"]
    assert stats["calls"] == {"edit": 2}
    # seconds: the backend's time in its slot, which holds both calls as the editor timed them,
    # and not the finishes' waits on the test (in there if a finish held the slot or was timed)
    called, held = sum(editor.called_s), min(editor.held_s)
    assert 2 * 0.01 <= called <= seconds < called + held, (editor.called_s, editor.held_s, seconds)
    assert stats["local_cpu_seconds"]["edit"] >= 2 * 0.02
    assert stats["cpu_seconds"]["edit"] >= stats["local_cpu_seconds"]["edit"]


def test_an_error_in_the_finish_fails_the_calls_futures_instead_of_hanging_them() -> None:
    editor = _Editor()
    editor.fail_finish = True
    editor.release.set()
    with _dispatcher(editor) as d:
        future = d.submit(_edit("a"))
        with pytest.raises(OSError, match="No space left"):
            future.result(hang_limit(10))


def test_a_full_disk_while_storing_an_edit_stops_the_run() -> None:
    from PIL import Image

    from edct_task.engine.handlers import EditHandler
    from edct_task.engine.storage import StorageError

    class FullDisk:
        def put(self, image):
            raise OSError(28, "No space left on device")

    handler = EditHandler.__new__(EditHandler)
    handler.pixels = FullDisk()
    with pytest.raises(StorageError):
        handler.finish([_edit("a")], [Image.new("RGB", (4, 4))])


def test_a_failed_edit_is_not_finished() -> None:
    from edct_task.engine.handlers import EditHandler

    handler = EditHandler.__new__(EditHandler)  # finish needs neither roles nor the store here
    failure = Failure("timeout", "the editor did not answer")
    assert handler.finish([_edit("a")], [failure]) == [failure]
