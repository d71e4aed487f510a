"""Tiny checkpoints written by upstream's own code, and upstream's own scoring of a request.

The judge of the ``pointer_head`` backend is the code of the families it serves: PyPI ``wev-ai``
0.2.2 (OpenJev, whose ``wev/model.py`` is Kev's ``kev/model.py`` adapted, so it also scores Kev's
LoRA and full-weight checkpoints) and PyPI ``strands-decider`` 0.2.0. The builders here make a
tiny random base (Qwen3, Qwen3.5, or Qwen3 with sliding-window layers) and a byte-level BPE
tokenizer carrying Qwen's special tokens, give upstream's model classes random non-zero adapter
and head weights, and save them with upstream's own ``save`` / ``export`` / ``save_pretrained``.
The scorers return upstream's unrounded probabilities, one list per question.

Both packages are imported inside the functions (they are a test extra, ``.[test]``).
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch
from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors, trainers
from transformers import PreTrainedTokenizerFast

#: Qwen's special tokens the families use (the five Kev delimiters among them), plus a BOS token
#: that the tokenizer does not add by itself (for strands-decider's ``force_bos``).
SPECIALS = (
    "<|endoftext|>",
    "<|im_start|>",
    "<|im_end|>",
    "<|fim_prefix|>",
    "<|fim_middle|>",
    "<|fim_suffix|>",
    "<|box_start|>",
    "<|box_end|>",
    "<|bos|>",
)
#: Text the tokenizer's merges are learnt from: the words of the generated requests.
CORPUS = (
    "the customer was charged twice for one order refund billing technical other invoice login urgent late "
    "today parcel error calm angry very concerned frustrated résumé café 東京 émoji 🙂 line one two spaces key "
    'value true false null None True False 0 1 2 3 1.5 -7 { } [ ] : , " - — state question options answer'
)
HIDDEN = 32
HEAD_DIM = 16
#: The tiny bases :func:`base_config` builds.
KINDS = ("qwen3", "qwen3_5", "sliding")


def build_byte_tokenizer(folder: Path) -> PreTrainedTokenizerFast:
    """A byte-level BPE tokenizer (as Qwen's: every Unicode string encodes, offsets are character
    offsets), trained on :data:`CORPUS` with the :data:`SPECIALS`, saved to ``folder``."""
    backend = Tokenizer(models.BPE())
    backend.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    backend.decoder = decoders.ByteLevel()
    backend.post_processor = processors.ByteLevel(trim_offsets=False)
    trainer = trainers.BpeTrainer(
        vocab_size=400, special_tokens=list(SPECIALS), initial_alphabet=pre_tokenizers.ByteLevel.alphabet()
    )
    backend.train_from_iterator([CORPUS] * 4, trainer=trainer)
    tokenizer = PreTrainedTokenizerFast(
        tokenizer_object=backend,
        eos_token="<|endoftext|>",
        pad_token="<|endoftext|>",
        bos_token="<|bos|>",
        additional_special_tokens=[t for t in SPECIALS if t not in ("<|endoftext|>", "<|bos|>")],
    )
    folder.mkdir(parents=True, exist_ok=True)
    tokenizer.save_pretrained(folder)
    return tokenizer


def base_config(kind: str, vocab_size: int, *, max_positions: int = 4096) -> Any:
    """A tiny config: ``qwen3`` (attention-only), ``qwen3_5`` (hybrid: Gated DeltaNet + attention),
    or ``sliding`` (Qwen3 whose second layer attends over a 4-token sliding window)."""
    common: dict[str, Any] = dict(
        vocab_size=vocab_size,
        hidden_size=HIDDEN,
        intermediate_size=64,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        head_dim=8,
        max_position_embeddings=max_positions,
        initializer_range=0.2,
        pad_token_id=0,
    )
    if kind == "qwen3_5":
        from transformers import Qwen3_5TextConfig

        return Qwen3_5TextConfig(
            **common,
            linear_conv_kernel_dim=4,
            linear_key_head_dim=8,
            linear_value_head_dim=8,
            linear_num_key_heads=2,
            linear_num_value_heads=4,
            layer_types=["linear_attention", "full_attention"],
        )
    from transformers import Qwen3Config

    if kind == "sliding":
        return Qwen3Config(**common, use_sliding_window=True, sliding_window=4, max_window_layers=1)
    return Qwen3Config(**common)


def build_base(folder: Path, kind: str = "qwen3", *, seed: int = 0) -> Path:
    """A tiny random causal LM of ``kind`` (see :func:`base_config`) and its tokenizer in ``folder``."""
    from transformers import AutoModelForCausalLM

    tokenizer = build_byte_tokenizer(folder)
    torch.manual_seed(seed)
    AutoModelForCausalLM.from_config(base_config(kind, len(tokenizer))).save_pretrained(folder)
    return folder.resolve()


def _randomize(module: torch.nn.Module, *, seed: int, names: tuple[str, ...], scale: float = 0.3) -> None:
    """Give every parameter whose name contains one of ``names`` random values of standard deviation
    ``scale`` (LoRA B starts at zero, which would make the adapter a no-op)."""
    gen = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, parameter in module.named_parameters():
            if any(n in name for n in names):
                parameter.copy_(scale * torch.randn(parameter.shape, generator=gen))


def _randomize_adapter_and_head(model: torch.nn.Module, *, seed: int) -> None:
    """A LoRA delta of a realistic size (0.05) and a head whose logits are a few units (0.3)."""
    _randomize(model, seed=seed, names=("lora_A", "lora_B"), scale=0.05)
    _randomize(model, seed=seed + 1, names=("head.q", "head.k", "head.norm"))


def build_wev_run(folder: Path, base: Path, *, keep_layers: int | None = None, seed: int = 0, **extra: Any) -> Path:
    """A training run as ``wev.train`` saves it (``wev/model.py`` ``DecisionModel.save``): a PEFT
    adapter over the base (truncated to ``keep_layers``), ``head.pt`` with the head and metadata;
    ``extra`` goes into ``head.pt`` (e.g. ``temperature``)."""
    from transformers import AutoTokenizer
    from wev.model import DecisionModel

    tokenizer = AutoTokenizer.from_pretrained(base)
    torch.manual_seed(seed)
    model = DecisionModel(
        str(base), tokenizer, "cpu", lora=4, dtype=torch.float32, head_dim=HEAD_DIM, keep_layers=keep_layers
    )
    _randomize_adapter_and_head(model, seed=seed)
    model.save(folder, **extra)
    return folder.resolve()


def build_kev_special_embeddings(folder: Path, base: Path, *, seed: int = 0) -> Path:
    """A Kev run trained with ``special_embeddings``: the LoRA adapter also trains the five
    delimiter rows of the embedding table (PEFT ``trainable_token_indices``, as Kev's
    ``DecisionModel`` sets it up), and ``head.pt`` says ``special_embeddings: True``. Saved with
    OpenJev's ``DecisionModel.save`` (Kev's ``head.pt`` layout)."""
    from peft import LoraConfig, get_peft_model
    from transformers import AutoTokenizer
    from wev.model import LORA_TARGETS, SPECIAL, DecisionModel

    tokenizer = AutoTokenizer.from_pretrained(base)
    torch.manual_seed(seed)
    model = DecisionModel(str(base), tokenizer, "cpu", lora=0, dtype=torch.float32, head_dim=HEAD_DIM)
    rows = [tokenizer.convert_tokens_to_ids(t) for t in SPECIAL]
    config = LoraConfig(
        task_type="FEATURE_EXTRACTION",
        r=4,
        lora_alpha=8,
        target_modules=LORA_TARGETS,
        trainable_token_indices={"embed_tokens": rows},
    )
    model.lm = get_peft_model(model.lm, config)
    _randomize_adapter_and_head(model, seed=seed)
    _randomize(model, seed=seed + 2, names=("trainable_tokens_delta",))
    model.save(folder, special_embeddings=True, temperature=1.9)
    return folder.resolve()


def export_wev(run: Path, out: Path) -> Path:
    """An OpenJev export of ``run`` by ``python -m wev.export`` (merged fp32 trunk, ``wev.json``)."""
    from wev import export

    saved = sys.argv
    sys.argv = ["wev.export", "--run", str(run), "--out", str(out), "--dtype", "fp32"]
    try:
        export.main()
    finally:
        sys.argv = saved
    return out.resolve()


def build_kev_full(folder: Path, base: Path, *, seed: int = 0, temperature: float = 1.4) -> Path:
    """A Kev full-weight checkpoint (``head.pt`` with ``weights: "full"`` beside the backbone's
    ``config.json`` + safetensors, as Kev-27B at ``v1.0``): Kev's layout, random weights."""
    from transformers import AutoModelForCausalLM
    from wev.model import PointerHead

    torch.manual_seed(seed)
    model = AutoModelForCausalLM.from_pretrained(base)
    _randomize(model, seed=seed, names=("q_proj.weight",))
    model.save_pretrained(folder)
    head = PointerHead(HIDDEN, HEAD_DIM)
    _randomize(head, seed=seed + 1, names=("q.", "k."))
    meta = {"base": str(base), "head": head.state_dict(), "head_dim": HEAD_DIM, "weights": "full"}
    torch.save(meta | {"temperature": temperature, "weights_dtype": "fp32"}, folder / "head.pt")
    return folder.resolve()


Scorer = Callable[[dict[str, Any]], list[list[float]]]


def wev_scorer(folder: Path) -> Scorer:
    """OpenJev's unrounded probabilities (``wev.load`` → ``WebDecide.encode`` → ``DecisionModel.probs``),
    one list per question in request order. A Kev full-weight folder is scored by the same model
    class over its backbone (``wev/model.py`` is Kev's ``kev/model.py`` adapted)."""
    import wev
    from wev.api import SystemOneRequest

    meta_path = folder / "head.pt"
    if meta_path.is_file() and torch.load(meta_path, weights_only=True).get("weights") == "full":
        return _kev_full_scorer(folder)
    model = wev.load(str(folder), device="cpu", dtype=torch.float32)

    def score(request: dict[str, Any]) -> list[list[float]]:
        enc, _ = model.encode(SystemOneRequest.model_validate(request))
        return [list(p) for p in model.model.probs([enc])[0]]

    return score


def _kev_full_scorer(folder: Path) -> Scorer:
    from transformers import AutoModelForCausalLM, AutoTokenizer
    from wev.api import SystemOneRequest, to_record
    from wev.model import MAX_BRANCH, MAX_STATE, DecisionModel, encode

    meta = torch.load(folder / "head.pt", weights_only=True)
    tokenizer = AutoTokenizer.from_pretrained(meta["base"])
    backbone = AutoModelForCausalLM.from_pretrained(folder, dtype=torch.float32).model
    model = DecisionModel(
        meta["base"], tokenizer, "cpu", lora=0, dtype=torch.float32, head_dim=meta["head_dim"], backbone=backbone
    )
    model.head.load_state_dict(meta["head"])
    model.eval()
    model.temperature = float(meta.get("temperature") or 1.0)

    def score(request: dict[str, Any]) -> list[list[float]]:
        record, _ = to_record(SystemOneRequest.model_validate(request))
        enc = encode(tokenizer, record, MAX_STATE, MAX_BRANCH, strict=True)
        return [list(p) for p in model.probs([enc])[0]]

    return score


def build_strands(folder: Path, base: Path, *, seed: int = 0, **config: Any) -> Path:
    """A strands-decider checkpoint as ``StrandsDeciderModel.save_pretrained`` writes it (config,
    ``lora/``, ``slot_head.pt``, tokenizer), pointer head, float32 torso; ``config`` overrides
    :class:`strands_decider.modeling.StrandsDeciderConfig` fields."""
    from strands_decider.modeling import StrandsDeciderConfig, StrandsDeciderModel

    settings = dict(
        base_model=str(base),
        head_type="pointer",
        pointer_dim=HEAD_DIM,
        torch_dtype="float32",
        lora_r=4,
        lora_alpha=8,
        temperature=1.3,
        temperature_by_kind={"noul": 1.2, "choice": 0.9},
    )
    torch.manual_seed(seed)
    model = StrandsDeciderModel.from_pretrained_base(StrandsDeciderConfig(**(settings | config)))
    _randomize_adapter_and_head(model, seed=seed)
    model.save_pretrained(str(folder))
    return folder.resolve()


def strands_scorer(folder: Path) -> Scorer:
    """strands-decider's unrounded probabilities: ``SystemOneEngine`` on the CPU, its own chunking,
    window fitting and shared-prefix or batched path (``infer.py`` ``evaluate`` without the final
    rounding), one list per question in request order.

    The engine swaps a CPU convolution into transformers' Qwen3.5 module when it is built; it is
    put back at once, so the rest of the process (decisiond included) runs transformers' own.
    """
    from strands_decider import cpu_kernels
    from strands_decider.infer import EngineConfig, SystemOneEngine
    from strands_decider.modeling import StrandsDeciderModel
    from strands_decider.prompting import render_question, render_state
    from strands_decider.schema import SystemOneRequest
    from transformers.models.qwen3_5 import modeling_qwen3_5

    original = modeling_qwen3_5.causal_conv1d_fn
    with torch.inference_mode():
        engine = SystemOneEngine(StrandsDeciderModel.load(str(folder)), EngineConfig(device="cpu"))
    modeling_qwen3_5.causal_conv1d_fn = original
    cpu_kernels._installed = False

    def score(request: dict[str, Any]) -> list[list[float]]:
        parsed = SystemOneRequest.model_validate(request)
        rendered = [render_question(q) for q in parsed.questions.values()]
        out: list[list[float]] = []
        for chunk, state_ids, question_ids, offsets in engine._chunks(render_state(parsed.state), rendered):
            part = rendered[chunk]
            args = (state_ids, question_ids, [r.n_slots for r in part], [r.kind for r in part], offsets)
            path = engine._slot_probs_shared_prefix if len(part) > 1 else engine._slot_probs_batched
            probs, _ = path(*args, rendered=part)
            out += [probs[i, : r.n_slots].tolist() for i, r in enumerate(part)]
        return out

    return score


def write_json(path: Path, value: Any) -> None:
    """``value`` as indented JSON at ``path``."""
    path.write_text(json.dumps(value, indent=2), encoding="utf-8")
