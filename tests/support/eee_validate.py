"""Validate Every Eval Ever records with the ``every-eval-ever`` package itself: run by the Python
of the environment that has the package (``make eee-env``), never imported by the suite.

For each file: the package's own validator (``every_eval_ever.validator.validate_file`` with its
repository checks: the pydantic models generated from the schema, the datastore path, the model
id's folder, score bounds, deployment fields) and JSON Schema (``jsonschema``, draft 7) against the
``eval.schema.json`` the package ships. Prints one JSON object per file: ``file``, ``valid``,
``errors``, ``warnings``, ``schema_errors``, ``schema_version``.

    python tests/support/eee_validate.py FILE…
"""

from __future__ import annotations

import json
import sys
from importlib import resources
from pathlib import Path

import jsonschema
from every_eval_ever.validator import get_schema_version, validate_file


class _Files:
    """The datastore a record lies in: the folder above its ``data/`` folder."""

    def __init__(self, root: Path) -> None:
        self.root = root

    def __contains__(self, repo_path: object) -> bool:
        return isinstance(repo_path, str) and (self.root / repo_path).is_file()

    def read_text(self, repo_path: str) -> str:
        return (self.root / repo_path).read_text(encoding="utf-8")


def main(paths: list[str]) -> int:
    schema = json.loads(resources.files("every_eval_ever.schemas").joinpath("eval.schema.json").read_text())
    checker = jsonschema.Draft7Validator(schema)
    for name in paths:
        path = Path(name).resolve()
        root = next((a.parent for a in path.parents if a.name == "data"), path.parent)
        repo_path, files = path.relative_to(root).as_posix(), _Files(root)
        report = validate_file(
            path,
            repo_path=repo_path,
            available_files=files,
            read_repo_file=files.read_text,
            run_semantic_checks=True,
        )
        data = json.loads(path.read_text(encoding="utf-8"))
        schema_errors = [f"{list(e.absolute_path)}: {e.message}" for e in checker.iter_errors(data)]
        print(
            json.dumps(
                {
                    "file": str(path),
                    "valid": report.valid,
                    "errors": report.errors,
                    "warnings": report.warnings,
                    "schema_errors": schema_errors,
                    "schema_version": get_schema_version(),
                },
                default=str,
            )
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
