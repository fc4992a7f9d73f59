"""``edct build-bench`` and ``edct export-counterfactuals``: argument parsers and their commands.

``build-bench``'s per-domain flags, groups and help come from the registered ``Domain`` records
(``edct_task.bench_data.domains``): a domain's inputs, ``--<domain>-hub``, ``--<domain>-revision``
and its Hub options."""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import TYPE_CHECKING

from edct_task.cli.options import add_output

if TYPE_CHECKING:
    from edct_task.bench_data import BuildRequest

COMMANDS = ("build-bench", "export-counterfactuals")


def add_parser(sub: argparse._SubParsersAction) -> None:
    from edct_task.bench_data.domains import domains

    registered = domains()
    labels = ", ".join(d.label for d in registered)
    build = sub.add_parser(
        "build-bench",
        help=f"build the EDCT-Bench dataset from {labels} (local copies or their Hugging Face Hub datasets)",
        description="Read each domain's source in its published layout (local files, or the Hub dataset "
        f"with {' / '.join(d.hub_flag for d in registered if d.hub)}), apply the selection rules "
        "(docs/guides/hub-data.md), select "
        + ", ".join(f"{d.default_count} {d.label}" for d in registered)
        + " items (seeded, or an explicit id list), open every selected image, and write a `datasets` "
        "save_to_disk folder with a manifest. A domain is built when its files or Hub dataset are given.",
    )
    for domain in registered:
        title = f"{domain.label} (domain {domain.name})"
        g = build.add_argument_group(title, domain.description or None)
        if domain.hub is not None:
            g.add_argument(
                domain.hub_flag, dest=_dest("hub", domain.name), metavar="ID|DIR", help=domain.hub.help
            )
            g.add_argument(
                domain.revision_flag,
                dest=_dest("revision", domain.name),
                metavar="REV",
                help=f"branch, tag or commit of {domain.hub_flag}",
            )
            for option in domain.hub.options:
                g.add_argument(
                    domain.option_flag(option),
                    dest=_dest("option", domain.name, option.name),
                    metavar=option.name.upper(),
                    help=f"{option.help} (with {domain.hub_flag})",
                )
        for item in domain.inputs:
            g.add_argument(
                item.flag,
                dest=_dest("input", domain.name, item.name),
                type=Path,
                metavar="DIR" if item.kind == "folder" else "FILE",
                help=item.help,
            )
    add_output(build, "output folder (written atomically)", required=True)
    build.add_argument("--seed", type=int, default=0, help="selection seed (default 0)")
    build.add_argument("--ids", type=Path, help="explicit id list, one id per line (counts ignored)")
    build.add_argument(
        "--counts",
        help="items per domain: one integer per domain in the order "
        + ",".join(d.name for d in registered)
        + " (default "
        + ",".join(str(d.default_count) for d in registered)
        + "), or NAME=N pairs (e.g. "
        + f"{registered[0].name}=20; a domain not named keeps its default)",
    )
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


def _dest(*parts: str) -> str:
    """The namespace attribute of a generated flag (``input:okvqa:questions``)."""
    return ":".join(parts)


def build_request(args: argparse.Namespace) -> BuildRequest:
    """The ``BuildRequest`` the generated per-domain flags describe."""
    from edct_task.bench_data import BuildRequest, default_counts, parse_counts
    from edct_task.bench_data.domain import HubSource
    from edct_task.bench_data.domains import domains
    from edct_task.bench_data.format import BenchDataError

    given = vars(args)
    inputs: dict[str, dict[str, Path]] = {}
    hubs: dict[str, HubSource] = {}
    for domain in domains():
        paths = {i.name: given[_dest("input", domain.name, i.name)] for i in domain.inputs}
        if any(p is not None for p in paths.values()):
            inputs[domain.name] = {k: v for k, v in paths.items() if v is not None}
        if domain.hub is None:
            continue
        location = given[_dest("hub", domain.name)]
        revision = given[_dest("revision", domain.name)]
        options = {
            o.name: value
            for o in domain.hub.options
            if (value := given[_dest("option", domain.name, o.name)]) is not None
        }
        for flag, value in (
            (domain.revision_flag, revision),
            *((domain.option_flag(o), options.get(o.name)) for o in domain.hub.options),
        ):
            if value is not None and not location:
                raise BenchDataError(f"{flag} applies to {domain.hub_flag}, which is not given")
        if location:
            hubs[domain.name] = HubSource(location, revision, options)
    return BuildRequest(
        out=args.output,
        inputs=inputs,
        hubs=hubs,
        seed=args.seed,
        ids_file=args.ids,
        counts=parse_counts(args.counts) if args.counts else default_counts(),
        skip_unreadable=args.skip_unreadable,
        overwrite=args.overwrite,
    )


def run(args: argparse.Namespace) -> int:
    from edct_task.bench_data import build_bench
    from edct_task.counterfactuals.export import export_counterfactuals

    if args.command == "build-bench":
        result = build_bench(build_request(args))
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
