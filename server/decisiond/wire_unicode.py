"""Where in a request body a lone UTF-16 surrogate is, named without quoting the body.

A body's keys are mostly the caller's own text (state keys, question ids, option keys, asset
placeholders, unknown fields), and an error never echoes the state or a key (spec/wire.md §5).
:func:`invalid_unicode_at` shows the wire's own field names as they are (``state``,
``questions``, ``criteria``, ``true``, ...), an array item by its index, and every other object
member by its position, counted from 1: ``questions[question 2].criteria[option 1]``, or, for the
key itself, ``questions[question 2].criteria, the key of option 1``.
"""

from __future__ import annotations

from typing import Any

#: The wire's own field names in each kind of object, and the kind of each one's value.
_FIELDS: dict[str, dict[str, str]] = {
    "body": {
        "model": "text",
        "state": "text",
        "questions": "questions",
        "images": "text",
        "assets": "assets",
        "audio": "text",
        "video": "text",
    },
    "question": {"type": "text", "instructions": "text", "criteria": "criteria"},
    "noul criteria": {"true": "text", "false": "text"},
    "asset": {"type": "text", "format": "text", "data_base64": "text"},
}

#: Any other member of each kind of object: the noun it is counted by, what its key is called,
#: and the kind of its value. ``text`` is any JSON the caller wrote (a state, an instruction, an
#: unknown field's value); a kind not listed here names an unknown field.
_MEMBERS: dict[str, tuple[str, str, str]] = {
    "text": ("entry", "key", "text"),
    "questions": ("question", "id", "question"),
    "criteria": ("option", "key", "text"),
    "assets": ("asset", "placeholder", "asset"),
}
_UNKNOWN_FIELD = ("field", "name", "text")


def is_valid_unicode(text: str) -> bool:
    """Whether ``text`` encodes to UTF-8: no lone UTF-16 surrogate (``"\\ud800"`` in JSON decodes to one)."""
    if text.isascii():
        return True
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def _value_kind(kind: str, field: str, parent: dict[Any, Any]) -> str:
    """The kind of a wire field's value; a question's criteria are a noul's sides or a choice's options."""
    value_kind = _FIELDS[kind][field]
    if value_kind == "criteria" and parent.get("type") == "noul":
        return "noul criteria"
    return value_kind


def _members(item: dict[Any, Any], path: str, kind: str) -> tuple[str | None, list[tuple[Any, str, str]]]:
    """The place of the first key of ``item`` holding a lone surrogate (or None), and its members
    to look into: ``(value, path, kind)``."""
    fields = _FIELDS.get(kind, {})
    noun, what, member_kind = _MEMBERS.get(kind, _UNKNOWN_FIELD)
    base = path or "body"
    children: list[tuple[Any, str, str]] = []
    for position, (key, child) in enumerate(item.items(), start=1):
        if key in fields:
            children.append((child, f"{path}.{key}" if path else key, _value_kind(kind, key, item)))
        elif isinstance(key, str) and not is_valid_unicode(key):
            return f"{base}, the {what} of {noun} {position}", []
        else:
            children.append((child, f"{base}[{noun} {position}]", member_kind))
    return None, children


def invalid_unicode_at(value: Any) -> str | None:
    """Where the first string (value or key) holding a lone surrogate is, or None: a path that
    quotes no key of the request (see the module docstring). Iterative: a deep value costs no
    recursion.

    Example:
        >>> invalid_unicode_at({"questions": {"q": {"type": "choice", "criteria": {"ok": "bad \\ud800"}}}})
        'questions[question 1].criteria[option 1]'
        >>> invalid_unicode_at({"state": {"fine": 1, "bad \\ud800": 2}})
        'state, the key of entry 2'
    """
    stack: list[tuple[Any, str, str]] = [(value, "", "body")]
    while stack:
        item, path, kind = stack.pop()
        if isinstance(item, str):
            if not is_valid_unicode(item):
                return path or "body"
        elif isinstance(item, dict):
            found, children = _members(item, path, kind)
            if found is not None:
                return found
            stack.extend(reversed(children))
        elif isinstance(item, list):
            stack.extend((child, f"{path or 'body'}[{i}]", "text") for i, child in reversed(list(enumerate(item))))
    return None
