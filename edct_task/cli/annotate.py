"""``edct annotate RUN --annotator NAME``: the local web app for the paper's human validation (§4.4)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from edct_task.cli.options import optional_path

DEFAULT_PORT = 8770


def add_parser(sub: Any) -> None:
    p = sub.add_parser(
        "annotate",
        help="local web app to label a seeded sample of a run's interventions (edit validity, AC, EF)",
        description="Serve a local annotation page for a seeded draw of the run's interventions (one chain "
        "step of one sample each, id '<sample_id>#<step>'). Labels are appended to one JSONL file per "
        "annotator as they are given; reopening resumes where the annotator stopped. EDCT's own verdicts "
        "are never shown.",
    )
    p.add_argument(
        "run_dir",
        type=Path,
        metavar="RUN",
        help="an `edct run` output folder or lmms-eval output with logged samples",
    )
    p.add_argument(
        "--annotator", required=True, metavar="NAME", help="your name (letters, digits, '_', '.', '-')"
    )
    p.add_argument("--n", type=int, default=128, help="interventions to draw (128, as the paper)")
    p.add_argument(
        "--seed", type=int, default=0, help="seed of the draw; annotators of one study share it (0)"
    )
    p.add_argument(
        "--port", type=int, default=DEFAULT_PORT, help=f"port to serve on ({DEFAULT_PORT}; 0 = any free port)"
    )
    p.add_argument("--host", default="127.0.0.1", help="address to bind (127.0.0.1: this machine only)")
    optional_path(p, "--labels", "FILE", "label file (default RUN/annotations/<annotator>.jsonl)")


def run(args: argparse.Namespace) -> int:
    from edct_task.annotation.app import AnnotationSession, create_app
    from edct_task.annotation.interventions import draw, judgeable_interventions
    from edct_task.annotation.labels import LabelFileError, LabelLog, check_annotator
    from edct_task.annotation.server import bind, is_loopback, serve
    from edct_task.run.outputs import RunReadError, load_run

    def fail(message: str) -> int:
        print(f"edct annotate: {message}", file=sys.stderr)
        return 2

    try:
        check_annotator(args.annotator)
    except ValueError as exc:
        return fail(f"--annotator: {exc}")
    if args.n < 1:
        return fail(f"--n must be at least 1, got {args.n}")
    if not 0 <= args.port <= 65535:
        return fail(f"--port must be 0..65535, got {args.port}")
    try:
        loaded = load_run(args.run_dir)
        population = judgeable_interventions(loaded.records)
    except (RunReadError, ValueError) as exc:
        return fail(str(exc))
    if not population:
        return fail(
            f"{args.run_dir} has no intervention to label: no step has a verified edit and a re-query answer"
        )
    labels_path = args.labels or args.run_dir / "annotations" / f"{args.annotator}.jsonl"
    try:
        log = LabelLog(labels_path, args.annotator)
    except (LabelFileError, OSError, UnicodeDecodeError) as exc:
        return fail(str(exc))
    drawn = draw(population, args.n, args.seed)
    session = AnnotationSession(
        run_name=str(args.run_dir),
        draw=drawn,
        log=log,
        image_path=loaded.image_path,
        n_requested=args.n,
        seed=args.seed,
    )
    try:
        sock = bind(args.host, args.port)
    except OSError as exc:
        return fail(f"cannot listen on {args.host}:{args.port} ({exc.strerror or exc}); pass another --port")
    host, port = sock.getsockname()[:2]
    shown = f"[{host}]" if ":" in host else host
    note = "" if len(drawn) == args.n else f" (the run has only {len(drawn)})"
    print(f"annotating {len(drawn)} interventions{note} as {args.annotator}; labels: {labels_path}")
    print(f"done so far: {session.done()} / {len(drawn)}")
    print(f"open http://{shown}:{port}/ in a browser; Ctrl-C stops the server (labels are already on disk)")
    if not is_loopback(args.host):
        print(
            f"warning: bound to {args.host}: anyone who can reach this address can read the run "
            "and write labels"
        )
    sys.stdout.flush()
    try:
        hosts = ["127.0.0.1", "localhost", "::1", "[::1]"] if is_loopback(args.host) else None
        serve(create_app(session, allowed_hosts=hosts), sock)
    except KeyboardInterrupt:
        pass
    finally:
        sock.close()
    return 0
