"""``find_manifest`` on a pointer-head checkpoint folder synthesises its manifest from its files."""

from __future__ import annotations

from pathlib import Path

import pytest

from decisiond.manifest import ManifestError, find_manifest


@pytest.mark.parametrize(
    "files,family",
    [
        (["head.pt", "adapter_config.json"], "kev"),
        (["wev.json", "head.safetensors"], "wev"),
        (["webdecide.json", "head.safetensors"], "wev"),
        (["strands_decider_config.json", "head.safetensors"], "strands"),
        (["hobson_config.json", "slot_head.pt"], "strands"),
    ],
)
def test_checkpoint_folder_needs_no_manifest(files: list[str], family: str, tmp_path: Path) -> None:
    folder = tmp_path / "my-checkpoint"
    folder.mkdir()
    for name in files:
        (folder / name).write_bytes(b"")
    manifest = find_manifest(str(folder), tmp_path / "no-models")
    assert manifest.name == "my-checkpoint"
    assert manifest.backend == "pointer_head"
    assert manifest.backend_options == {"family": family}
    assert manifest.weights_path() == folder.resolve()
    # a request naming the family's own default model reaches it
    assert manifest.aliases == [{"kev": "kev-latest", "wev": "wev-latest", "strands": "strands-decider-latest"}[family]]


def test_other_folders_are_not_taken_for_checkpoints(tmp_path: Path) -> None:
    (tmp_path / "plain").mkdir()
    with pytest.raises(ManifestError, match="plain is no checkpoint that serves without a manifest"):
        find_manifest(str(tmp_path / "plain"), tmp_path / "no-models")
