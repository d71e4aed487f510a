"""Tiny pointer-head checkpoints of each family, built once per session, offline."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import torch

from decisiond.backends import TokenLimits
from decisiond.backends.pointer_head.backend import PointerHeadBackend
from decisiond.config import Settings
from decisiond.manifest import Manifest, checkpoint_manifest
from decisiond.testing.tiny_pointer_head import (
    build_kev_checkpoint,
    build_strands_checkpoint,
    build_wev_checkpoint,
)


@pytest.fixture(scope="session")
def checkpoints(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """kev (Qwen3), kev_hybrid (Qwen3.5), wev (Qwen3, merged), strands (Qwen3), strands_hybrid."""
    root = tmp_path_factory.mktemp("pointer_head")
    return {
        "kev": build_kev_checkpoint(root / "kev"),
        "kev_hybrid": build_kev_checkpoint(root / "kev-hybrid", hybrid=True, seed=1),
        "wev": build_wev_checkpoint(root / "wev", seed=2),
        "strands": build_strands_checkpoint(root / "strands", seed=3),
        "strands_hybrid": build_strands_checkpoint(root / "strands-hybrid", hybrid=True, seed=4),
    }


def manifest_for(folder: Path, **options: Any) -> Manifest:
    """The synthesised manifest of a checkpoint folder, with extra backend options."""
    manifest = checkpoint_manifest(folder)
    assert manifest is not None
    return Manifest.model_validate({**manifest.model_dump(), **manifest.backend_options, **options})


def load_backend(folder: Path, **options: Any) -> PointerHeadBackend:
    """A float32 CPU backend for ``folder``."""
    backend = PointerHeadBackend.from_manifest(
        manifest_for(folder, **options),
        device=torch.device("cpu"),
        dtype=torch.float32,
        limits=TokenLimits(),
        settings=Settings(),
    )
    return backend


@pytest.fixture(scope="session")
def backends(checkpoints: dict[str, Path]) -> Callable[..., PointerHeadBackend]:
    """Loaded backends, cached per (checkpoint, options)."""
    cache: dict[tuple[str, str], PointerHeadBackend] = {}

    def get(name: str, **options: Any) -> PointerHeadBackend:
        key = (name, repr(sorted(options.items())))
        if key not in cache:
            cache[key] = load_backend(checkpoints[name], **options)
        return cache[key]

    return get


@pytest.fixture(scope="session")
def load() -> Callable[..., PointerHeadBackend]:
    """:func:`load_backend`, uncached (for checkpoints a test modifies)."""
    return load_backend
