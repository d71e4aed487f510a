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
from decisiond.testing import upstream
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


@pytest.fixture(scope="session")
def upstream_checkpoints(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """Checkpoints written by upstream's own code (:mod:`decisiond.testing.upstream`), by name; Kev's
    and OpenJev's are read by OpenJev's code, ``strands_*`` by strands-decider's."""
    pytest.importorskip("wev")
    pytest.importorskip("strands_decider")
    root = tmp_path_factory.mktemp("upstream")
    bases = {kind: upstream.build_base(root / f"base-{kind}", kind, seed=i) for i, kind in enumerate(upstream.KINDS)}
    run = upstream.build_wev_run(root / "wev-run", bases["qwen3"], keep_layers=1, seed=5, temperature=1.7)
    return {
        "kev_qwen3": upstream.build_wev_run(root / "kev-qwen3", bases["qwen3"], seed=1, temperature=2.35),
        "kev_qwen3_5": upstream.build_wev_run(root / "kev-qwen3_5", bases["qwen3_5"], seed=2, temperature=2.41),
        "kev_full": upstream.build_kev_full(root / "kev-full", bases["qwen3"], seed=3),
        "wev_run_keep_layers": run,
        "wev_export": upstream.export_wev(run, root / "wev-export"),
        "strands_qwen3": upstream.build_strands(root / "strands-qwen3", bases["qwen3"], seed=6),
        "strands_qwen3_5": upstream.build_strands(root / "strands-qwen3_5", bases["qwen3_5"], seed=7),
        "strands_sliding": upstream.build_strands(root / "strands-sliding", bases["sliding"], seed=8),
        "strands_force_bos": upstream.build_strands(root / "strands-bos", bases["qwen3"], seed=9, force_bos=True),
        "kev_special_embeddings": upstream.build_kev_special_embeddings(root / "kev-special", bases["qwen3"], seed=11),
        "strands_short_window": upstream.build_strands(root / "strands-short", bases["qwen3"], seed=10, max_length=200),
    }


@pytest.fixture(scope="session")
def pair(
    upstream_checkpoints: dict[str, Path], load: Callable[..., PointerHeadBackend]
) -> Callable[[str], tuple[PointerHeadBackend, upstream.Scorer]]:
    """decisiond's backend and upstream's scorer of a checkpoint, loaded once each."""
    cache: dict[str, tuple[PointerHeadBackend, upstream.Scorer]] = {}

    def get(name: str) -> tuple[PointerHeadBackend, upstream.Scorer]:
        if name not in cache:
            folder = upstream_checkpoints[name]
            scorer = upstream.strands_scorer(folder) if name.startswith("strands") else upstream.wev_scorer(folder)
            cache[name] = (load(folder), scorer)
        return cache[name]

    return get
