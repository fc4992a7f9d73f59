"""The annotation web application (FastAPI): one intervention per screen, every label saved at once.

Routes (all JSON except the page, its two assets and the images):

``GET /``                      the annotation page
``GET /assets/annotate.{js,css}``
``GET /api/session``           annotator, the drawn interventions' ids, labels so far, where to resume
``GET /api/items/{i}``         what the annotator sees of intervention i (0-based in the draw):
                               question, original answer and explanation, the instruction (and the
                               earlier edits of the chain), the new answer and explanation, image URLs
``GET /images/{i}/{before|after}``  the image the edit was applied to, and the edited image
``POST /api/labels``           ``{"intervention", "edit_valid", "ac", "ef"}`` → one line appended to
                               the annotator's JSONL file (flushed and fsynced) before the reply

EDCT's own verdicts (judge scores, gate numbers, sample status) are never sent to the page. An
unknown intervention id is answered 404 and a malformed label 422, each with a message saying what
is wrong (never repeating the input); nothing is written for either. Writes from another origin
(403), bodies over 16 KiB (413) and JSON with NaN/Infinity (422) are refused before any handler
(``guard.WriteGuard``).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any

from fastapi import FastAPI, HTTPException, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import FileResponse, HTMLResponse, JSONResponse, Response
from starlette.middleware.trustedhost import TrustedHostMiddleware

from edct_task.annotation.guard import WriteGuard
from edct_task.annotation.interventions import Intervention
from edct_task.annotation.labels import LabelChoice, LabelLog

__all__ = ["AnnotationSession", "create_app"]

_ASSET_TYPES = {"annotate.js": "text/javascript; charset=utf-8", "annotate.css": "text/css; charset=utf-8"}
_NO_STORE = {"Cache-Control": "no-store"}
_PAGE_HEADERS = {
    **_NO_STORE,
    # the page loads only its own script, style, images and API; nothing inline, nothing else
    "Content-Security-Policy": "default-src 'none'; script-src 'self'; style-src 'self'; "
    "img-src 'self' data:; connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'",
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
}


@dataclass
class AnnotationSession:
    """One annotator's session over a seeded draw of a run's interventions."""

    run_name: str
    draw: Sequence[Intervention]
    log: LabelLog
    image_path: Callable[[str], Path | None]
    n_requested: int
    seed: int

    def __post_init__(self) -> None:
        self.index = {item.id: i for i, item in enumerate(self.draw)}

    def position(self) -> int:
        """Index of the first drawn intervention without a complete label (len(draw) when all are)."""
        latest = self.log.latest
        for i, item in enumerate(self.draw):
            label = latest.get(item.id)
            if label is None or not label.complete:
                return i
        return len(self.draw)

    def done(self) -> int:
        latest = self.log.latest
        return sum(1 for item in self.draw if item.id in latest and latest[item.id].complete)

    def labels(self) -> dict[str, dict[str, Any]]:
        latest = self.log.latest
        return {
            item.id: {"edit_valid": lab.edit_valid, "ac": lab.ac, "ef": lab.ef, "complete": lab.complete}
            for item in self.draw
            if (lab := latest.get(item.id)) is not None
        }

    def item(self, i: int) -> dict[str, Any]:
        iv = self.draw[i]
        record, step = iv.record, iv.step
        earlier = [s.instruction for s in record.steps if s.index < step.index]
        ins = step.instruction
        label = self.labels().get(iv.id)
        return {
            "index": i,
            "total": len(self.draw),
            "id": iv.id,
            "step": step.index,
            "question": record.sample.question,
            "system_prompt": record.sample.system_prompt,
            "original": {"answer": record.baseline.answer, "explanation": record.baseline.explanation}
            if record.baseline
            else None,
            "instruction": ins.model_dump(),
            "earlier_edits": [e.change for e in earlier],
            "new": {"answer": step.requery.answer, "explanation": step.requery.explanation}
            if step.requery
            else None,
            "before_label": "Original"
            if step.index == 1
            else f"After edit {step.index - 1} (before this edit)",
            "after_label": f"After edit {step.index}",
            "before_url": f"/images/{i}/before",
            "after_url": f"/images/{i}/after",
            "label": label,
        }


def _asset(name: str) -> bytes:
    return (resources.files("edct_task.annotation") / "assets" / name).read_bytes()


def create_app(session: AnnotationSession, *, allowed_hosts: Sequence[str] | None = None) -> FastAPI:
    """The FastAPI application of one annotation session.

    ``allowed_hosts`` (e.g. ``["127.0.0.1", "localhost"]``) refuses requests whose ``Host`` header
    names another host (400), so a web page elsewhere cannot reach the server by DNS rebinding.
    """
    app = FastAPI(title="EDCT annotation", docs_url=None, redoc_url=None, openapi_url=None)
    app.add_middleware(WriteGuard)  # body size, finite JSON, same-origin writes (inside the Host check)
    if allowed_hosts is not None:
        app.add_middleware(TrustedHostMiddleware, allowed_hosts=list(allowed_hosts))
    total = len(session.draw)

    @app.exception_handler(RequestValidationError)
    async def invalid(request: Request, exc: RequestValidationError) -> JSONResponse:
        # FastAPI's default reply repeats the input; this one says only what is wrong and where
        detail = [{"loc": list(e.get("loc", ())), "msg": e.get("msg", "")} for e in exc.errors()[:10]]
        return JSONResponse({"detail": detail}, status_code=422)

    def checked_index(i: int) -> int:
        if not 0 <= i < total:
            raise HTTPException(
                404, f"no intervention at position {i}: this session has {total} (0..{total - 1})"
            )
        return i

    @app.get("/", response_class=HTMLResponse)
    def page() -> Response:
        return HTMLResponse(_asset("annotate.html"), headers=_PAGE_HEADERS)

    @app.get("/assets/{name}")
    def asset(name: str) -> Response:
        if name not in _ASSET_TYPES:
            raise HTTPException(404, f"no asset {name!r}")
        return Response(_asset(name), media_type=_ASSET_TYPES[name], headers=_NO_STORE)

    @app.get("/api/session")
    def get_session() -> dict[str, Any]:
        return {
            "annotator": session.log.annotator,
            "run": session.run_name,
            "total": total,
            "n_requested": session.n_requested,
            "seed": session.seed,
            "ids": [item.id for item in session.draw],
            "labels": session.labels(),
            "done": session.done(),
            "position": session.position(),
            "labels_file": str(session.log.path),
        }

    @app.get("/api/items/{i}")
    def get_item(i: int) -> dict[str, Any]:
        return session.item(checked_index(i))

    @app.get("/images/{i}/{which}")
    def get_image(i: int, which: str) -> Response:
        iv = session.draw[checked_index(i)]
        if which not in ("before", "after"):
            raise HTTPException(404, f"no image {which!r}: use 'before' or 'after'")
        ref = iv.before_image if which == "before" else iv.after_image
        path = session.image_path(ref)
        if path is None or not Path(path).is_file():
            raise HTTPException(404, f"the run's output has no file for the {which} image of {iv.id}")
        return FileResponse(path, media_type="image/png")

    @app.post("/api/labels")
    def post_label(choice: LabelChoice) -> dict[str, Any]:
        if choice.intervention not in session.index:
            raise HTTPException(
                404, f"unknown intervention: not among the {total} interventions of this session"
            )
        label = session.log.append(choice)
        return {
            "saved": {
                "intervention": label.intervention,
                "edit_valid": label.edit_valid,
                "ac": label.ac,
                "ef": label.ef,
                "time": label.time.isoformat(),
                "complete": label.complete,
            },
            "done": session.done(),
            "total": total,
            "position": session.position(),
        }

    return app
