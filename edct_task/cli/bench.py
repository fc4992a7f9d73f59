"""``edct build-bench`` and ``edct export-counterfactuals``: argument parsers and their commands."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from edct_task.cli.options import add_output

COMMANDS = ("build-bench", "export-counterfactuals")


def add_parser(sub: argparse._SubParsersAction) -> None:
    build = sub.add_parser(
        "build-bench",
        help="build the EDCT-Bench dataset from OK-VQA, DriveLM-nuScenes and 3DSRBench "
        "(local copies or their Hugging Face Hub datasets)",
        description="Read each source in its published layout (local files, or the Hub dataset with "
        "--okvqa-hub / --drivelm-hub / --3dsr-hub), apply the selection rules (docs/guides/hub-data.md), "
        "select 160/80/60 items (seeded, or an explicit id list), open every selected image, and write a "
        "`datasets` save_to_disk folder with a manifest. A domain is built when its files or Hub "
        "dataset are given.",
    )
    g = build.add_argument_group("OK-VQA")
    g.add_argument(
        "--okvqa-hub",
        metavar="ID|DIR",
        help="the Hub dataset lmms-eval's ok_vqa task reads (lmms-lab-encoder/OK-VQA, split val2014), "
        "or a local folder laid out like it",
    )
    g.add_argument("--okvqa-revision", metavar="REV", help="branch, tag or commit of --okvqa-hub")
    g.add_argument("--okvqa-questions", type=Path, help="OpenEnded_mscoco_val2014_questions.json")
    g.add_argument("--okvqa-annotations", type=Path, help="mscoco_val2014_annotations.json")
    g.add_argument("--coco-images", type=Path, help="COCO val2014 folder (COCO_val2014_000000xxxxxx.jpg)")
    g = build.add_argument_group("DriveLM-nuScenes")
    g.add_argument(
        "--drivelm-hub",
        metavar="ID|DIR",
        help="OpenDriveLab/DriveLM (v1_1_train_nus.json and drivelm_nus_imgs_train.zip), "
        "or a local folder holding those two files",
    )
    g.add_argument("--drivelm-revision", metavar="REV", help="branch, tag or commit of --drivelm-hub")
    g.add_argument("--drivelm-json", type=Path, help="DriveLM QA JSON, e.g. v1_1_train_nus.json")
    g.add_argument("--nuscenes-root", type=Path, help="nuScenes folder holding samples/CAM_FRONT/")
    g = build.add_argument_group("3DSRBench")
    g.add_argument(
        "--3dsr-hub",
        dest="threedsr_hub",
        metavar="ID|DIR",
        help="oscarqjh/3DSRBench_lmmseval (lmms-eval's copy, split test), ccvl/3DSRBench (its VLMEvalKit "
        "TSV), or a local folder laid out like one of them",
    )
    g.add_argument("--3dsr-revision", dest="threedsr_revision", metavar="REV", help="revision of --3dsr-hub")
    g.add_argument(
        "--3dsr-config",
        dest="threedsr_config",
        default="3dsr",
        help="config of the lmms-eval table (default 3dsr; 3dsr_circular holds the circular variants, "
        "which the one-variant rule drops)",
    )
    g.add_argument(
        "--3dsr-table",
        dest="threedsr_table",
        type=Path,
        help="3dsrbench_v1.csv, or a VLMEvalKit TSV with base64 images",
    )
    g.add_argument(
        "--3dsr-images",
        dest="threedsr_images",
        type=Path,
        help="folder of the 3DSRBench images (e.g. the unzipped coco_images.zip)",
    )
    add_output(build, "output folder (written atomically)", required=True)
    build.add_argument("--seed", type=int, default=0, help="selection seed (default 0)")
    build.add_argument("--ids", type=Path, help="explicit id list, one id per line (counts ignored)")
    build.add_argument("--counts", default="160,80,60", help="items per domain: okvqa,drivelm,3dsr")
    build.add_argument(
        "--skip-unreadable",
        action="store_true",
        help="skip (and count) items whose image cannot be decoded instead of failing",
    )
    build.add_argument("--overwrite", action="store_true", help="replace an existing output folder")

    export = sub.add_parser(
        "export-counterfactuals",
        help="export the verified counterfactual pairs of an `edct run` folder as training data",
        description="Write the chain steps that passed edit verification (original and edited image, "
        "question, answers, instructions) as a `datasets` folder and as chat fine-tuning JSONL.",
    )
    export.add_argument("run_dir", type=Path, help="output folder of `edct run` (samples.jsonl, images/)")
    add_output(export, "output folder (written atomically)", required=True)
    export.add_argument(
        "--consistent-only",
        action="store_true",
        help="only pairs whose re-query answer the judge found consistent (AC = 1)",
    )
    export.add_argument("--overwrite", action="store_true", help="replace an existing output folder")


def run(args: argparse.Namespace) -> int:
    from edct_task.bench_data import BuildRequest, build_bench, parse_counts
    from edct_task.counterfactuals.export import export_counterfactuals

    if args.command == "build-bench":
        from edct_task.bench_data.format import BenchDataError
        from edct_task.bench_data.hub import HubSource

        hubs = {}
        for key, flag in (("okvqa", "okvqa"), ("drivelm", "drivelm"), ("threedsr", "3dsr")):
            location, revision = getattr(args, f"{key}_hub"), getattr(args, f"{key}_revision")
            if revision and not location:
                raise BenchDataError(f"--{flag}-revision applies to --{flag}-hub, which is not given")
            hubs[f"{key}_hub"] = HubSource(location, revision) if location else None
        result = build_bench(
            BuildRequest(
                out=args.output,
                okvqa_questions=args.okvqa_questions,
                okvqa_annotations=args.okvqa_annotations,
                coco_images=args.coco_images,
                drivelm_json=args.drivelm_json,
                nuscenes_root=args.nuscenes_root,
                threedsr_table=args.threedsr_table,
                threedsr_images=args.threedsr_images,
                threedsr_config=args.threedsr_config,
                **hubs,
                seed=args.seed,
                ids_file=args.ids,
                counts=parse_counts(args.counts),
                skip_unreadable=args.skip_unreadable,
                overwrite=args.overwrite,
            )
        )
        m = result.manifest
        for domain, d in m["domains"].items():
            removed = ", ".join(f"{r['name']}={r['removed']}" for r in d["rules"])
            print(
                f"{domain:<8} {d['selected']:>4} selected of {d['eligible']} eligible "
                f"({d['items_read']} read; removed: {removed})"
            )
        print(f"wrote {result.path} ({m['total']} items); use it with: export EDCT_BENCH_DATA={result.path}")
        return 0
    result = export_counterfactuals(
        args.run_dir, args.output, consistent_only=args.consistent_only, overwrite=args.overwrite
    )
    print(json.dumps(result.manifest, indent=2))
    print(f"wrote {result.path}: {result.pairs} verified pairs, {result.chat_lines} chat lines")
    return 0
