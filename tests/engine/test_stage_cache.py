"""Stage cache: canonical fingerprints, durable SQLite entries, content-addressed images."""

from __future__ import annotations

import hashlib
import io
import json
import os
import signal
import sqlite3
import subprocess
import sys
import textwrap
import threading
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np
import pytest
from PIL import Image
from PIL.PngImagePlugin import PngInfo
from support.hang_guard import finish, hang_limit

from edct_task.core.canonical import canonical_json
from edct_task.engine import stage_cache
from edct_task.engine.stage_cache import (
    CACHE_SCHEMA_VERSION,
    CacheEntry,
    CacheSchemaError,
    ImageStore,
    StageCache,
    fingerprint,
    image_id,
)

REPO_ROOT = Path(__file__).resolve().parents[2]


def _run_python(code: str, *args: str) -> subprocess.Popen[str]:
    env = {**os.environ, "PYTHONPATH": str(REPO_ROOT)}
    return subprocess.Popen(
        [sys.executable, "-c", textwrap.dedent(code), *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
        cwd=REPO_ROOT,
    )


def _image(seed: int, size: tuple[int, int] = (40, 30), mode: str = "RGB") -> Image.Image:
    channels = len(mode)
    arr = np.random.default_rng(seed).integers(0, 256, size=(size[1], size[0], channels), dtype=np.uint8)
    return Image.fromarray(arr, mode=mode)


def _decoded_id(path: Path) -> str:
    """The id of what ``path`` decodes to (a plain PIL open, nothing of the store)."""
    with Image.open(path) as f:
        f.load()
        return image_id(f)


def _png_chunk_types(data: bytes) -> list[bytes]:
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    pos, types = 8, []
    while pos < len(data):
        length = int.from_bytes(data[pos : pos + 4], "big")
        types.append(data[pos + 4 : pos + 8])
        pos += 12 + length
    return types


# --------------------------------------------------------------------------- fingerprint


def test_fingerprint_is_sha256_of_canonical_json() -> None:
    payload = {"role": "judge", "model": "qwen3-235b", "params": {"temperature": 0.0, "max_tokens": 8192}}
    text = '{"model":"qwen3-235b","params":{"max_tokens":8192,"temperature":0.0},"role":"judge"}'
    assert canonical_json(payload) == text
    assert fingerprint(payload) == hashlib.sha256(text.encode("utf-8")).hexdigest()


def test_fingerprint_ignores_key_order_at_every_level() -> None:
    a = {"x": 1, "y": {"b": [1, {"q": 2, "p": 3}], "a": "s"}}
    b = {"y": {"a": "s", "b": [1, {"p": 3, "q": 2}]}, "x": 1}
    assert fingerprint(a) == fingerprint(b)


def test_fingerprint_distinguishes_values_list_order_and_types() -> None:
    base = {"inputs": ["img1", "img2"], "seed": 0}
    assert fingerprint(base) != fingerprint({"inputs": ["img2", "img1"], "seed": 0})
    assert fingerprint(base) != fingerprint({"inputs": ["img1", "img2"], "seed": 1})
    assert fingerprint({"t": 1}) != fingerprint({"t": 1.0})  # JSON text differs: 1 vs 1.0
    assert fingerprint({"t": True}) != fingerprint({"t": 1})
    assert fingerprint({"t": None}) != fingerprint({})


def test_fingerprint_unicode_is_utf8_and_not_normalised() -> None:
    composed = {"concept": "caf\u00e9 ☕ 交通灯"}
    assert canonical_json(composed) == '{"concept":"caf\u00e9 ☕ 交通灯"}'
    expected = hashlib.sha256('{"concept":"café ☕ 交通灯"}'.encode()).hexdigest()
    assert fingerprint(composed) == expected
    # NFD "e + combining acute" is a different string: callers normalise if they need to.
    assert fingerprint({"concept": "cafe\u0301 ☕ 交通灯"}) != expected


def test_fingerprint_floats_are_stable_shortest_repr() -> None:
    assert canonical_json({"p": 0.1 + 0.2, "q": 1e-7, "r": 2.5e20}) == (
        '{"p":0.30000000000000004,"q":1e-07,"r":2.5e+20}'
    )
    assert fingerprint({"p": 0.1}) == fingerprint({"p": float("0.1")})


def test_fingerprint_tuples_are_lists() -> None:
    assert fingerprint({"size": (640, 480)}) == fingerprint({"size": [640, 480]})


@pytest.mark.parametrize(
    ("payload", "error", "match"),
    [
        ({"image": b"\x89PNG"}, TypeError, r"payload\['image'\]: bytes is not JSON-serialisable; hash bytes"),
        ({"a": {1: "x"}}, TypeError, r"payload\['a'\]: key 1 is int; JSON object keys must be str"),
        ({"s": {1, 2}}, TypeError, r"payload\['s'\]: set is not JSON-serialisable"),
        ({"n": np.int64(3)}, TypeError, r"int64 is not JSON-serialisable; convert numpy"),
        ({"xs": [1, object()]}, TypeError, r"payload\['xs'\]\[1\]: object"),
        ({"t": float("nan")}, ValueError, "no NaN or infinity"),
        ({"t": [float("inf")]}, ValueError, "no NaN or infinity"),
        ([("a", 1)], TypeError, "payload must be a mapping"),
    ],
)
def test_fingerprint_rejects_non_json(payload: object, error: type[Exception], match: str) -> None:
    with pytest.raises(error, match=match):
        fingerprint(payload)  # type: ignore[arg-type]


# --------------------------------------------------------------------------- StageCache


def test_stage_cache_round_trip_and_bookkeeping(tmp_path: Path) -> None:
    with StageCache(tmp_path) as cache:
        assert cache.get("missing") is None
        assert len(cache) == 0 and cache.counts() == {}
        k1 = fingerprint({"role": "target", "sample": 1})
        value = {"answer": "a tennis ball", "explanation": "yellow, fuzzy", "tokens": [1, 2], "p": 0.25}
        cache.put(k1, value, stage="baseline", meta={"model": "m", "payload": {"role": "target"}})
        cache.put("k2", {"ok": True}, stage="judge")
        cache.put("k3", {"ok": False}, stage="judge")
        assert cache.get(k1) == value
        assert list(cache.get(k1)) == list(value)  # key order kept
        entry = cache.entry(k1)
        assert isinstance(entry, CacheEntry)
        assert (entry.stage, entry.meta) == ("baseline", {"model": "m", "payload": {"role": "target"}})
        assert entry.created > 0
        assert cache.entry("k2").meta is None  # type: ignore[union-attr]
        assert cache.counts() == {"baseline": 1, "judge": 2}
        assert len(cache) == 3
        assert k1 in cache and "nope" not in cache and 3 not in cache
        cache.put("k2", {"ok": "replaced"}, stage="judge")  # last write wins
        assert cache.get("k2") == {"ok": "replaced"} and len(cache) == 3
    assert (tmp_path / "stages.sqlite").is_file()
    with StageCache(tmp_path) as again:
        assert again.get(k1) == value and len(again) == 3


def test_stage_cache_uses_wal_and_the_requested_synchronous_level(tmp_path: Path) -> None:
    with StageCache(tmp_path, synchronous="FULL") as cache:
        cache.put("k", {"v": 1}, stage="s")
        conn = cache._connection()
        assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
        assert conn.execute("PRAGMA synchronous").fetchone()[0] == 2  # FULL
    with StageCache(tmp_path) as cache:
        assert cache._connection().execute("PRAGMA synchronous").fetchone()[0] == 1  # NORMAL
    with pytest.raises(ValueError, match="synchronous must be"):
        StageCache(tmp_path, synchronous="OFF")  # type: ignore[arg-type]


def test_stage_cache_rejects_bad_values_without_writing(tmp_path: Path) -> None:
    with StageCache(tmp_path) as cache:
        with pytest.raises(TypeError, match=r"value\['img'\]: bytes"):
            cache.put("k", {"img": b"raw"}, stage="edit")
        with pytest.raises(ValueError, match="NaN"):
            cache.put("k", {"score": float("nan")}, stage="judge")
        with pytest.raises(TypeError, match="value must be a mapping"):
            cache.put("k", ["not", "a", "dict"], stage="judge")  # type: ignore[arg-type]
        with pytest.raises(TypeError, match=r"meta\['t'\]: set"):
            cache.put("k", {"ok": 1}, stage="judge", meta={"t": {1}})
        with pytest.raises(TypeError, match="stage must be a non-empty str"):
            cache.put("k", {"ok": 1}, stage="")
        with pytest.raises(TypeError, match="key must be a non-empty str"):
            cache.put("", {"ok": 1}, stage="judge")
        assert len(cache) == 0


def test_stage_cache_closed_raises(tmp_path: Path) -> None:
    cache = StageCache(tmp_path)
    cache.close()
    cache.close()  # idempotent
    with pytest.raises(RuntimeError, match="closed"):
        cache.get("k")
    with pytest.raises(RuntimeError, match="closed"):
        cache.put("k", {}, stage="s")


def test_stage_cache_refuses_unknown_schema_version(tmp_path: Path) -> None:
    StageCache(tmp_path).close()
    with sqlite3.connect(tmp_path / "stages.sqlite") as conn:
        conn.execute("PRAGMA user_version=99")
    with pytest.raises(CacheSchemaError, match="schema version 99"):
        StageCache(tmp_path)


def test_stage_cache_written_with_png_byte_image_refs_is_refused_untouched(tmp_path: Path) -> None:
    # A cache folder written before image ids came from pixels: schema version 1. Its keys hold
    # the old refs, so none of them can be found again; the run must stop and say so.
    with sqlite3.connect(tmp_path / "stages.sqlite") as conn:
        conn.execute(
            "CREATE TABLE entries (key TEXT PRIMARY KEY, stage TEXT NOT NULL, value TEXT NOT NULL,"
            " meta TEXT, created REAL NOT NULL)"
        )
        conn.execute("INSERT INTO entries VALUES ('k', 'baseline', '{\"text\": \"A\"}', NULL, 0)")
        conn.execute("PRAGMA user_version=1")
    before = (tmp_path / "stages.sqlite").read_bytes()
    with pytest.raises(CacheSchemaError) as err:
        StageCache(tmp_path)
    message = str(err.value)
    assert str(tmp_path) in message and "schema version 1" in message
    assert "named images by their PNG bytes" in message
    assert "Delete the folder to rebuild it, or set cache_dir to a new folder" in message
    assert err.value.version == 1 and err.value.root == tmp_path
    assert (tmp_path / "stages.sqlite").read_bytes() == before
    assert CACHE_SCHEMA_VERSION == 2


def test_stage_cache_concurrent_threads(tmp_path: Path) -> None:
    n_threads, per_thread = 8, 60
    barrier = threading.Barrier(n_threads)
    with StageCache(tmp_path) as cache:

        def work(t: int) -> None:
            barrier.wait()
            for i in range(per_thread):
                key = fingerprint({"t": t, "i": i})
                cache.put(key, {"t": t, "i": i}, stage=f"stage{t % 3}")
                assert cache.get(key) == {"t": t, "i": i}
                len(cache)

        with ThreadPoolExecutor(n_threads) as pool:
            list(pool.map(work, range(n_threads)))
        assert len(cache) == n_threads * per_thread
        assert sum(cache.counts().values()) == n_threads * per_thread
        assert all(cache.get(fingerprint({"t": t, "i": 5})) == {"t": t, "i": 5} for t in range(n_threads))


_WRITER = """
import sys
from edct_task.engine.stage_cache import StageCache
cache = StageCache(sys.argv[1])
for i in range(1_000_000):
    cache.put(f"key-{i}", {"i": i, "text": "x" * 300}, stage=("baseline", "edit", "judge")[i % 3])
    print(i, flush=True)
"""


@pytest.mark.slow
def test_stage_cache_survives_sigkill(tmp_path: Path) -> None:
    proc = _run_python(_WRITER, str(tmp_path))
    assert proc.stdout is not None
    reported: list[int] = []
    for line in proc.stdout:
        reported.append(int(line))
        if len(reported) >= 400:
            break
    os.kill(proc.pid, signal.SIGKILL)
    reported.extend(int(line) for line in proc.stdout)  # lines already in the pipe
    assert proc.wait(timeout=hang_limit(30)) == -signal.SIGKILL
    assert reported == list(range(len(reported)))
    assert len(reported) < 1_000_000  # killed mid-way
    # Never checkpointed or closed: the committed entries live in the WAL file.
    assert (tmp_path / "stages.sqlite-wal").exists()

    with StageCache(tmp_path) as cache:
        for i in reported:
            assert cache.get(f"key-{i}") == {"i": i, "text": "x" * 300}
        # At most the one commit between the last print and the kill is extra.
        assert len(reported) <= len(cache) <= len(reported) + 1
        assert sum(cache.counts().values()) == len(cache)
        assert cache._connection().execute("PRAGMA integrity_check").fetchone()[0] == "ok"
        cache.put("after", {"ok": True}, stage="judge")  # still writable
    with StageCache(tmp_path) as cache:
        assert cache.get("after") == {"ok": True}


# --------------------------------------------------------------------------- ImageStore


def test_image_store_round_trip_pixels_and_metadata(tmp_path: Path) -> None:
    store = ImageStore(tmp_path)
    im = _image(1)
    im.info.update(
        {
            "edct_role": "counterfactual",
            "edct_instruction": "Change: make the traffic light green — ✓ 交通灯",  # not latin-1: iTXt
            "edct_step": "2",
            "edct_not_text": 7,  # not str: dropped
            "dpi": (72, 72),  # not edct_: dropped
            "comment": "dropped",
        }
    )
    ref = store.put(im)
    assert len(ref) == 64 and store.has(ref) and ref in store
    path = store.path(ref)
    assert path == tmp_path / "images" / ref[:2] / f"{ref}.png"
    data = path.read_bytes()
    assert _decoded_id(path) == ref == image_id(im)
    assert b"tIME" not in _png_chunk_types(data) and b"pHYs" not in _png_chunk_types(data)

    out = store.get(ref)
    assert out.mode == "RGB" and out.size == im.size
    assert np.array_equal(np.asarray(out), np.asarray(im))
    assert out.info == {
        "edct_instruction": "Change: make the traffic light green — ✓ 交通灯",
        "edct_role": "counterfactual",
        "edct_step": "2",
    }
    assert all(type(v) is str for v in out.info.values())
    # Plain PIL restores the text chunks into .info too (tEXt and iTXt).
    with Image.open(path) as raw:
        assert raw.info["edct_role"] == "counterfactual"
        assert raw.info["edct_instruction"] == "Change: make the traffic light green — ✓ 交通灯"
    # Putting what we got back gives the same ref: the stored form is a fixed point, whether
    # the ref is remembered (the object get returned) or recomputed (a fresh copy).
    assert store.put(out) == ref
    assert image_id(out.copy()) == ref and store.put(out.copy()) == ref


def test_image_store_text_chunks_are_sorted_and_change_the_ref(tmp_path: Path) -> None:
    store = ImageStore(tmp_path)
    a, b = _image(2), _image(2)
    a.info.update({"edct_b": "2", "edct_a": "1"})
    b.info.update({"edct_a": "1", "edct_b": "2"})
    assert store.put(a) == store.put(b)  # insertion order of info does not matter
    bare = _image(2)
    assert store.put(bare) != store.put(a)  # metadata is part of the content


def test_image_store_same_image_twice_is_one_file(tmp_path: Path) -> None:
    store = ImageStore(tmp_path)
    im = _image(3)
    ref = store.put(im)
    mtime = store.path(ref).stat().st_mtime_ns
    assert store.put(im.copy()) == ref
    assert store.path(ref).stat().st_mtime_ns == mtime  # not rewritten
    files = [p for p in (tmp_path / "images").rglob("*") if p.is_file()]
    assert files == [store.path(ref)]


def test_image_store_canonicalises_mode(tmp_path: Path) -> None:
    store = ImageStore(tmp_path)
    rgba = _image(4, mode="RGBA")
    ref = store.put(rgba)
    assert ref == store.put(rgba.convert("RGB"))  # alpha dropped
    assert store.get(ref).mode == "RGB"
    gray = Image.fromarray(np.arange(256, dtype=np.uint8).reshape(16, 16), mode="L")
    assert np.array_equal(np.asarray(store.get(store.put(gray))), np.asarray(gray.convert("RGB")))


def test_image_store_concurrent_puts(tmp_path: Path) -> None:
    store = ImageStore(tmp_path)
    images = [_image(i % 5, size=(64, 48)) for i in range(40)]  # 5 distinct, each put 8 times
    start = threading.Event()

    def put(im: Image.Image) -> str:
        start.wait(timeout=hang_limit(10))  # release all queued puts at once
        return store.put(im)

    with ThreadPoolExecutor(8) as pool:
        futures = [pool.submit(put, im) for im in images]
        start.set()
        refs = [f.result() for f in futures]
    assert len(set(refs)) == 5
    assert refs[:5] * 8 == refs
    files = sorted(p for p in (tmp_path / "images").rglob("*") if p.is_file())
    assert files == sorted(store.path(r) for r in set(refs))  # no temp files left behind
    for r in set(refs):
        assert _decoded_id(store.path(r)) == r


_REF_PRINTER = """
import sys
import numpy as np
from PIL import Image
from edct_task.engine.stage_cache import ImageStore
arr = np.random.default_rng(7).integers(0, 256, size=(30, 40, 3), dtype=np.uint8)
im = Image.fromarray(arr)
im.info["edct_role"] = "original"
print(ImageStore(sys.argv[1]).put(im))
"""


@pytest.mark.slow
def test_image_ref_is_stable_across_processes(tmp_path: Path) -> None:
    refs = []
    for sub in ("a", "b"):
        proc = _run_python(_REF_PRINTER, str(tmp_path / sub))
        out, err = finish(proc, 60)
        assert proc.returncode == 0, err
        refs.append(out.strip())
    im = Image.fromarray(np.random.default_rng(7).integers(0, 256, size=(30, 40, 3), dtype=np.uint8))
    im.info["edct_role"] = "original"
    assert refs[0] == refs[1] == ImageStore(tmp_path / "c").put(im)


_IMAGE_WRITER = """
import sys
import numpy as np
from PIL import Image
from edct_task.engine.stage_cache import ImageStore
store = ImageStore(sys.argv[1])
rng = np.random.default_rng(0)
for i in range(100_000):
    im = Image.fromarray(rng.integers(0, 256, size=(96, 128, 3), dtype=np.uint8))
    print(store.put(im), flush=True)
"""


@pytest.mark.slow
def test_image_store_sigkill_leaves_no_partial_png(tmp_path: Path) -> None:
    proc = _run_python(_IMAGE_WRITER, str(tmp_path))
    assert proc.stdout is not None
    reported: list[str] = []
    for line in proc.stdout:
        reported.append(line.strip())
        if len(reported) >= 60:
            break
    os.kill(proc.pid, signal.SIGKILL)
    reported.extend(line.strip() for line in proc.stdout)
    proc.wait(timeout=hang_limit(30))
    store = ImageStore(tmp_path)
    for ref in reported:
        assert store.get(ref).size == (128, 96)
    for png in (tmp_path / "images").rglob("*.png"):
        assert _decoded_id(png) == png.stem  # complete files only
    # A kill between mkstemp and os.replace may leave one hidden temp file, never a .png.
    leftovers = [p for p in (tmp_path / "images").rglob("*") if p.is_file() and p.suffix != ".png"]
    assert len(leftovers) <= 1 and all(p.name.startswith(".") for p in leftovers)


def test_image_store_bad_refs(tmp_path: Path) -> None:
    store = ImageStore(tmp_path)
    missing = "0" * 64
    with pytest.raises(KeyError, match="no image with ref '0000"):
        store.get(missing)
    with pytest.raises(KeyError, match="64 lowercase hex"):
        store.get("../../etc/passwd")
    with pytest.raises(ValueError, match="64 lowercase hex"):
        store.path("ABC")
    assert not store.has(missing) and not store.has("nonsense") and 5 not in store


def test_image_store_rejects_bad_inputs(tmp_path: Path) -> None:
    store = ImageStore(tmp_path)
    with pytest.raises(TypeError, match=r"PIL\.Image\.Image"):
        store.put(np.zeros((4, 4, 3), dtype=np.uint8))  # type: ignore[arg-type]
    im = _image(5)
    im.info["edct_" + "k" * 80] = "too long a PNG keyword"
    with pytest.raises(ValueError, match="79 characters"):
        store.put(im)


def test_cache_values_hold_image_refs_not_bytes(tmp_path: Path) -> None:
    # The intended composition: images go to the store, the cache entry holds their refs.
    store, cache = ImageStore(tmp_path), StageCache(tmp_path)
    with cache:
        ref = store.put(_image(6))
        key = fingerprint({"role": "editor", "inputs": [ref], "instruction": "make it red", "attempt": 0})
        cache.put(key, {"image": ref, "verified": True}, stage="edit")
        got = cache.get(key)
        assert got is not None and store.has(got["image"])
        assert json.loads(json.dumps(got)) == got


# --------------------------------------------------------------------------- image ids from pixels


def _png(im: Image.Image, level: int) -> bytes:
    info = PngInfo()
    for k, v in im.info.items():
        info.add_text(k, v)
    buf = io.BytesIO()
    im.save(buf, format="PNG", compress_level=level, pnginfo=info)
    return buf.getvalue()


def test_same_pixels_at_two_compression_levels_get_one_id(tmp_path: Path) -> None:
    yy, xx = np.mgrid[0:48, 0:64]
    im = Image.fromarray(np.stack([xx * 4, yy * 5, (xx + yy) % 7 * 30], axis=-1).astype(np.uint8))
    im.info["edct_scene"] = '{"objects": []}'
    fast, small = _png(im, 0), _png(im, 9)
    assert fast != small and len(small) < len(fast)  # really two different encodings
    (tmp_path / "fast.png").write_bytes(fast)
    (tmp_path / "small.png").write_bytes(small)
    assert _decoded_id(tmp_path / "fast.png") == _decoded_id(tmp_path / "small.png") == image_id(im)
    store = ImageStore(tmp_path / "store")
    with Image.open(io.BytesIO(fast)) as a, Image.open(io.BytesIO(small)) as b:
        assert store.put(a) == store.put(b) == image_id(im)
    assert len([p for p in (tmp_path / "store" / "images").rglob("*") if p.is_file()]) == 1


def test_png_compress_level_changes_files_not_ids(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    im = _image(12, size=(64, 48))
    default = ImageStore(tmp_path / "a")
    ref = default.put(im)
    monkeypatch.setattr(stage_cache, "PNG_COMPRESS_LEVEL", 9)
    other = ImageStore(tmp_path / "b")
    assert other.put(im) == ref
    assert default.path(ref).read_bytes() != other.path(ref).read_bytes()
    assert np.array_equal(np.asarray(default.get(ref)), np.asarray(other.get(ref)))


def test_image_id_is_the_documented_pixel_hash() -> None:
    # The definition is pinned: changing it silently would orphan every cache (bump
    # CACHE_SCHEMA_VERSION instead).
    arr = np.arange(2 * 3 * 3, dtype=np.uint8).reshape(2, 3, 3)  # 3 wide, 2 high
    im = Image.fromarray(arr)
    im.info.update({"edct_step": "1", "edct_role": "original", "dpi": (72, 72)})
    header = b'{"mode":"RGB","size":[3,2],"text":{"edct_role":"original","edct_step":"1"}}'
    expected = hashlib.sha256(
        b"edct-bench image id v2\n" + len(header).to_bytes(8, "big") + header + arr.tobytes()
    ).hexdigest()
    assert image_id(im) == expected
    assert expected == "dc00f20835742c5a690da261d86ed043acbf28322d90d4b701f39ac45c0aaee5"


def test_identical_pixels_with_different_scene_graphs_do_not_collide(tmp_path: Path) -> None:
    # The calibration world reads the scene graph from the edct_scene text chunk: two scenes that
    # render to the same pixels are two different inputs to the editor and the oracle.
    store = ImageStore(tmp_path)
    a, b = _image(13), _image(13)
    a.info["edct_scene"] = '{"objects": [{"category": "car", "colour": "red"}]}'
    b.info["edct_scene"] = '{"objects": [{"category": "car", "colour": "blue"}]}'
    ra, rb = store.put(a), store.put(b)
    assert ra != rb
    assert store.get(ra).info["edct_scene"] == a.info["edct_scene"]
    assert store.get(rb).info["edct_scene"] == b.info["edct_scene"]
    assert image_id(a.convert("RGBA")) == ra  # mode is canonicalised, alpha dropped


def test_an_image_read_back_is_passed_on_without_hashing_or_encoding(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = ImageStore(tmp_path)
    ref = store.put(_image(14))
    back = store.get(ref)

    def fail(*args: object, **kwargs: object) -> None:
        raise AssertionError("the image was hashed/encoded again")

    monkeypatch.setattr(stage_cache._Content, "of", fail)
    assert store.put(back) == ref and image_id(back) == ref
    monkeypatch.undo()
    # The remembered ref is not a licence to skip writing into another store.
    other = ImageStore(tmp_path / "other")
    assert other.put(back) == ref and other.has(ref)


def test_a_read_back_image_that_changes_gets_a_new_id(tmp_path: Path) -> None:
    store = ImageStore(tmp_path)
    ref = store.put(_image(15))
    pasted = store.get(ref)
    pasted.paste((255, 0, 0), (0, 0, 5, 5))  # copy-on-write: a new pixel buffer
    assert store.put(pasted) != ref
    assert np.asarray(pasted)[0, 0].tolist() == [255, 0, 0]
    assert np.asarray(store.get(ref))[0, 0].tolist() != [255, 0, 0]  # the stored image is untouched

    relabelled = store.get(ref)
    relabelled.info["edct_scene"] = "{}"
    assert image_id(relabelled) != ref and store.put(relabelled) == image_id(relabelled)

    resized = store.get(ref).resize((20, 15))
    assert image_id(resized) != ref  # a new image carries nothing over

    readonly = store.get(ref)
    with pytest.raises(ValueError, match="readonly"):
        readonly.load()[0, 0] = (1, 2, 3)  # type: ignore[index]
    writable = readonly.copy()
    writable.load()[0, 0] = (1, 2, 3)  # type: ignore[index]
    assert image_id(writable) != ref and image_id(readonly) == ref


def test_put_does_not_change_the_callers_image(tmp_path: Path) -> None:
    store = ImageStore(tmp_path)
    im = _image(16)
    ref = store.put(im)
    assert not im.readonly
    im.load()[0, 0] = (0, 0, 0)  # type: ignore[index]  # still writable in place
    assert store.put(im) != ref


def test_put_and_get_returns_what_get_would_without_reading_the_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = ImageStore(tmp_path)
    im = _image(17, mode="RGBA")
    im.info.update({"edct_scene": '{"objects": ["交通灯"]}', "dpi": (72, 72)})
    ref, kept = store.put_and_get(im)
    read = store.get(ref)
    assert ref == image_id(im) and store.has(ref)
    assert kept.mode == read.mode == "RGB" and kept.size == read.size
    assert np.array_equal(np.asarray(kept), np.asarray(read))
    assert kept.info == read.info == {"edct_scene": '{"objects": ["交通灯"]}'}
    assert kept.readonly and kept is not im and im.mode == "RGBA"

    monkeypatch.setattr(stage_cache._Content, "of", None)  # any hashing would fail now
    assert store.put(kept) == ref and image_id(kept) == ref
