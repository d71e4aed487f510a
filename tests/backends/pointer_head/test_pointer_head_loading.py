"""Loading refusals: each names the file, what was expected and what to do, before serving."""

from __future__ import annotations

import argparse
import json
import shutil
from collections.abc import Callable
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file, save_file

from decisiond.backends.pointer_head.backend import PointerHeadBackend
from decisiond.manifest import ManifestError

Load = Callable[..., PointerHeadBackend]


def copy(checkpoints: dict[str, Path], name: str, tmp_path: Path) -> Path:
    target = tmp_path / name
    shutil.copytree(checkpoints[name], target)
    return target


def rewrite_head_pt(folder: Path, **changes: object) -> None:
    meta = torch.load(folder / "head.pt", weights_only=True)
    meta.update(changes)
    torch.save(meta, folder / "head.pt")


def test_head_with_wrong_tensor_names_is_refused(checkpoints: dict[str, Path], tmp_path: Path, load: Load) -> None:
    folder = copy(checkpoints, "kev", tmp_path)
    head = torch.load(folder / "head.pt", weights_only=True)["head"]
    rewrite_head_pt(folder, head={"query." + k.split(".")[1]: v for k, v in head.items() if k.startswith("q.")})
    with pytest.raises(ManifestError, match=r"head\.pt: the pointer head has tensors .* expected exactly"):
        load(folder)


def test_head_with_wrong_shapes_is_refused(checkpoints: dict[str, Path], tmp_path: Path, load: Load) -> None:
    folder = copy(checkpoints, "wev", tmp_path)
    tensors = load_file(str(folder / "head.safetensors"))
    tensors["k.weight"] = torch.zeros(16, 8)
    save_file(tensors, str(folder / "head.safetensors"))
    with pytest.raises(
        ManifestError, match=r"head\.safetensors: tensor k\.weight has shape \[16, 8\], expected \[16, 32\]"
    ):
        load(folder)


def test_strands_head_without_its_layernorm_is_refused(
    checkpoints: dict[str, Path], tmp_path: Path, load: Load
) -> None:
    folder = copy(checkpoints, "strands", tmp_path)
    tensors = {k: v for k, v in load_file(str(folder / "head.safetensors")).items() if not k.startswith("norm.")}
    save_file(tensors, str(folder / "head.safetensors"))
    with pytest.raises(ManifestError, match="norm.bias"):
        load(folder)


def test_set_head_is_refused(checkpoints: dict[str, Path], tmp_path: Path, load: Load) -> None:
    folder = copy(checkpoints, "wev", tmp_path)
    meta = json.loads((folder / "wev.json").read_text())
    (folder / "wev.json").write_text(json.dumps(meta | {"head_type": "set"}))
    with pytest.raises(ManifestError, match=r"wev\.json: head_type \"set\" .* expected head_type \"pointer\""):
        load(folder)


def test_option_isolation_on_a_hybrid_base_is_refused(checkpoints: dict[str, Path], tmp_path: Path, load: Load) -> None:
    folder = copy(checkpoints, "kev_hybrid", tmp_path)
    rewrite_head_pt(folder, option_isolation=True)
    with pytest.raises(ManifestError, match=r"head\.pt: option_isolation is true, which a hybrid base"):
        load(folder)


def test_adapter_with_whole_trained_modules_is_refused(
    checkpoints: dict[str, Path], tmp_path: Path, load: Load
) -> None:
    folder = copy(checkpoints, "kev", tmp_path)
    config = json.loads((folder / "adapter_config.json").read_text())
    (folder / "adapter_config.json").write_text(json.dumps(config | {"modules_to_save": ["embed_tokens"]}))
    with pytest.raises(ManifestError, match=r"adapter_config\.json: the adapter trains whole modules"):
        load(folder)


def test_missing_base_is_refused_without_downloading(checkpoints: dict[str, Path], tmp_path: Path, load: Load) -> None:
    folder = copy(checkpoints, "kev", tmp_path)
    rewrite_head_pt(folder, base="nobody-here/no-such-base", base_revision="v1")
    with pytest.raises(
        ManifestError, match=r"head\.pt names the base 'nobody-here/no-such-base' at revision v1.*never downloads"
    ):
        load(folder)


def test_head_pt_with_pickled_objects_is_refused(checkpoints: dict[str, Path], tmp_path: Path, load: Load) -> None:
    folder = copy(checkpoints, "kev", tmp_path)
    meta = torch.load(folder / "head.pt", weights_only=True)
    torch.save(meta | {"extra": argparse.Namespace(evil=True)}, folder / "head.pt")
    with pytest.raises(ManifestError, match=r"weights_only=True"):
        load(folder)


def test_lora_is_merged_into_the_trunk(checkpoints: dict[str, Path], load: Load) -> None:
    """The merged trunk differs from the plain base: the adapter was applied, not silently dropped."""
    from transformers import AutoModelForCausalLM

    backend = load(checkpoints["kev"])
    base = AutoModelForCausalLM.from_pretrained(checkpoints["kev"] / "base", local_files_only=True).model
    merged = backend.trunk.layers[0].self_attn.q_proj.weight
    assert not torch.allclose(merged, base.layers[0].self_attn.q_proj.weight)
    assert type(backend.trunk).__name__ == "Qwen3Model"  # no PEFT wrapper left
