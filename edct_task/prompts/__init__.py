"""Versioned prompt templates, written in our own words, following the structure the paper
requires of each prompt (never its text).

Each template is a text file beside this module whose first line is ``# version: N``; further
``#`` lines at the top are comments. Placeholders use ``string.Template`` syntax (``$name``) so
JSON examples in the text need no escaping. Inputs are wrapped in XML-like tags
(``<question>…</question>``) that both real LLMs and the calibration world's rule-based models read.
"""

from __future__ import annotations

import hashlib
import re
import string
from dataclasses import dataclass
from functools import cache
from importlib import resources

TEMPLATE_NAMES = (
    "answer_why",
    "extract_concepts",
    "edit_instructions",
    "edit_parse",
    "judge_binary",
    "judge_graded",
)


@dataclass(frozen=True)
class PromptTemplate:
    name: str
    version: int
    text: str

    @property
    def sha256(self) -> str:
        return hashlib.sha256(self.text.encode("utf-8")).hexdigest()

    @property
    def tag(self) -> str:
        """``name@vN``, as recorded in results."""
        return f"{self.name}@v{self.version}"

    def render(self, **fields: object) -> str:
        try:
            return string.Template(self.text).substitute({k: str(v) for k, v in fields.items()})
        except KeyError as exc:
            raise ValueError(f"prompt {self.name!r} needs the field {exc.args[0]!r}") from None


@cache
def get_template(name: str) -> PromptTemplate:
    if name not in TEMPLATE_NAMES:
        raise KeyError(f"unknown prompt template {name!r}; known: {', '.join(TEMPLATE_NAMES)}")
    raw = resources.files(__package__).joinpath(f"{name}.txt").read_text(encoding="utf-8")
    lines = raw.splitlines()
    match = re.fullmatch(r"#\s*version:\s*(\d+)\s*", lines[0]) if lines else None
    if match is None:
        raise ValueError(f"prompt template {name!r} must start with '# version: N'")
    body = lines[1:]
    while body and body[0].startswith("#"):
        body = body[1:]
    return PromptTemplate(name=name, version=int(match.group(1)), text="\n".join(body).strip() + "\n")


def prompt_versions() -> dict[str, str]:
    """Template name -> ``vN+sha256[:12]`` for every template, as recorded in results."""
    out = {}
    for name in TEMPLATE_NAMES:
        t = get_template(name)
        out[name] = f"v{t.version}+{t.sha256[:12]}"
    return out


def render(name: str, **fields: object) -> str:
    return get_template(name).render(**fields)


@cache
def _structure(name: str) -> re.Pattern[str]:
    """A regex that matches exactly the prompts ``name`` renders: its literal text in order, each
    placeholder a named group (a repeated placeholder must repeat its value)."""
    text = get_template(name).text
    out, seen, last = [], set(), 0
    for m in string.Template.pattern.finditer(text):
        out.append(re.escape(text[last : m.start()]))
        last = m.end()
        if m.group("escaped") is not None:
            out.append(re.escape("$"))
            continue
        field = m.group("named") or m.group("braced")
        if field is None:
            raise ValueError(f"prompt template {name!r} has a stray '$'")
        out.append(f"(?P={field})" if field in seen else f"(?P<{field}>.*?)")
        seen.add(field)
    out.append(re.escape(text[last:]))
    return re.compile("".join(out), flags=re.S)


def match_template(prompt: str) -> tuple[str, dict[str, str]] | None:
    """``(template name, its fields)`` of a rendered prompt, or None when no template rendered it.

    The whole prompt is matched against each template's literal text, so what the fields hold
    (dataset questions, model answers) cannot make a prompt look like another template's: a
    question containing ``SCORE:`` or a fake ``</question>`` line is only part of a field.
    """
    for name in TEMPLATE_NAMES:
        m = _structure(name).fullmatch(prompt)
        if m is not None:
            return name, m.groupdict()
    return None


def identify(prompt: str) -> str | None:
    """Which template a rendered prompt came from (used by rule-based text models), or None."""
    found = match_template(prompt)
    return None if found is None else found[0]
