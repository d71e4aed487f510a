"""The three pointer-head families and the manifest options of the ``pointer_head`` backend.

spec/pointer-head.md describes Kev, OpenJev (wev) and strands-decider checkpoints. Each family
has a preset here (files, prompt dialect, delimiters, temperatures, limits); every preset value
can be overridden by a manifest key of the same name, validated by :class:`PointerHeadOptions`.
This module imports neither torch nor transformers, so that ``find_manifest`` can recognise a
checkpoint folder cheaply.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

Family = Literal["kev", "wev", "strands"]
Isolation = Literal["auto", "packed", "rows", "prefix"]

#: File whose presence in a checkpoint folder names its family, checked in this order.
FAMILY_FILES: tuple[tuple[str, Family], ...] = (
    ("strands_decider_config.json", "strands"),
    ("hobson_config.json", "strands"),  # strands-decider checkpoints saved before the rename
    ("wev.json", "wev"),
    ("webdecide.json", "wev"),
    ("head.pt", "kev"),
)

#: The names each family's own server answers to by default (Kev's ``kev/api.py``, OpenJev's
#: ``wev/api.py``, strands-decider's ``schema.py``): a checkpoint folder served without a manifest
#: answers to its family's. When two served checkpoints share one, the first listed gets it.
FAMILY_ALIASES: dict[Family, tuple[str, ...]] = {
    "kev": ("kev-latest",),
    "wev": ("wev-latest",),
    "strands": ("strands-decider-latest",),
}

#: The five delimiter tokens of Kev and OpenJev, by role (spec/pointer-head.md, "Rendering").
KEV_DELIMITERS: dict[str, str] = {
    "state": "<|fim_prefix|>",
    "question": "<|fim_middle|>",
    "option_start": "<|box_start|>",
    "option_end": "<|box_end|>",
    "decide": "<|fim_suffix|>",
}


class StrandsTemplate(BaseModel):
    """The plain-text prompt of strands-decider 0.2.0, word for word (every field overridable).

    Source: PyPI ``strands-decider`` 0.2.0, ``strands_decider/prompting.py`` (``render_state``,
    ``render_question``, ``_option_block``). A question's prompt is ``state_block`` (the state text
    in ``{state}``), then these lines joined by ``"\\n"``: ``question_open`` (``{kind}``), the type's
    header, the instructions (kept even when empty), ``options_open``, one line per option from
    ``option_line`` (``{number}``, ``{name}``, ``{description}``) or ``option_line_bare`` when the
    description is empty, ``options_close``, and finally ``question_close``. The query is the
    prompt's last token.
    """

    model_config = ConfigDict(extra="forbid")

    state_block: str = "<state>\n{state}\n</state>\n"
    question_open: str = '<question type="{kind}">'
    headers: dict[str, str] = Field(
        default_factory=lambda: {
            "noul": "Decide whether the statement is true of the state.",
            "choice": "Select exactly one option.",
            "score": "Rate the state against the ordered levels below (lowest first).",
        }
    )
    options_open: str = "<options>"
    option_line: str = "{number}. {name} \u2014 {description}"
    option_line_bare: str = "{number}. {name}"
    options_close: str = "</options>"
    #: The noul sides' texts when the request leaves a side out (an explicit null reads as empty).
    noul_descriptions: dict[str, str] = Field(
        default_factory=lambda: {
            "false": "the statement does not hold for this state",
            "true": "the statement holds for this state",
        }
    )
    question_close: str = "</question>\n<answer>"


class PointerHeadOptions(BaseModel):
    """Manifest keys of the ``pointer_head`` backend; unset ones take the family's preset.

    Attributes:
        family: kev, wev or strands.
        base: the base trunk (Hub id or folder) when the checkpoint's metadata should not be used.
        base_revision: the base's revision in the local Hugging Face cache.
        tokenizer: a folder or Hub id of the tokenizer, overriding the family's choice.
        isolation: ``auto`` (packed on attention-only bases, prefix on hybrid ones), ``packed``
            (one sequence per request with a block mask), ``rows`` (state + question per row),
            ``prefix`` (the state once, its cache copied per question row).
        temperature: one temperature for every question type (overrides the checkpoint's).
        temperature_by_kind: per-type temperatures (noul, choice, score); beats ``temperature``.
        head_dim: dp, the head's projection size (checked against the tensors).
        delimiters: Kev/wev delimiter strings by role.
        strands: the strands-decider prompt template.
        max_state_tokens / max_branch_tokens / max_prompt_tokens: per-request token limits
            (a 400 above them); None for none beyond the server's.
        prefix_cache_entries: state caches kept between requests (prefix isolation); 0 disables.
        strands_window: a strands-decider request over the checkpoint's window (``max_length``,
            3,072 tokens): ``refuse`` (400 ``max_tokens_exceeded``, upstream's ``strict_window``) or
            ``fit`` (cut as upstream's engine does by default; the response reports the cut in
            ``x_window_fit``).
    """

    model_config = ConfigDict(extra="forbid")

    family: Family
    base: str | None = None
    base_revision: str | None = None
    tokenizer: str | None = None
    isolation: Isolation = "auto"
    temperature: float | None = Field(default=None, gt=0)
    temperature_by_kind: dict[Literal["noul", "choice", "score"], float] | None = None
    head_dim: int | None = Field(default=None, ge=1)
    delimiters: dict[str, str] = Field(default_factory=lambda: dict(KEV_DELIMITERS))
    strands: StrandsTemplate = Field(default_factory=StrandsTemplate)
    max_state_tokens: int | None = Field(default=None, ge=1)
    max_branch_tokens: int | None = Field(default=None, ge=1)
    max_prompt_tokens: int | None = Field(default=None, ge=1)
    prefix_cache_entries: int = Field(default=8, ge=0)
    strands_window: Literal["refuse", "fit"] = "refuse"


def parse_options(raw: dict[str, Any], *, source: str) -> PointerHeadOptions:
    """Validate a manifest's backend options.

    Args:
        raw (dict[str, Any]): ``Manifest.backend_options``.
        source (str): the manifest, for the message.

    Raises:
        ValueError: naming each bad key and what it accepts.
    """
    try:
        return PointerHeadOptions.model_validate(raw)
    except ValidationError as exc:
        problems = "; ".join(f"{'.'.join(map(str, e['loc']))}: {e['msg']}" for e in exc.errors())
        raise ValueError(f"{source}: invalid pointer_head options: {problems}") from exc


def detect_family(folder: Path) -> Family | None:
    """The family of a checkpoint folder from the files it holds, or None when it is none of them.

    ``strands_decider_config.json`` or the legacy ``hobson_config.json`` → strands; ``wev.json``
    or ``webdecide.json`` → wev; ``head.pt`` → kev.
    """
    if not folder.is_dir():
        return None
    for name, family in FAMILY_FILES:
        if (folder / name).is_file():
            return family
    return None
