"""``edct build-bench --okvqa-hub``: the cost of building from a Hub table of the real size.

Writes an OK-VQA repository in the Hub schema (``lmms-lab-encoder/OK-VQA``: config ``default``,
split ``val2014``) with as many rows as the real one (5,046; seeded noise JPEGs of
``--side`` px), then times the build of 160 items from it (``datasets.load_dataset`` of the
parquet, the rules over every row, the seeded selection, every selected image read lazily from
its row, the save_to_disk folder and the manifest), cold (the parquet not yet converted to Arrow
in the datasets cache) and warm.

    python benchmarks/bench_hub_build.py [--rows 5046] [--side 160]
"""

from __future__ import annotations

import argparse
import io
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
from PIL import Image

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

from edct_task.bench_data import BuildRequest, build_bench
from edct_task.bench_data.domain import HubSource


def write_repo(root: Path, rows: int, side: int) -> int:
    import datasets

    rng = np.random.default_rng(0)
    answers = ["racing", "tabby", "martin", "yes", "no", "pizza", "kite", "surfing"]

    def jpeg() -> bytes:
        buf = io.BytesIO()
        Image.fromarray(rng.integers(0, 256, (side * 3 // 4, side, 3), dtype=np.uint8)).save(buf, "JPEG")
        return buf.getvalue()

    data = [
        {
            "question_id": str(1_000_000 + i),
            "image": {"bytes": jpeg(), "path": None},
            "question": f"What is shown in picture {i}?",
            "answers": [answers[(i + j) % len(answers)] for j in range(10)],
            "question_type": "other",
            "answer_type": "other",
        }
        for i in range(rows)
    ]
    features = datasets.Features(
        {
            "question_id": datasets.Value("string"),
            "image": datasets.Image(),
            "question": datasets.Value("string"),
            "answers": datasets.Sequence(datasets.Value("string")),
            "question_type": datasets.Value("string"),
            "answer_type": datasets.Value("string"),
        }
    )
    (root / "data").mkdir(parents=True)
    path = root / "data" / "val2014-00000-of-00001.parquet"
    datasets.Dataset.from_list(data, features=features).to_parquet(str(path))
    (root / "README.md").write_text(
        "---\nconfigs:\n- config_name: default\n  data_files:\n  - split: val2014\n"
        "    path: data/val2014-*\n---\n"
    )
    return path.stat().st_size


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=5046)
    parser.add_argument("--side", type=int, default=160)
    args = parser.parse_args()
    import datasets

    datasets.disable_progress_bars()
    with tempfile.TemporaryDirectory() as tmp:
        repo = Path(tmp) / "okvqa"
        t = time.perf_counter()
        size = write_repo(repo, args.rows, args.side)
        print(
            f"repo: {args.rows} rows, parquet {size / 1e6:.1f} MB, written in {time.perf_counter() - t:.1f} s"
        )
        for run in ("cold", "warm"):
            t = time.perf_counter()
            result = build_bench(
                BuildRequest(
                    out=Path(tmp) / f"bench-{run}",
                    hubs={"okvqa": HubSource(str(repo))},
                    counts={"okvqa": 160, "drivelm": 0, "3dsr": 0},
                )
            )
            d = result.manifest["domains"]["okvqa"]
            print(
                f"{run}: {time.perf_counter() - t:.1f} s for {d['selected']} of {d['eligible']} eligible "
                f"({d['items_read']} read)"
            )
    return 0


if __name__ == "__main__":
    sys.exit(main())
