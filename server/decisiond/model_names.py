"""Which model a request's ``model`` names: served names, manifest aliases, ``--alias``, hosted Jev ids.

Out of the box the default model (the first served) also answers the ids under which the hosted
service and its gateways serve Jev (spec/wire.md §8): :data:`HOSTED_JEV_IDS`, an explicit list,
never a pattern, so an id that exists nowhere (``jev-0.0-does-not-exist``) stays unknown (400)
and a client that pins a version never gets another model's numbers silently. ``--strict-models``
turns the list off. ``--alias NAME=MODEL`` (repeatable) and a manifest's ``aliases`` add more.

Precedence when one id is claimed twice: a model's own name or manifest alias, then ``--alias``,
then the hosted list. ``jev-latest`` and ``default`` always mean the default model.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

#: Names that always mean the default model (the first one served), even with --strict-models.
DEFAULT_NAMES = ("jev-latest", "default")

_JEV_VERSIONS = ("jev-latest", "jev-preview", "jev-1.13.0", "jev-1.13", "jev-1.14.0", "jev-1.14")
#: The ids the hosted service and its gateways serve Jev under (spec/wire.md §8): the hosted ids,
#: the same behind the ``typesafe/`` gateway prefix, OpenRouter's and Workers AI's ids.
HOSTED_JEV_IDS: tuple[str, ...] = (
    *_JEV_VERSIONS,
    *(f"typesafe/{version}" for version in _JEV_VERSIONS),
    "typesafe/jev",
    "~typesafe/jev-latest",
    "@cf/typesafe/jev",
)


def parse_alias(text: str) -> tuple[str, str]:
    """``"NAME=MODEL"`` → ``(NAME, MODEL)``, both stripped.

    Raises:
        ValueError: no ``=``, or an empty side.

    Example:
        >>> parse_alias("gpt-judge=minilm-l6")
        ('gpt-judge', 'minilm-l6')
    """
    name, sep, model = text.partition("=")
    name, model = name.strip(), model.strip()
    if not sep or not name or not model:
        raise ValueError(f"an alias is NAME=MODEL, got {text[:100]!r}")
    return name, model


def name_table(models: Sequence[Iterable[str]], aliases: Iterable[str] = (), *, strict: bool = False) -> dict[str, int]:
    """Every id a request may send → the index of the model that answers it.

    Args:
        models (Sequence[Iterable[str]]): each served model's name and manifest aliases, in serving
            order (index 0 is the default).
        aliases (Iterable[str], optional): ``NAME=MODEL`` entries; MODEL is a served name, alias or
            one of :data:`DEFAULT_NAMES`. Defaults to none.
        strict (bool, optional): leave :data:`HOSTED_JEV_IDS` out. Defaults to False.

    Returns:
        dict[str, int]: id → model index, in the precedence of the module docstring.

    Raises:
        ValueError: an alias is malformed, names a model that is not served, or takes a served
            model's own name or manifest alias for another model.
    """
    table: dict[str, int] = {}
    for index, names in enumerate(models):
        for name in names:
            table.setdefault(name, index)
    for name in DEFAULT_NAMES:
        table[name] = 0
    for entry in aliases:
        name, target = parse_alias(entry)
        if target not in table:
            raise ValueError(f"--alias {name}={target}: no served model is named {target!r}")
        if name in table and table[name] != table[target]:
            raise ValueError(f"--alias {name}={target}: {name!r} already names another served model")
        table[name] = table[target]
    if not strict:
        for hosted in HOSTED_JEV_IDS:
            table.setdefault(hosted, 0)
    return table
