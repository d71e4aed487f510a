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
from dataclasses import dataclass, field
from typing import Any, Protocol

from transformers import PreTrainedTokenizerBase

from ...errors import ApiUsageError
from ...manifest import ManifestError
from ...render import Option, Question
from ..base import Work
from .families import StrandsTemplate

#: A delimiter-shaped string in user text that Kev rewrites: ``<|NAME|>`` where NAME is letters,
#: digits and underscores only (Kev's ``kev/model.py`` ``user_tokens``); ``<|a-b|>`` and ``<||>`` stay.
_DELIMITER = re.compile(r"<\|([A-Za-z0-9_]+)\|>")


def escape(text: str) -> str:
    """Defuse delimiter strings in user text: ``<|NAME|>`` becomes ``<¦NAME¦>`` (U+00A6).

    Only names of ASCII letters, digits and underscores are rewritten, as Kev's own ``user_tokens``
    does (``kev/model.py``); other ``<|...|>`` text is read as is.

    Example:
        >>> escape("a <|fim_suffix|> b <|a-b|>")
        'a <¦fim_suffix¦> b <|a-b|>'
    """
    return _DELIMITER.sub("<\u00a6\\1\u00a6>", text)


def flatten(value: Any, depth: int = 0) -> str:
    """Kev/OpenJev text of a JSON value, as Kev's ``kev/api.py`` ``render`` writes it.

    A string as is (not stripped); a number or boolean with Python's ``str`` (``True``, ``1.0``);
    None as ""; a list as ``- item`` lines, each item's own text starting on its dash line (its
    leading whitespace dropped, so an object item reads ``- key: value`` and its other keys follow
    indented); an object as ``key: value`` lines, a nested object or list as ``key:`` followed by
    its lines one level deeper (an empty one: ``key:`` and an empty line). ``depth`` is the
    nesting level, two spaces each.

    Example:
        >>> flatten({"plan": "pro", "flags": [True, None], "rows": [{"a": 1, "b": 2}], "none": {}})
        'plan: pro\nflags:\n  - True\n  - \nrows:\n  - a: 1\n    b: 2\nnone:\n'
    """
    pad = "  " * depth
    if value is None:
        return ""
    if isinstance(value, list):
        return "\n".join(f"{pad}- {flatten(item, depth + 1).lstrip()}" for item in value)
    if isinstance(value, dict):
        lines = []
        for key, item in value.items():
            nested = isinstance(item, dict | list)
            lines.append(f"{pad}{key}:\n{flatten(item, depth + 1)}" if nested else f"{pad}{key}: {flatten(item)}")
        return "\n".join(lines)
    return str(value)


def strands_text(value: Any) -> str:
    """strands-decider text (``prompting.render_content``): a string stripped, an object or list as
    JSON indented by two spaces with non-ASCII kept, None as ""."""
    if value is None:
        return ""
    if isinstance(value, str):
        return value.strip()
    return json.dumps(value, indent=2, ensure_ascii=False)


def one_line(text: str) -> str:
    """A description collapsed to one line: runs of whitespace become one space, ends trimmed
    (strands-decider ``_option_block``, so that an option is exactly one line)."""
    return " ".join(text.split())


def encodable(texts: list[str]) -> list[str]:
    """``texts`` unchanged, after checking each is valid Unicode (a tokenizer cannot read a lone
    surrogate such as ``"\\ud800"``, which JSON lets a client send).

    Raises:
        ApiUsageError: a text holds a lone surrogate.
    """
    for text in texts:
        try:
            text.encode("utf-8")
        except UnicodeEncodeError as exc:
            bad = text[exc.start]
            raise ApiUsageError(
                f"the request holds a lone surrogate (U+{ord(bad):04X}), which is not a character; send valid Unicode"
            ) from None
    return texts


@dataclass(frozen=True)
class Branch:
    """One question's tokens after the state.

    Attributes:
        ids (tuple[int, ...]): the question's token ids (positions ``S..S+L-1``).
        query (int): index in ``ids`` of the query token.
        keys (tuple[int, ...]): index in ``ids`` of each option's key token, in slot order.
        positions (tuple[int, ...] | None): each token's position after the state's (``S + p``),
            when not ``0..L-1`` (Kev's option isolation).
        spans (tuple[int, ...] | None): each token's option (0-based), :data:`NO_OPTION` for the
            instructions and :data:`DECIDE` for the query, under option isolation; None otherwise.
    """

    ids: tuple[int, ...]
    query: int
    keys: tuple[int, ...]
    positions: tuple[int, ...] | None = None
    spans: tuple[int, ...] | None = None


#: Values of :attr:`Branch.spans`: an instructions token, and the decide token.
NO_OPTION, DECIDE = -1, -2


@dataclass(frozen=True)
class Layout:
    """A request as token ids: the state once, then one branch per question.

    Attributes:
        state (tuple[int, ...]): the state's ids (positions ``0..S-1``).
        branches (tuple[Branch, ...]): the questions in request order.
        dropped (dict[str, int]): tokens cut to fit the model's window, by part (``state``,
            ``questions``); empty when nothing was cut.
    """

    state: tuple[int, ...]
    branches: tuple[Branch, ...]
    #: Tokens cut to fit a window (strands-decider's ``fit``): ``{"state": n, "questions": m}``.
    dropped: dict[str, int] = field(default_factory=dict)

    def sequence(self) -> list[int]:
        """The packed sequence: state, then every branch (length ``S + Σ L``)."""
        return [*self.state, *(i for b in self.branches for i in b.ids)]


class Renderer(Protocol):
    """Turns a request into a :class:`Layout`."""

    def layout(self, work: Work) -> Layout:
        """The request's ids, query and key indices."""
        ...


def _option_text(name: str, description: Any) -> str:
    """``name`` alone when the description is null or the empty string, else ``"name: <text>"``."""
    return name if description is None or description == "" else f"{name}: {flatten(description)}"


def option_texts(question: Question) -> list[str]:
    """Kev/OpenJev option texts (before escaping), as Kev's ``kev/api.py`` ``to_record`` builds them:
    noul ``no``/``yes`` (``"no: <false description>"`` when described), choice the key or
    ``"key: <description>"``, score the level texts. A null or empty-string description shows the
    bare name."""
    if question.kind == "noul":
        return [_option_text(word, o.description) for o, word in zip(question.options, ("no", "yes"), strict=True)]
    if question.kind == "score":
        return [flatten(option.description) for option in question.options]
    return [_option_text(option.key, option.description) for option in question.options]


class DelimitedRenderer:
    """Kev and OpenJev: five delimiter tokens around separately tokenized pieces.

    With ``option_isolation`` (Kev checkpoints trained with it; ``kev/model.py`` ``encode``), every
    option span sits at the same positions right after the instructions, the decide token one past
    the longest span, and :attr:`Branch.spans` tells the backend's mask which option each token
    belongs to (an option sees the state, the instructions and itself; the decide token sees all).

    Args:
        tokenizer (PreTrainedTokenizerBase): the base's tokenizer.
        delimiters (dict[str, str]): strings of the roles state, question, option_start,
            option_end and decide.
        option_isolation (bool, optional): lay options out side by side. Defaults to False.

    Raises:
        ManifestError: a delimiter is missing or unknown to the tokenizer.
    """

    ROLES = ("state", "question", "option_start", "option_end", "decide")

    def __init__(
        self, tokenizer: PreTrainedTokenizerBase, delimiters: dict[str, str], *, option_isolation: bool = False
    ) -> None:
        self.tokenizer = tokenizer
        self.option_isolation = option_isolation
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
            encoded: list[list[int]] = self.tokenizer(encodable(texts), add_special_tokens=False)["input_ids"]
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
            lead = len(ids)
            keys, spans, positions = [], [NO_OPTION] * lead, list(range(lead))
            for number, _ in enumerate(question.options):
                span = [self.ids["option_start"], *next(encoded), self.ids["option_end"]]
                ids += span
                keys.append(len(ids) - 1)
                spans += [number] * len(span)
                positions += range(lead, lead + len(span))
            ids.append(self.ids["decide"])
            if not self.option_isolation:
                branches.append(Branch(tuple(ids), len(ids) - 1, tuple(keys)))
                continue
            positions.append(lead + max(spans.count(n) for n in range(question.size)))  # one past the longest
            spans.append(DECIDE)
            branches.append(Branch(tuple(ids), len(ids) - 1, tuple(keys), tuple(positions), tuple(spans)))
        return Layout(state, tuple(branches))


class StrandsRenderer:
    """strands-decider: a plain-text prompt per question, keys found through offsets.

    Follows ``strands_decider/prompting.py`` and ``infer.py`` of strands-decider 0.2.0. The state
    block is tokenized with the tokenizer's special tokens (a BOS where the checkpoint's tokenizer,
    or ``force_bos``, adds one), each question block without; the question blocks follow the state
    block, so the state's ids are shared by every question. User text is not escaped: a
    ``<|...|>`` in it reads as the tokenizer reads it, as upstream. The query is the prompt's last
    token; option j's key is the last token lying wholly inside option j's line.

    With ``fit_window`` set, a request is fitted to that many tokens as strands-decider's engine does
    by default (``infer.py`` ``_fit``): the questions claim the window first, up to three quarters of
    it, each longer question losing tokens from its front; the state keeps what is left, cut from
    its end. Without it nothing is cut (and the backend refuses a request over the window).

    Args:
        tokenizer (PreTrainedTokenizerBase): a fast tokenizer (offset mappings needed).
        template (StrandsTemplate): the prompt's fixed text.
        fit_window (int | None, optional): the window to fit requests to. Defaults to None.
    """

    #: Largest share of the window the questions may claim (``EngineConfig.max_question_fraction``).
    QUESTION_SHARE = 0.75
    #: Questions upstream fits to the window together (``EngineConfig.max_batch``).
    GROUP = 32

    def __init__(
        self, tokenizer: PreTrainedTokenizerBase, template: StrandsTemplate, fit_window: int | None = None
    ) -> None:
        if not getattr(tokenizer, "is_fast", False):
            raise ManifestError("strands-decider needs a fast tokenizer (tokenizer.json) for offset mappings")
        self.tokenizer = tokenizer
        self.template = template
        self.fit_window = fit_window
        self._lock = threading.Lock()

    def _description(self, question: Question, option: Option) -> str:
        if question.kind == "noul" and not option.given:
            return self.template.noul_descriptions[option.key]
        return one_line(strands_text(option.description))

    def question_text(self, question: Question) -> tuple[str, list[tuple[int, int]]]:
        """The question block and the character span of each option line in it."""
        t = self.template
        text = "\n".join(
            [t.question_open.format(kind=question.kind), t.headers[question.kind], strands_text(question.instructions)]
        )
        text += "\n" + t.options_open + "\n"
        spans = []
        for number, option in enumerate(question.options, start=1):
            description = self._description(question, option)
            pattern = t.option_line if description else t.option_line_bare
            line = pattern.format(number=number, name=option.key, description=description)
            spans.append((len(text), len(text) + len(line)))
            text += line + "\n"
        return text + t.options_close + "\n" + t.question_close, spans

    def _fit(
        self, state_text: str, state: list[int], ids: list[list[int]], offsets: list[list[tuple[int, int]]]
    ) -> tuple[list[int], list[list[int]], list[list[tuple[int, int]]], dict[str, int]]:
        """Upstream's ``_fit``, group by group of :data:`GROUP` questions (``EngineConfig.max_batch``):
        each group's questions claim up to three quarters of the window (a longer one loses its
        front), its state keeps the rest (cut from the end). Called under the tokenizer lock.

        Raises:
            ApiUsageError: the groups would read the state cut differently (one request has one
                state here); ask at most :data:`GROUP` questions per request.
        """
        window = self.fit_window or 0
        cap = max(1, int(window * self.QUESTION_SHARE))
        reserves = [min(max(len(x) for x in ids[g : g + self.GROUP]), cap) for g in range(0, len(ids), self.GROUP)]
        fitted = [
            self.tokenizer(state_text, truncation=True, max_length=max(1, window - r))["input_ids"] for r in reserves
        ]
        if any(f != fitted[0] for f in fitted):
            raise ApiUsageError(
                f"this state must be cut to fit the {window}-token window differently for each group of {self.GROUP} "
                f"questions; send at most {self.GROUP} questions per request"
            )
        group_reserve = [r for r in reserves for _ in range(self.GROUP)]
        cuts = [max(0, len(x) - group_reserve[i]) for i, x in enumerate(ids)]
        ids = [x[c:] for x, c in zip(ids, cuts, strict=True)]
        offsets = [o[c:] for o, c in zip(offsets, cuts, strict=True)]
        dropped = {k: v for k, v in (("state", len(state) - len(fitted[0])), ("questions", sum(cuts))) if v}
        return fitted[0], ids, offsets, dropped

    def state_text(self, state: Any) -> str:
        """The state block every question's prompt starts with."""
        return self.template.state_block.format(state=strands_text(state))

    def layout(self, work: Work) -> Layout:
        """Token ids of the state block, then each question block, with query and key indices.

        Raises:
            ApiUsageError: an option line yields no token of its own.
        """
        blocks = [self.question_text(q) for q in work.questions]
        state_text = self.state_text(work.state)
        encodable([state_text, *(text for text, _ in blocks)])
        with self._lock:  # a fast tokenizer is not safe to share across threads
            encoded = self.tokenizer(
                [text for text, _ in blocks], add_special_tokens=False, return_offsets_mapping=True
            )
            ids, offsets = list(encoded["input_ids"]), list(encoded["offset_mapping"])
            state = self.tokenizer(state_text)["input_ids"]
            dropped: dict[str, int] = {}
            if self.fit_window is not None:
                state, ids, offsets, dropped = self._fit(state_text, state, ids, offsets)
        branches = []
        for number, (_, spans) in enumerate(blocks, start=1):
            row, where = ids[number - 1], offsets[number - 1]
            branches.append(Branch(tuple(row), len(row) - 1, tuple(_last_tokens(where, spans, number))))
        return Layout(tuple(state), tuple(branches), dropped)


def _last_tokens(offsets: list[tuple[int, int]], spans: list[tuple[int, int]], number: int) -> list[int]:
    keys = []
    for option, (start, end) in enumerate(spans, start=1):
        inside = [j for j, (lo, hi) in enumerate(offsets) if hi > lo and lo >= start and hi <= end]
        if not inside:
            raise ApiUsageError(f"option {option} of question {number} has no token of its own; give it some text")
        keys.append(inside[-1])
    return keys
