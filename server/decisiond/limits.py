"""Cheap bounds applied before expensive work: the characters of a request's text (before any
tokenising), and the body's size (before it is parsed).

A request's text is bounded in characters, counted on the rendered strings a model reads (the state
as text, each question's instructions, option keys and descriptions), before a tokenizer sees it:
tokenising a 10 MB state only to refuse it for its tokens costs seconds of CPU. The bound is a
setting (``--max-text-chars``) rather than derived from the token budgets, because how many
characters a token covers depends on the tokenizer (a WordPiece ``[UNK]`` covers up to 100).
"""

from __future__ import annotations

from .backends.base import Work
from .errors import ApiUsageError
from .render import to_text


def text_chars(work: Work) -> int:
    """Characters of every text of ``work`` a model reads: the state, instructions, option keys and
    descriptions (pure; one pass over the strings)."""
    total = len(to_text(work.state))
    for question in work.questions:
        total += len(to_text(question.instructions))
        total += sum(len(option.key) + len(to_text(option.description)) for option in question.options)
    return total


def check_text_chars(work: Work, max_chars: int) -> None:
    """Refuse ``work`` when its text is over ``max_chars`` characters, before any tokenising.

    Raises:
        ApiUsageError: naming the count, the limit and the flag.
    """
    chars = text_chars(work)
    if chars > max_chars:
        raise ApiUsageError(
            f"the state and questions are {chars} characters; this server reads at most {max_chars} characters "
            "(shorten the state or raise --max-text-chars)"
        )
