"""What a pointer-head model reads: texts, token ids, and where the query and keys are.

spec/pointer-head.md, "Rendering". Kev and OpenJev flatten structured text YAML-like and mark
the state, each question, each option and the decision with five delimiter tokens; every piece
is tokenized on its own (``add_special_tokens=False``, no BOS) and the ids concatenated.
strands-decider writes one plain-text prompt per question and finds option keys through the
tokenizer's offset mapping. Both produce a :class:`Layout`: the state's ids (positions
``0..S-1``) and one :class:`Branch` per question whose positions restart at ``S``.
"""

from __future__ import annotations

import json
import re
import threading
from dataclasses import dataclass
from typing import Any, Protocol

from transformers import PreTrainedTokenizerBase

from ...errors import ApiUsageError
from ...manifest import ManifestError
from ...render import Question
from ..base import Work
from .families import StrandsTemplate

#: A delimiter-shaped string in user text: ``<|NAME|>``.
_DELIMITER = re.compile(r"<\|([^<>|]*)\|>")


def escape(text: str) -> str:
    """Defuse delimiter strings in user text: ``<|NAME|>`` becomes ``<¦NAME¦>`` (U+00A6).

    Source: spec/pointer-head.md ("so a caller cannot forge a delimiter").

    Example:
        >>> escape("a <|fim_suffix|> b")
        'a <¦fim_suffix¦> b'
    """
    return _DELIMITER.sub("<\u00a6\\1\u00a6>", text)


def _scalar(value: Any) -> str:
    if value is None:
        return ""
    return value if isinstance(value, str) else str(value)


def _lines(value: Any, pad: str) -> list[str]:
    """YAML-like lines of a dict or list, nested containers indented by two spaces."""
    items = value.items() if isinstance(value, dict) else (("-", v) for v in value)
    lines: list[str] = []
    for key, item in items:
        head = f"{pad}{key}" if key == "-" and isinstance(value, list) else f"{pad}{key}:"
        if isinstance(item, dict | list) and item:
            lines.append(head)
            lines.extend(_lines(item, pad + "  "))
        elif isinstance(item, dict | list):
            lines.append(head)
        else:
            lines.append(f"{head} {_scalar(item)}")
    return lines


def flatten(value: Any) -> str:
    """Kev/OpenJev text: strings as is (not stripped), numbers and booleans with ``str``, None as
    "", a list as ``- item`` lines, a dict as ``key: value`` lines, nesting indented by two
    spaces, lines joined by ``"\\n"``.

    Example:
        >>> flatten({"plan": "pro", "seats": 3, "flags": [True, None], "owner": {"name": "Ada"}})
        'plan: pro\\nseats: 3\\nflags:\\n  - True\\n  - \\nowner:\\n  name: Ada'
    """
    if isinstance(value, dict | list):
        return "\n".join(_lines(value, ""))
    return _scalar(value)


def strands_text(value: Any) -> str:
    """strands-decider text: strings stripped, objects and lists as indented JSON, None as ""."""
    if value is None:
        return ""
    if isinstance(value, str):
        return value.strip()
    if isinstance(value, dict | list):
        return json.dumps(value, indent=2, ensure_ascii=False)
    return json.dumps(value)


@dataclass(frozen=True)
class Branch:
    """One question's tokens after the state.

    Attributes:
        ids (tuple[int, ...]): the question's token ids (positions ``S..S+L-1``).
        query (int): index in ``ids`` of the query token.
        keys (tuple[int, ...]): index in ``ids`` of each option's key token, in slot order.
    """

    ids: tuple[int, ...]
    query: int
    keys: tuple[int, ...]


@dataclass(frozen=True)
class Layout:
    """A request as token ids: the state once, then one branch per question.

    Attributes:
        state (tuple[int, ...]): the state's ids (positions ``0..S-1``).
        branches (tuple[Branch, ...]): the questions in request order.
    """

    state: tuple[int, ...]
    branches: tuple[Branch, ...]

    def sequence(self) -> list[int]:
        """The packed sequence: state, then every branch (length ``S + Σ L``)."""
        return [*self.state, *(i for b in self.branches for i in b.ids)]


class Renderer(Protocol):
    """Turns a request into a :class:`Layout`."""

    def layout(self, work: Work) -> Layout:
        """The request's ids, query and key indices."""
        ...


def option_texts(question: Question) -> list[str]:
    """Kev/OpenJev option texts (before escaping): noul ``no``/``yes`` (``"no: <false
    description>"`` when described), choice the key or ``"key: <description>"``, score the
    level texts."""
    if question.kind == "noul":
        texts = []
        for option, word in zip(question.options, ("no", "yes"), strict=True):
            described = flatten(option.description) if option.description is not None else ""
            texts.append(f"{word}: {described}" if described else word)
        return texts
    if question.kind == "score":
        return [flatten(option.description) for option in question.options]
    return [o.key if o.description is None else f"{o.key}: {flatten(o.description)}" for o in question.options]


class DelimitedRenderer:
    """Kev and OpenJev: five delimiter tokens around separately tokenized pieces.

    Args:
        tokenizer (PreTrainedTokenizerBase): the base's tokenizer.
        delimiters (dict[str, str]): strings of the roles state, question, option_start,
            option_end and decide.

    Raises:
        ManifestError: a delimiter is missing or unknown to the tokenizer.
    """

    ROLES = ("state", "question", "option_start", "option_end", "decide")

    def __init__(self, tokenizer: PreTrainedTokenizerBase, delimiters: dict[str, str]) -> None:
        self.tokenizer = tokenizer
        self._lock = threading.Lock()
        self.ids: dict[str, int] = {}
        for role in self.ROLES:
            if role not in delimiters:
                raise ManifestError(f"the delimiters option lacks the role {role!r}; give all of {self.ROLES}")
            token = delimiters[role]
            token_id = tokenizer.convert_tokens_to_ids(token)
            if token_id is None or (token_id == tokenizer.unk_token_id and token != tokenizer.unk_token):
                raise ManifestError(
                    f"the tokenizer does not know the delimiter {token!r} ({role}); use the base's own tokenizer "
                    "or set `delimiters` in the manifest to tokens it has"
                )
            self.ids[role] = int(token_id)

    def _encode(self, texts: list[str]) -> list[list[int]]:
        if not texts:
            return []
        with self._lock:  # a fast tokenizer is not safe to share across threads
            encoded: list[list[int]] = self.tokenizer(texts, add_special_tokens=False)["input_ids"]
        return encoded

    def layout(self, work: Work) -> Layout:
        """Token ids per spec/pointer-head.md: ``<|fim_prefix|> state``, then per question
        ``<|fim_middle|> instructions (<|box_start|> option <|box_end|>)… <|fim_suffix|>``."""
        texts = [escape(flatten(work.state))]
        for question in work.questions:
            texts.append(escape(flatten(question.instructions)))
            texts.extend(escape(t) for t in option_texts(question))
        encoded = iter(self._encode(texts))
        state = (self.ids["state"], *next(encoded))
        branches = []
        for question in work.questions:
            ids = [self.ids["question"], *next(encoded)]
            keys = []
            for _ in question.options:
                ids += [self.ids["option_start"], *next(encoded), self.ids["option_end"]]
                keys.append(len(ids) - 1)
            ids.append(self.ids["decide"])
            branches.append(Branch(tuple(ids), len(ids) - 1, tuple(keys)))
        return Layout(state, tuple(branches))


class StrandsRenderer:
    """strands-decider: a plain-text prompt per question, keys found through offsets.

    The state block and each question block are tokenized separately (the block boundary follows
    a newline, where Qwen's pre-tokenizer splits anyway), so the state's ids are shared by every
    question. The query is the prompt's last token; option j's key is the last token lying wholly
    inside option j's line.

    Args:
        tokenizer (PreTrainedTokenizerBase): a fast tokenizer (offset mappings needed).
        template (StrandsTemplate): the prompt's fixed text.
    """

    def __init__(self, tokenizer: PreTrainedTokenizerBase, template: StrandsTemplate) -> None:
        if not getattr(tokenizer, "is_fast", False):
            raise ManifestError("strands-decider needs a fast tokenizer (tokenizer.json) for offset mappings")
        self.tokenizer = tokenizer
        self.template = template
        self._lock = threading.Lock()

    def question_text(self, question: Question) -> tuple[str, list[tuple[int, int]]]:
        """The question block and the character span of each option line in it."""
        t = self.template
        lines = [t.question_open.format(kind=question.kind), t.headers[question.kind]]
        instructions = escape(strands_text(question.instructions))
        if instructions:
            lines.append(instructions)
        text = "\n".join(lines) + "\n"
        spans = []
        for number, option in enumerate(question.options, start=1):
            name = escape(option.key)
            if question.kind == "noul" and option.description is None:
                description = t.noul_descriptions[option.key]
            else:
                description = escape(strands_text(option.description))
            pattern = t.option_line if description else t.option_line_bare
            line = pattern.format(number=number, name=name, description=description)
            spans.append((len(text), len(text) + len(line)))
            text += line + "\n"
        return text + t.question_close, spans

    def layout(self, work: Work) -> Layout:
        """Token ids of the state block, then each question block, with query and key indices.

        Raises:
            ApiUsageError: an option line yields no token of its own.
        """
        state_text = self.template.state_block.format(state=escape(strands_text(work.state)))
        blocks = [self.question_text(q) for q in work.questions]
        with self._lock:
            encoded = self.tokenizer(
                [state_text, *(text for text, _ in blocks)], add_special_tokens=False, return_offsets_mapping=True
            )
        branches = []
        for number, (_, spans) in enumerate(blocks, start=1):
            ids, offsets = encoded["input_ids"][number], encoded["offset_mapping"][number]
            branches.append(Branch(tuple(ids), len(ids) - 1, tuple(_last_tokens(offsets, spans, number))))
        return Layout(tuple(encoded["input_ids"][0]), tuple(branches))


def _last_tokens(offsets: list[tuple[int, int]], spans: list[tuple[int, int]], number: int) -> list[int]:
    keys = []
    for option, (start, end) in enumerate(spans, start=1):
        inside = [j for j, (lo, hi) in enumerate(offsets) if hi > lo and lo >= start and hi <= end]
        if not inside:
            raise ApiUsageError(f"option {option} of question {number} has no token of its own; give it some text")
        keys.append(inside[-1])
    return keys
