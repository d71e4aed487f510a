"""Where a causal LM's checkpoint is, and how it loads: folders, GGUF files, decision heads.

A GGUF file (``weights.gguf_file``) is read once with transformers' ``gguf_file=`` (dequantised to
float32, with a progress bar; every step is logged, with a line every 10 s while it runs) and saved,
in float32 or bfloat16 (``weights.gguf_dtype``), as a safetensors checkpoint in the user cache
folder (``Settings.cache_dir``, ``~/.cache/decisiond`` by default); later starts read that folder.
The cache folder is keyed on the GGUF file's size and the hash of its first and last MiB, and
written atomically (a temporary folder renamed into place), so a half-written conversion is never read.
"""

from __future__ import annotations

import hashlib
import json
import logging
import shutil
import tempfile
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import torch

from ...manifest import ManifestError

log = logging.getLogger("decisiond.backends.causal_lm")

_MIB = 1024 * 1024
#: Seconds between "still ..." lines while a conversion step runs.
HEARTBEAT_S = 10.0


@contextmanager
def conversion_step(number: int, total: int, what: str, *, every_s: float | None = None) -> Iterator[None]:
    """Log what a long step of the GGUF conversion does: a line when it starts, a ``still ...``
    line every ``every_s`` seconds (default :data:`HEARTBEAT_S`) while it runs, and its duration
    when it ends, so a 40-second conversion never looks like a hang."""
    every_s = HEARTBEAT_S if every_s is None else every_s
    began = time.monotonic()
    done = threading.Event()
    log.info("GGUF conversion %d/%d: %s", number, total, what)

    def heartbeat() -> None:
        while not done.wait(every_s):
            log.info("GGUF conversion %d/%d: still %s (%.0f s)", number, total, what, time.monotonic() - began)

    thread = threading.Thread(target=heartbeat, name="decisiond-gguf-progress", daemon=True)
    thread.start()
    try:
        yield
    finally:
        done.set()
        thread.join()
    log.info("GGUF conversion %d/%d: %s took %.1f s", number, total, what, time.monotonic() - began)


def fingerprint(path: Path) -> str:
    """12 hex digits of sha256 over a file's size, first MiB and last MiB (cheap on a 100 MB file)."""
    digest = hashlib.sha256(str(path.stat().st_size).encode())
    with path.open("rb") as handle:
        digest.update(handle.read(_MIB))
        handle.seek(max(0, path.stat().st_size - _MIB))
        digest.update(handle.read(_MIB))
    return digest.hexdigest()[:12]


def converted_gguf(folder: Path, gguf_file: str, cache_dir: Path, *, dtype: torch.dtype = torch.float32) -> Path:
    """The safetensors checkpoint of ``folder/gguf_file``, converting it on first use.

    Args:
        folder (Path): the folder holding the GGUF file (a package folder, a local folder).
        gguf_file (str): the file's name inside ``folder``.
        cache_dir (Path): the user cache folder; conversions go to ``cache_dir/gguf/<stem>-<hash>``
            (``-bf16`` appended for a bfloat16 checkpoint).
        dtype (torch.dtype, optional): the saved weights' dtype; bfloat16 halves the file (a
            dequantised 4-bit weight loses little to bf16's 8-bit mantissa). Defaults to float32.

    Returns:
        Path: a folder with ``config.json``, ``model.safetensors`` and the tokenizer files.

    Raises:
        ManifestError: the GGUF file is missing, or the ``gguf`` package is not installed.
    """
    source = folder / gguf_file
    if not source.is_file():
        raise ManifestError(
            f"the GGUF file {source} does not exist; check `weights.gguf_file` or reinstall the package"
        )
    suffix = "" if dtype == torch.float32 else "-" + str(dtype).removeprefix("torch.").replace("bfloat16", "bf16")
    target = cache_dir / "gguf" / f"{source.stem}-{fingerprint(source)}{suffix}"
    if (target / "config.json").is_file():
        return target
    try:
        import gguf  # noqa: F401
    except ImportError as exc:
        raise ManifestError("reading a GGUF file needs the `gguf` package: `pip install gguf`") from exc
    from transformers import AutoModelForCausalLM, AutoTokenizer

    target.parent.mkdir(parents=True, exist_ok=True)
    log.info(
        "converting %s (%.0f MB) once into %s, in 3 steps (under a minute on 2 cores; later starts read this cache)",
        source.name,
        source.stat().st_size / _MIB,
        target,
    )
    scratch = Path(tempfile.mkdtemp(prefix=".converting-", dir=target.parent))
    try:
        with conversion_step(1, 3, "reading the tokenizer from the GGUF file"):
            tokenizer = AutoTokenizer.from_pretrained(folder, gguf_file=gguf_file, local_files_only=True)
        with conversion_step(2, 3, "dequantising the weights to float32"):
            model = AutoModelForCausalLM.from_pretrained(folder, gguf_file=gguf_file, local_files_only=True)
        # The weights are dequantised float32 now: save them as a plain checkpoint
        model = model.to(dtype)
        model.hf_quantizer = None
        if hasattr(model.config, "quantization_config"):
            del model.config.quantization_config
        with conversion_step(3, 3, "writing the safetensors checkpoint and the tokenizer"):
            model.save_pretrained(scratch)
            tokenizer.save_pretrained(scratch)
        try:
            scratch.rename(target)
        except OSError:
            if not (target / "config.json").is_file():  # not another process's finished conversion
                raise
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    log.info("converted %s into %s", source.name, target)
    return target


def decision_head_class(path: Path) -> type[Any] | None:
    """The ``XxxForDecision`` class ``AutoModelForDecision`` loads ``path`` with, or None.

    A checkpoint has a decision head when its ``model_type`` is one ``AutoModelForDecision`` maps and
    it is either saved as that decision model or ships the head's config files next to its weights
    (``checkpoint_config``); any other checkpoint is read by the logits of its option labels.
    """
    import transformers
    from transformers.models.auto.modeling_auto import MODEL_FOR_DECISION_MAPPING_NAMES

    config_file = path / "config.json"
    if not config_file.is_file():
        return None
    model_type = json.loads(config_file.read_text(encoding="utf-8")).get("model_type")
    if model_type not in MODEL_FOR_DECISION_MAPPING_NAMES:
        return None
    cls: type[Any] = getattr(transformers, MODEL_FOR_DECISION_MAPPING_NAMES[model_type])
    if model_type == cls.config_class.model_type:
        return cls
    head_config, _ = cls.checkpoint_config(str(path), local_files_only=True)
    return cls if head_config is not None else None


def load_checkpoint(path: Path, *, dtype: torch.dtype) -> tuple[Any, Any, bool]:
    """The model, tokenizer and whether it has a decision head, from a local folder, with SDPA.

    Returns:
        tuple: ``(model, tokenizer, has_head)``; the model is in eval mode on the CPU.
    """
    from transformers import AutoModelForCausalLM, AutoModelForDecision, AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(path, local_files_only=True)
    has_head = decision_head_class(path) is not None
    auto = AutoModelForDecision if has_head else AutoModelForCausalLM
    model = auto.from_pretrained(path, local_files_only=True, dtype=dtype, attn_implementation="sdpa")
    return model.eval(), tokenizer, has_head
