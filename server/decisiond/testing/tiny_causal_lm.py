"""A tiny, randomly initialised Llama with a byte-level tokenizer and a ChatML chat template.

Built offline from a config and a tokenizer written to a folder, for tests and ``scripts/gpu_check.py``.
The tokenizer reads any text (one token per byte, no downloads) and knows, as single tokens, every
upper- and lower-case letter, ``Yes`` and ``No``, and the upper-case pairs ``AA``…``HZ``: enough distinct labels for a
255-option choice.
"""

from __future__ import annotations

import string
from pathlib import Path

#: ChatML, as SmolLM2-Instruct writes it (the default system line when none is given).
CHAT_TEMPLATE = (
    "{% for message in messages %}{% if loop.first and messages[0]['role'] != 'system' %}"
    "{{ '<|im_start|>system\nYou are a tiny test model.<|im_end|>\n' }}{% endif %}"
    "{{ '<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>\n' }}{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}"
)
SPECIAL_TOKENS = ("<|endoftext|>", "<|im_start|>", "<|im_end|>")


def _tokenizer(folder: Path) -> int:
    """Write a byte-level BPE tokenizer to ``folder``; returns its vocabulary size."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    alphabet = sorted(pre_tokenizers.ByteLevel.alphabet())
    vocab = {symbol: index for index, symbol in enumerate(alphabet)}
    # Yes and No (the noul labels) and the label pairs AA..HZ as single tokens
    merges = [("N", "o"), ("Y", "e"), ("Ye", "s")]
    merges += [(a, b) for a in string.ascii_uppercase[:8] for b in string.ascii_uppercase]
    for a, b in merges:
        vocab[a + b] = len(vocab)
    backend = Tokenizer(models.BPE(vocab=vocab, merges=merges))
    backend.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    backend.decoder = decoders.ByteLevel()
    tokenizer = PreTrainedTokenizerFast(
        tokenizer_object=backend,
        bos_token="<|im_start|>",
        eos_token="<|im_end|>",
        pad_token="<|endoftext|>",
        unk_token="<|endoftext|>",
        additional_special_tokens=list(SPECIAL_TOKENS[1:]),
    )
    tokenizer.add_special_tokens({"additional_special_tokens": list(SPECIAL_TOKENS[1:])})
    tokenizer.chat_template = CHAT_TEMPLATE
    tokenizer.save_pretrained(folder)
    return len(tokenizer)


def build_tiny_causal_lm(folder: str | Path, *, seed: int = 0, layers: int = 2, hidden: int = 64) -> Path:
    """Write a tiny random ``LlamaForCausalLM`` (config, safetensors weights, tokenizer) to ``folder``.

    Args:
        folder (str | Path): where to write; created when missing.
        seed (int, optional): torch seed of the random weights. Defaults to 0.
        layers (int, optional): decoder layers. Defaults to 2.
        hidden (int, optional): hidden size (4 heads, 2 key-value heads). Defaults to 64.

    Returns:
        Path: ``folder``, loadable with ``AutoModelForCausalLM`` / ``AutoTokenizer`` offline.
    """
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    vocab_size = _tokenizer(folder)
    config = LlamaConfig(
        vocab_size=vocab_size,
        hidden_size=hidden,
        intermediate_size=2 * hidden,
        num_hidden_layers=layers,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=8192,
        initializer_range=0.2,  # far from uniform next-token distributions, so comparisons mean something
        pad_token_id=0,
        bos_token_id=None,
        eos_token_id=None,
        tie_word_embeddings=False,
    )
    torch.manual_seed(seed)
    model = LlamaForCausalLM(config).eval()
    model.save_pretrained(folder)
    return folder


def write_tiny_causal_lm_manifest(
    folder: str | Path, model_folder: str | Path, *, name: str = "tiny-llama", **options: object
) -> Path:
    """Write a ``causal_lm`` manifest for the model in ``model_folder`` to ``folder/<name>.toml``.

    Args:
        folder (str | Path): where the manifest goes.
        model_folder (str | Path): the checkpoint from :func:`build_tiny_causal_lm`.
        name (str, optional): the model's name. Defaults to ``tiny-llama``.
        **options: extra top-level manifest keys (``permutations = 2``, ``window = 4096``, …).

    Returns:
        Path: the manifest file.
    """
    import json

    lines = [
        f"name = {json.dumps(name)}",
        'backend = "causal_lm"',
        'description = "a tiny random Llama, for tests"',
        'dtype = "float32"',
        *(f"{key} = {json.dumps(value)}" for key, value in options.items()),
        "",
        "[weights]",
        f"path = {json.dumps(str(Path(model_folder).resolve()))}",
    ]
    path = Path(folder) / f"{name}.toml"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path
