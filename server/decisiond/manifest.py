"""Model manifests: one TOML file per servable model under ``models/``.

A manifest names the backend, where the weights are (never downloaded at run time), the device
and dtype, the temperature, the token window, the templates, what media the model reads and the
aliases it answers to. Backend-specific settings (``permutations``, ``family``, …) are extra
top-level keys that the backend validates itself. See the README's field table.
"""

from __future__ import annotations

import importlib.util
import tomllib
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from .calibration import Calibration
from .config import Device, DType


class ManifestError(Exception):
    """A manifest cannot be read, or names weights that are not on this machine. The message says
    what is missing and how to get it."""


class Weights(BaseModel):
    """Where a model's files are: exactly one of ``path``, ``package``, ``hub`` or ``pull``.

    Attributes:
        path: a local folder or file, relative to the manifest's folder or absolute.
        package: an installed Python distribution's import name; ``file`` is a path inside it.
            The package is located, never imported.
        hub: a Hugging Face id resolved only from the local cache at ``revision``.
        pull: a name ``decisiond pull`` fetches into the user cache (``<cache>/pulled/<name>``).
        gguf_file: a GGUF file name inside the resolved folder (read with transformers'
            ``gguf_file=``).
        gguf_dtype: the dtype the GGUF file is converted to once (``float32``, the default, or ``bfloat16``).
    """

    model_config = ConfigDict(extra="forbid")

    path: str | None = None
    package: str | None = None
    file: str | None = None
    hub: str | None = None
    revision: str | None = None
    pull: str | None = None
    gguf_file: str | None = None
    gguf_dtype: Literal["float32", "bfloat16"] | None = None

    @model_validator(mode="after")
    def _one_source(self) -> Weights:
        sources = [s for s in (self.path, self.package, self.hub, self.pull) if s]
        if len(sources) != 1:
            raise ValueError("weights need exactly one of path, package, hub or pull")
        return self

    def describe(self) -> str:
        """Where the weights are said to be, in words."""
        gguf = f" (GGUF {self.gguf_file})" if self.gguf_file else ""
        if self.package:
            return f"package {self.package}" + (f" (file {self.file})" if self.file else "") + gguf
        if self.hub:
            return f"Hugging Face id {self.hub}" + (f"@{self.revision}" if self.revision else "")
        if self.pull:
            return f"pulled by `decisiond pull {self.pull}`{gguf}"
        return f"path {self.path}{gguf}"

    def resolve(self, base_dir: Path, cache_dir: Path | None = None) -> Path:
        """The local folder or file of the weights (with ``gguf_file``: the folder that holds it).

        ``cache_dir`` is the user cache folder that ``pull`` weights are in (default: ``--cache-dir``'s).

        Raises:
            ManifestError: the weights are not on this machine; the message says how to get them.
        """
        path = self._resolve(base_dir, cache_dir)
        if self.pull and self.gguf_file and not (path / self.gguf_file).is_file():
            raise ManifestError(
                f"the weights of {self.pull} are not here ({path / self.gguf_file} is missing); "
                f"run `decisiond pull {self.pull}` once (about 1.1 GB)"
            )
        if self.gguf_file and not (path / self.gguf_file).is_file():
            raise ManifestError(f"the GGUF file {self.gguf_file} is not in {path}; check `gguf_file` or reinstall")
        return path

    def _resolve(self, base_dir: Path, cache_dir: Path | None) -> Path:
        if self.package:
            return _resolve_package(self.package, self.file)
        if self.hub:
            return _resolve_hub(self.hub, self.revision)
        if self.pull:
            from .config import default_cache_dir
            from .pull import pulled_dir  # light: no torch

            return pulled_dir(cache_dir or default_cache_dir(), self.pull)
        assert self.path is not None
        path = Path(self.path).expanduser()
        path = path if path.is_absolute() else (base_dir / path)
        if not path.exists():
            raise ManifestError(f"weights folder {path} does not exist; put the checkpoint there or fix `path`")
        return path.resolve()


def _resolve_package(package: str, file: str | None) -> Path:
    spec = importlib.util.find_spec(package)
    if spec is None or not spec.submodule_search_locations:
        dist = package.replace("_", "-")
        raise ManifestError(f"the package {package} is not installed; install it with `pip install {dist}`")
    root = Path(next(iter(spec.submodule_search_locations)))
    path = root / file if file else root
    if not path.exists():
        raise ManifestError(f"{path} is not in the installed package {package}; reinstall it")
    return path


def _resolve_hub(repo_id: str, revision: str | None) -> Path:
    from huggingface_hub import snapshot_download
    from huggingface_hub.errors import LocalEntryNotFoundError

    try:
        return Path(snapshot_download(repo_id, revision=revision, local_files_only=True))
    except (LocalEntryNotFoundError, FileNotFoundError, ValueError) as exc:
        at = f" --revision {revision}" if revision else ""
        raise ManifestError(
            f"{repo_id} is not in the local Hugging Face cache; decisiond never downloads weights. "
            f"On a connected machine run `hf download {repo_id}{at}` and copy the cache here"
        ) from exc


class Limits(BaseModel):
    """Per-model overrides of the server's token budgets."""

    model_config = ConfigDict(extra="forbid")

    max_state_tokens: int | None = Field(default=None, ge=16)
    max_total_tokens: int | None = Field(default=None, ge=16)


Modality = Literal["text", "image", "audio", "video"]


class Manifest(BaseModel):
    """One servable model. Unknown top-level keys are kept for the backend (``backend_options``)."""

    model_config = ConfigDict(extra="allow")

    name: str = Field(min_length=1)
    description: str = ""
    release_date: str = Field(default="2026-01-01", pattern=r"^\d{4}-\d{2}-\d{2}$")
    aliases: list[str] = Field(default_factory=list)
    backend: str
    weights: Weights
    device: Device | None = None
    dtype: DType | None = None
    temperature: float = Field(default=1.0, gt=0)
    window: int = Field(default=256, ge=8, description="tokens the model reads at once")
    overlap: int = Field(default=32, ge=0, description="tokens shared by consecutive windows of a long text")
    modalities: list[Modality] = Field(default_factory=lambda: ["text"])
    templates: dict[str, str] = Field(default_factory=dict)
    limits: Limits = Field(default_factory=Limits)
    calibration: Calibration = Field(default_factory=Calibration)
    source: Path | None = Field(default=None, exclude=True, description="the file this manifest was read from")

    @model_validator(mode="after")
    def _overlap_fits(self) -> Manifest:
        if self.overlap >= self.window // 2:
            raise ValueError(f"overlap {self.overlap} must be under half the window {self.window}")
        return self

    @property
    def backend_options(self) -> dict[str, Any]:
        """The extra keys, for the backend to validate."""
        return dict(self.model_extra or {})

    @property
    def base_dir(self) -> Path:
        """The folder relative weights paths start from."""
        return self.source.parent if self.source else Path.cwd()

    def weights_path(self, cache_dir: Path | None = None) -> Path:
        """The resolved local weights (see :meth:`Weights.resolve`)."""
        return self.weights.resolve(self.base_dir, cache_dir)

    def names(self) -> list[str]:
        """The name and every alias."""
        return [self.name, *self.aliases]


def read_manifest(path: Path) -> Manifest:
    """Read and validate one manifest file.

    Raises:
        ManifestError: the file is missing, not TOML, or not a valid manifest (with the field).
    """
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError as exc:
        raise ManifestError(f"no manifest at {path}") from exc
    except tomllib.TOMLDecodeError as exc:
        raise ManifestError(f"{path} is not valid TOML: {exc}") from exc
    try:
        return Manifest.model_validate({**data, "source": path.resolve()})
    except ValidationError as exc:
        problems = "; ".join(f"{'.'.join(map(str, e['loc']))}: {e['msg']}" for e in exc.errors())
        raise ManifestError(f"{path} is not a valid manifest: {problems}") from exc


def read_manifests(models_dir: Path) -> list[Manifest]:
    """Every ``*.toml`` manifest in ``models_dir``, sorted by file name.

    Raises:
        ManifestError: the folder is missing, a manifest is invalid, or two claim one name.
    """
    if not models_dir.is_dir():
        raise ManifestError(f"the models folder {models_dir} does not exist (set --models-dir)")
    manifests = [read_manifest(p) for p in sorted(models_dir.glob("*.toml"))]
    seen: dict[str, Path | None] = {}
    for manifest in manifests:
        for name in manifest.names():
            if name in seen:
                raise ManifestError(f"the name {name!r} is claimed by {seen[name]} and {manifest.source}")
            seen[name] = manifest.source
    return manifests


def checkpoint_manifest(folder: Path) -> Manifest | None:
    """A manifest for a checkpoint folder that needs none, or None when the folder is no such checkpoint.

    Pointer-head checkpoints (Kev ``head.pt``, OpenJev ``wev.json``/``webdecide.json``,
    ``strands_decider_config.json``) say everything a manifest would: the model is named after the
    folder, answers to its family's default name (``kev-latest``, ``wev-latest``,
    ``strands-decider-latest``; a Kev-layout OpenJev run folder is read as Kev) and is served by
    the ``pointer_head`` backend with its family's preset.
    """
    from .backends.pointer_head.families import FAMILY_ALIASES, detect_family  # no torch: the module is light

    family = detect_family(folder)
    if family is None:
        return None
    folder = folder.resolve()
    return Manifest(
        name=folder.name,
        description=f"{family} pointer-head checkpoint at {folder}",
        aliases=list(FAMILY_ALIASES[family]),
        backend="pointer_head",
        weights=Weights(path=str(folder)),
        family=family,
    )


#: The manifests shipped inside the package (the repository's ``models/``, linked as
#: ``decisiond/models``): a name the models folder does not define is looked up here, so an installed
#: decisiond serves the default model, and pulls and serves ``qwen2.5-1.5b``, from any folder.
PACKAGED_MODELS = Path(__file__).resolve().parent / "models"


def packaged_manifests(models_dir: Path | None = None) -> list[Manifest]:
    """The manifests shipped in the package, none when they are ``models_dir`` itself (a clone's
    ``models/``, already read).

    Raises:
        ManifestError: a shipped manifest is invalid (a broken install).
    """
    if not PACKAGED_MODELS.is_dir():
        return []
    if models_dir is not None and models_dir.is_dir() and models_dir.resolve() == PACKAGED_MODELS.resolve():
        return []
    return read_manifests(PACKAGED_MODELS)


def find_manifest(spec: str, models_dir: Path) -> Manifest:
    """A manifest by name, alias, path to a ``.toml`` file, or path to a checkpoint folder that
    needs no manifest (see :func:`checkpoint_manifest`).

    Raises:
        ManifestError: nothing matches; the message lists what is available.
    """
    candidate = Path(spec).expanduser()
    if spec.endswith(".toml") or candidate.is_file():
        return read_manifest(candidate)
    if candidate.is_dir() and (synthesised := checkpoint_manifest(candidate)) is not None:
        return synthesised
    manifests = read_manifests(models_dir) if models_dir.is_dir() else []
    manifests += packaged_manifests(models_dir)  # after the folder's own: a folder may redefine a name
    for manifest in manifests:
        if spec in manifest.names():
            return manifest
    if candidate.is_dir():
        raise ManifestError(
            f"the folder {spec} is no checkpoint that serves without a manifest (a Kev head.pt, an OpenJev "
            "wev.json or a strands_decider_config.json); write a manifest for it (see the README's Manifests)"
        )
    if _looks_like_a_path(spec):
        raise ManifestError(f"no such folder: {spec} (resolved to {candidate.absolute()})")
    known = ", ".join(dict.fromkeys(m.name for m in manifests)) or "none"
    raise ManifestError(f"no model named {spec!r} in {models_dir} (available: {known}); or pass a manifest path")


def _looks_like_a_path(spec: str) -> bool:
    """Whether a ``--model`` value is meant as a path (``./x``, ``../x``, ``/x``, ``~/x``, ``a/b``),
    not a model name (checked after every name and alias of the manifests)."""
    return "/" in spec or "\\" in spec or spec.startswith((".", "~"))
