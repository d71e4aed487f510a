"""Option labels a causal LM answers with: single tokens, chosen deterministically per tokenizer.

transformers' decision module labels the options of a choice or score ``A``, ``B``, … ``Z`` (26 at
most) and a noul ``Yes``/``No``. A choice may have 255 options (spec/wire.md §2), so past ``Z`` the
labels go on with ``a``–``z``, then the pairs ``AA``, ``AB``, … ``ZZ``, then the numbers ``0``–``999``,
keeping only the candidates that the tokenizer reads as one known token distinct from every label
chosen before. The first 26 labels are ``A``–``Z`` whenever the tokenizer has them, so a question of
up to 26 options is rendered exactly as ``pipeline("decision")`` renders it.
"""

from __future__ import annotations

import itertools
import string
from collections.abc import Iterator

from transformers import PreTrainedTokenizerBase

#: Most options of one question (spec/wire.md §2).
MAX_LABELS = 255


def label_candidates() -> Iterator[str]:
    """Every candidate label, in the order they are tried (a fixed order: the choice is deterministic)."""
    upper, lower = string.ascii_uppercase, string.ascii_lowercase
    yield from upper
    yield from lower
    yield from ("".join(pair) for pair in itertools.product(upper, repeat=2))
    yield from (str(number) for number in range(1000))


def choose_labels(tokenizer: PreTrainedTokenizerBase, count: int = MAX_LABELS) -> list[str]:
    """The first ``count`` candidates that are distinct single known tokens of ``tokenizer``.

    Args:
        tokenizer (PreTrainedTokenizerBase): the model's tokenizer.
        count (int, optional): labels wanted. Defaults to 255.

    Returns:
        list[str]: at most ``count`` labels, ``A``–``Z`` first when they are single tokens; fewer when
        the tokenizer has fewer such tokens (the model then reads fewer options per question).

    Example:
        >>> choose_labels(tokenizer)[:3], len(choose_labels(tokenizer))
        (['A', 'B', 'C'], 255)
    """
    candidates = list(label_candidates())
    encoded = tokenizer(candidates, add_special_tokens=False)["input_ids"]
    chosen: list[str] = []
    seen: set[int] = set()
    for label, ids in zip(candidates, encoded, strict=True):
        if len(ids) != 1 or ids[0] == tokenizer.unk_token_id or ids[0] in seen:
            continue
        chosen.append(label)
        seen.add(ids[0])
        if len(chosen) == count:
            break
    return chosen
