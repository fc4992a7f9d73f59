"""Tiny copies of the three sources' Hub repositories, in the exact schemas the Hub holds them in.

- ``lmms-lab-encoder/OK-VQA``: config ``default``, split ``val2014``, parquet with ``question_id``
  (str), ``image`` (Image), ``question``, ``answers`` (list of str), ``question_type``, ``answer_type``.
- ``oscarqjh/3DSRBench_lmmseval``: configs ``3dsr`` and ``3dsr_circular``, split ``test``, parquet with
  ``image``, ``question``, ``A``–``D``, ``answer``, ``category``, ``index``, ``qid``.
- ``ccvl/3DSRBench``: the VLMEvalKit TSV ``3dsrbench_v1_vlmevalkit.tsv`` (base64 images).
- ``OpenDriveLab/DriveLM``: files ``v1_1_train_nus.json`` and ``drivelm_nus_imgs_train.zip``.

Table repositories are laid out as ``push_to_hub`` writes them (``README.md`` with ``configs:`` and
``<dir>/<split>-00000-of-00001.parquet``). ``install_in_hub_cache`` puts a folder into a Hub cache
the way ``huggingface_hub`` stores a downloaded snapshot (``refs/main`` → ``snapshots/<commit>``),
so that with ``HF_HUB_OFFLINE=1`` the real Hub id resolves to it through ``huggingface_hub``.
"""

from __future__ import annotations

import io
import shutil
import zipfile
from pathlib import Path

from PIL import Image
from support.sources_fixture import (
    ImageFactory,
    _threedsr_rows,
    noise_image,
    write_drivelm,
    write_threedsr_tsv,
)

# OK-VQA: 5 rows; 3 eligible, 1 yes/no, 1 without answers.
OKVQA_ROWS = [
    ("2971475", "What sport can you use this for?", ["racing"] * 6 + ["motocross"] * 4),
    ("2621485", "What is the name of the famous dreamer who spoke at this place?", ["martin"] * 10),
    ("4587525", "What breed is this cat?", ["tabby"] * 7 + ["domestic"] * 3),
    ("3932265", "Is this cat hungry?", ["yes"] * 8 + ["no"] * 2),
    ("1310745", "What drink is in the cup?", []),
]
OKVQA_REMOVED = {"okvqa.has_annotation": 1, "okvqa.not_yes_no": 1}
THREEDSR_REMOVED = {"3dsr.orientation_family": 2, "3dsr.one_variant": 1}


def _jpeg(image: Image.Image) -> bytes:
    buf = io.BytesIO()
    image.save(buf, format="JPEG", quality=90)
    return buf.getvalue()


def _card(configs: dict[str, tuple[str, str]]) -> str:
    """A dataset card whose ``configs:`` name each config's split and files, as ``push_to_hub`` writes."""
    lines = ["---", "configs:"]
    for name, (split, pattern) in configs.items():
        lines += [f"- config_name: {name}", "  data_files:", f"  - split: {split}", f"    path: {pattern}"]
    return "\n".join([*lines, "---", "", "A test copy.", ""])


def _parquet(path: Path, rows: list[dict], features: dict) -> None:
    import datasets

    path.parent.mkdir(parents=True, exist_ok=True)
    datasets.Dataset.from_list(rows, features=datasets.Features(features)).to_parquet(str(path))


def write_okvqa_repo(root: Path, image: ImageFactory = noise_image) -> Path:
    import datasets

    rows = [
        {
            "question_id": qid,
            "image": {"bytes": _jpeg(image(i)), "path": None},
            "question": q,
            "answers": answers,
            "question_type": "other",
            "answer_type": "other",
        }
        for i, (qid, q, answers) in enumerate(OKVQA_ROWS)
    ]
    features = {
        "question_id": datasets.Value("string"),
        "image": datasets.Image(),
        "question": datasets.Value("string"),
        "answers": datasets.Sequence(datasets.Value("string")),
        "question_type": datasets.Value("string"),
        "answer_type": datasets.Value("string"),
    }
    _parquet(root / "data" / "val2014-00000-of-00001.parquet", rows, features)
    (root / "README.md").write_text(_card({"default": ("val2014", "data/val2014-*")}))
    return root


def _threedsr_features() -> dict:
    import datasets

    text = {c: datasets.Value("string") for c in ("question", "A", "B", "C", "D", "answer", "category")}
    return {
        "image": datasets.Image(),
        **text,
        "index": datasets.Value("int64"),
        "qid": datasets.Value("string"),
    }


def write_threedsr_repo(root: Path, image: ImageFactory = noise_image) -> Path:
    """lmms-eval's copy: ``3dsr`` (one row per question) and ``3dsr_circular`` (four option orders)."""
    plain, circular = [], []
    for r in _threedsr_rows():
        data = _jpeg(image(int(r["image_url"][-8:-4])))
        row = {
            "image": {"bytes": data, "path": None},
            **{k: r[k] for k in ("question", "A", "B", "C", "D", "answer", "category")},
            "index": int(r["index"]),
            "qid": f"q{r['index']}",
        }
        plain.append(row)
        options = [r[k] for k in "ABCD" if r[k]]
        for turn in range(len(options)):  # VLMEvalKit's circular evaluation: the options rotated
            rotated = options[turn:] + options[:turn]
            letters = dict(zip("ABCD", [*rotated, "", ""], strict=False))
            answer = "ABCD"[rotated.index(r[r["answer"]])]
            circular.append({**row, **letters, "answer": answer, "index": int(r["index"]) + 1000 * turn})
    _parquet(root / "3dsr" / "test-00000-of-00001.parquet", plain, _threedsr_features())
    _parquet(root / "3dsr_circular" / "test-00000-of-00001.parquet", circular, _threedsr_features())
    configs = {"3dsr": ("test", "3dsr/test-*"), "3dsr_circular": ("test", "3dsr_circular/test-*")}
    (root / "README.md").write_text(_card(configs))
    return root


def write_threedsr_tsv_repo(root: Path, image: ImageFactory = noise_image) -> Path:
    root.mkdir(parents=True, exist_ok=True)
    write_threedsr_tsv(root, image)
    (root / "README.md").write_text("3DSRBench (test copy)\n")
    return root


def write_drivelm_repo(root: Path, image: ImageFactory = noise_image) -> Path:
    """``v1_1_train_nus.json`` and ``drivelm_nus_imgs_train.zip`` (``nuscenes/samples/CAM_*/…jpg``)."""
    work = root.parent / (root.name + "-work")
    qa, nus = write_drivelm(work, image)
    root.mkdir(parents=True, exist_ok=True)
    shutil.copy(qa, root / "v1_1_train_nus.json")
    with zipfile.ZipFile(root / "drivelm_nus_imgs_train.zip", "w") as z:
        for p in sorted(nus.rglob("*.jpg")):
            z.write(p, str(Path("nuscenes") / p.relative_to(nus)))
    shutil.rmtree(work)
    return root


def install_in_hub_cache(cache: Path, repo_id: str, folder: Path, commit: str, ref: str = "main") -> Path:
    """Store ``folder`` in the Hub cache ``cache`` as snapshot ``commit`` of dataset ``repo_id``."""
    storage = cache / ("datasets--" + repo_id.replace("/", "--"))
    snapshot = storage / "snapshots" / commit
    shutil.copytree(folder, snapshot)
    (storage / "refs").mkdir(parents=True, exist_ok=True)
    (storage / "refs" / ref).write_text(commit)
    return snapshot
