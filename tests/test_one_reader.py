"""One reader of runs: ``edct_task.run.outputs`` is the only product module that decodes a run.

A run is decoded where its sample records are parsed from a file (``SampleRecord.model_validate*``),
where lmms-eval's logged final responses are unwrapped (``filtered_resps`` / ``resps``), or where
run files are globbed for. Every other module reads runs through ``load_run``. On the old main six
modules decoded runs their own way and disagreed (``estimate/latency`` looked for a key nothing
writes). The EDCT run folder is the one format: not even the reader decodes records from
lmms-eval's logged responses (it reads the run folder they name).
"""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PRODUCT = ("edct_task", "model_adapters", "verification")

DECODING = re.compile(
    r"SampleRecord\.model_validate"  # records parsed from text or data
    r"|\.get\(\s*[\"'](?:filtered_resps|resps|edct_record)[\"']"  # logged responses unwrapped
    r"|\[\s*[\"'](?:filtered_resps|resps|edct_record)[\"']\s*\]"
    r"|\.r?glob\([^)]*(?:samples|results)"  # run files looked for
)

ALLOWED = {
    "edct_task/run/outputs.py": "the one reader",
    "edct_task/run/checks.py": "the checked parsing the reader calls (parse_record)",
    "edct_task/leaderboard/bundle.py": "a bundle's samples.jsonl member: the bundle format, not a run folder",
    "edct_task/run/sharding.py": "records passed between the ranks of one running job",
    "edct_task/inspect/solver.py": "a record handed to Inspect's scorer in the sample's store",
    "edct_task/inspect/scorer.py": "the record Inspect's solver handed over in the sample's store",
}


def _offenders() -> list[str]:
    out = []
    for package in PRODUCT:
        for path in sorted((ROOT / package).rglob("*.py")):
            rel = path.relative_to(ROOT).as_posix()
            if rel in ALLOWED:
                continue
            for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
                if DECODING.search(line) and not line.lstrip().startswith("#"):
                    out.append(f"{rel}:{number}: {line.strip()}")
    return out


def test_no_product_module_but_the_reader_decodes_runs() -> None:
    assert _offenders() == []


UNWRAPPING = re.compile(
    r"\.get\(\s*[\"'](?:filtered_resps|resps|edct_record)[\"']|\[\s*[\"'](?:filtered_resps|resps|edct_record)[\"']\s*\]"
)


def test_the_reader_does_not_unwrap_lmms_evals_logged_responses() -> None:
    """lmms-eval output is read through the run folder its logs name, never from the records in
    its logged responses (``final_record`` decodes the response the hooks are handed)."""
    reader = (ROOT / "edct_task/run/outputs.py").read_text(encoding="utf-8").splitlines()
    assert [line for line in reader if UNWRAPPING.search(line)] == []
    assert UNWRAPPING.search('value = logged.get("filtered_resps")')


def test_the_pattern_sees_the_old_readers() -> None:
    """The decoders the old main had are caught by the pattern (so the test above can fail)."""
    old = [
        'record = row.get("edct_record", row) if isinstance(row, dict) else {}',
        'resp = json.loads(line)["filtered_resps"]',
        "return SampleRecord.model_validate_json(response)",
        'edct_folders = sorted({p.parent for p in path.rglob("results.json") if p.is_file()})',
        'resp = sample.get("filtered_resps", sample.get("resps"))',
    ]
    assert all(DECODING.search(line) for line in old)


RUN_FILE_PATH = re.compile(
    r"/\s*f?[\"'](?:results\.json|samples\.jsonl)[\"']|\{[^}]*\}/(?:results\.json|samples\.jsonl)"
)


def test_a_run_folders_files_are_named_by_the_readers_constants() -> None:
    """``RESULTS_FILE`` / ``SAMPLES_FILE`` of ``run.outputs`` are the one spelling of a run folder's
    files: no product module joins a path onto the literal names."""
    found = [
        f"{path.relative_to(ROOT).as_posix()}:{n}: {line.strip()}"
        for package in PRODUCT
        for path in sorted((ROOT / package).rglob("*.py"))
        if path.relative_to(ROOT).as_posix() != "edct_task/run/outputs.py"
        for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)
        if RUN_FILE_PATH.search(line)
    ]
    assert found == []
    assert RUN_FILE_PATH.search('if not (j.output / "results.json").is_file()')
    assert RUN_FILE_PATH.search('check_results(f"{source}/results.json", results)')
