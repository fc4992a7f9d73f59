"""Fuzz (hypothesis) of what strangers hand the board and the builders: bundle manifests, Hub
eval-results YAML, run configs and Hub table image values. The property of every reader: one
line or a result, never a traceback, in bounded time (hypothesis' per-example deadline) and
bounded memory (the process's peak RSS grows by less than 512 MiB over all examples).

Examples are few (a 2-core CI): the hostile shapes the probe found are mixed into the strategies
(huge numbers, impossible dates, aliases, deep nesting, bad bytes, links, FIFOs) so they are hit
in every run, not left to chance.
"""

from __future__ import annotations

import io
import json
import resource
import time
import zipfile
from pathlib import Path

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from support.hang_guard import cpu_budget

from edct_task.bench_data import hub
from edct_task.bench_data.format import BenchDataError, Candidate, read_image
from edct_task.config import load_config
from edct_task.core.errors import ConfigError
from edct_task.leaderboard.bundle import BUNDLE_JSON
from edct_task.leaderboard.eval_results import read_eval_results
from edct_task.leaderboard.verify import Rejected, Verified, verify_bundle

FUZZ = settings(
    max_examples=25,
    deadline=None,  # wall time is not ours on a shared CI box: CPU time is checked per example
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
    database=None,
)
MAX_RSS_GROWTH_KIB = 512 * 1024
MAX_CPU_S = 15.0
"""CPU seconds one example may take: a hang guard, not a speed test. The worst measured is the
5,000 nested brackets (≈ 1.8 CPU s, PyYAML's parser) and a first config naming a backend (≈ 1.4 s,
the registry's imports); on a 2-core machine shared by three suites one example measured 5.6 s."""


class cpu_bounded:
    def __enter__(self):
        self.start = time.process_time()

    def __exit__(self, *exc):
        assert time.process_time() - self.start < cpu_budget(MAX_CPU_S)  # on a slower CPU, more


scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(10**30), max_value=10**30),
    st.floats(allow_nan=False, allow_infinity=False),
    st.text(max_size=40),
    st.sampled_from(["edct-bench", "edct", "lmms", "2026-02-30", "9" * 5000, "\u202e", "../x"]),
)
json_values = st.recursive(
    scalars,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=12), inner, max_size=4),
    max_leaves=20,
)
HOSTILE_TEXT = [
    "value: " + "9" * 5000,
    "- dataset: {id: a/b, task_id: t}\n  value: 0.5\n  date: 2026-02-30",
    "a0: &a0 [x, x, x, x, x, x, x, x, x, x]\n"
    + "".join(f"a{i}: &a{i} [{', '.join([f'*a{i - 1}'] * 10)}]\n" for i in range(1, 9)),
    "[" * 5000,
    "a: &a [*a]",
    "roles: {judge: {backend: openai-chat, api_key_env: sk-abcdef0123456789}}",
    "data: {n: 1e400}",
    "!!python/object/apply:os.system [echo]",
]
yaml_texts = st.one_of(
    st.sampled_from(HOSTILE_TEXT),
    json_values.map(lambda v: yaml.safe_dump(v)),
    st.text(max_size=200),
)
yaml_bytes = st.one_of(yaml_texts.map(lambda t: t.encode("utf-8")), st.binary(max_size=200))


@pytest.fixture(scope="module", autouse=True)
def bounded_memory():
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    yield
    assert resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before < MAX_RSS_GROWTH_KIB


def _meta(extra):
    base = {"format": "edct-bench", "format_version": 1, "kind": "edct", "files": {}, "digest": "0" * 64}
    if isinstance(extra, dict):
        base.update(extra)
    return base


@FUZZ
@given(
    meta=json_values,
    members=st.dictionaries(
        st.sampled_from(
            [
                "results.json",
                "samples.jsonl",
                "dataset_manifest.json",
                "images.json",
                "setup_source.json",
                "images/" + "a" * 64 + ".png",
                "../evil",
                "x/",
            ]
        ),
        st.binary(max_size=300),
        max_size=5,
    ),
)
def test_any_bundle_manifest_is_a_verdict_never_a_traceback(tmp_path_factory, meta, members):
    path = tmp_path_factory.mktemp("fuzz") / "b.edct.zip"
    with zipfile.ZipFile(path, "w") as z:
        z.writestr(BUNDLE_JSON, json.dumps(_meta(meta)))
        for name, data in members.items():
            z.writestr(name, data)
    with cpu_bounded():
        result = verify_bundle(path)
    assert isinstance(result, (Rejected, Verified))
    if isinstance(result, Rejected):
        assert result.reason and "\n" not in result.reason and result.code != "malformed", result.reason


@FUZZ
@given(data=yaml_bytes)
def test_any_eval_results_file_is_an_entry_or_one_line(tmp_path_factory, data):
    repo = tmp_path_factory.mktemp("repo")
    (repo / ".eval_results").mkdir()
    (repo / ".eval_results" / "x.yaml").write_bytes(data)
    with cpu_bounded():
        entries, rejected = read_eval_results([repo])
    assert len(entries) + len(rejected) >= 1
    for r in rejected:
        assert "\n" not in r["reason"]
    json.dumps(entries)  # what the board writes


@FUZZ
@given(data=yaml_bytes)
def test_any_config_is_a_config_or_one_line(tmp_path_factory, data):
    path = tmp_path_factory.mktemp("cfg") / "c.yaml"
    path.write_bytes(data)
    try:
        with cpu_bounded():
            load_config(path)
    except ConfigError as exc:
        assert "sk-abcdef0123456789" not in str(exc)
        assert str(exc).strip()


@FUZZ
@given(
    value=st.one_of(
        st.fixed_dictionaries({"bytes": st.binary(max_size=200), "path": st.none()}),
        st.fixed_dictionaries(
            {
                "bytes": st.none(),
                "path": st.one_of(
                    st.text(max_size=40),
                    st.sampled_from(
                        ["/dev/zero", "/dev/urandom", "../../etc/passwd", "fifo", "link", "ok.png"]
                    ),
                ),
            }
        ),
        json_values,
    )
)
def test_any_hub_table_image_value_is_an_image_or_one_line(tmp_path_factory, value):
    import os

    from PIL import Image

    folder = tmp_path_factory.mktemp("table")
    Image.new("RGB", (4, 4)).save(folder / "ok.png")
    os.mkfifo(folder / "fifo")
    (folder / "link").symlink_to("/dev/zero")
    candidate = Candidate(
        "okvqa-1",
        "okvqa",
        "q",
        "s",
        "1",
        image_path=None,
        image_reader=hub.image_reader([{"image": value}], 0, folder),
        image_label="row 0",
    )
    try:
        with cpu_bounded():
            data = read_image(candidate)
    except BenchDataError as exc:
        assert "\n" not in str(exc).strip()
    else:
        assert Image.open(io.BytesIO(data)).size == (4, 4) or len(data) <= 200
    assert Path(folder / "ok.png").is_file()
