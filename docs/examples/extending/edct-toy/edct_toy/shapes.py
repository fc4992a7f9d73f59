"""The ``shapes`` domain: questions about one coloured shape, drawn from a CSV table.

``shapes.csv``: ``id, shape, colour, question, answer``; the image of a row is drawn when the
build reads it (a coloured circle, square or triangle on white).
"""

from __future__ import annotations

import csv
import io
from collections.abc import Mapping
from pathlib import Path

from edct_task.bench_data import BenchDataError, Domain, Input
from edct_task.bench_data.format import Candidate
from edct_task.bench_data.sources import RuleTally, SourceScan

SOURCE = "Shapes"
SHAPES = ("circle", "square", "triangle")


def draw(shape: str, colour: str) -> bytes:
    """A 96×96 PNG of one shape."""
    from PIL import Image, ImageDraw

    image = Image.new("RGB", (96, 96), "white")
    pen = ImageDraw.Draw(image)
    box = (20, 20, 76, 76)
    if shape == "circle":
        pen.ellipse(box, fill=colour)
    elif shape == "square":
        pen.rectangle(box, fill=colour)
    else:
        pen.polygon([(48, 16), (80, 78), (16, 78)], fill=colour)
    out = io.BytesIO()
    image.save(out, format="PNG")
    return out.getvalue()


def scan(paths: Mapping[str, Path | None]) -> SourceScan:
    """Read the table and apply the domain's one rule: a row names a known shape."""
    table = Path(paths["table"])  # checked by DOMAIN.inputs: it exists
    out = SourceScan(
        "shapes",
        SOURCE,
        {"table": table},
        {},
        [RuleTally("shapes.known_shape", f"the shape is one of {', '.join(SHAPES)}")],
    )
    with open(table, newline="", encoding="utf-8") as f:
        rows = list(csv.DictReader(f))
    for n, row in enumerate(rows, start=2):
        if set(row) != {"id", "shape", "colour", "question", "answer"}:
            raise BenchDataError(f"{table}:{n}: expected the columns id, shape, colour, question, answer")
        out.items_read += 1
        item_id = f"shapes-{row['id']}"
        if row["shape"] not in SHAPES:
            out.remove(item_id, "shapes.known_shape")
            continue
        out.candidates.append(
            Candidate(
                id=item_id,
                domain="shapes",
                question=row["question"],
                source=SOURCE,
                source_id=row["id"],
                image_path=None,
                image_reader=lambda row=row: draw(row["shape"], row["colour"]),
                image_label=f"{table}:{n}",
                metadata={"shape": row["shape"], "colour": row["colour"], "answer": row["answer"]},
            )
        )
    return out


DOMAIN = Domain(
    name="shapes",
    label=SOURCE,
    default_count=4,
    inputs=(Input("table", "--shapes-table", "shapes.csv: id, shape, colour, question, answer"),),
    scan=scan,
    system_prompt="You are looking at a drawing of one shape.",
    description="toy questions about one coloured shape",
)
