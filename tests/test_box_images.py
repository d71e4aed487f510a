"""Which image a box question is about, for generated placeholders and instructions (pure)."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from decisiond.box_images import box_image, with_box_images
from decisiond.errors import ApiUsageError
from decisiond.render import Option, Question

_placeholder = st.text(min_size=1, max_size=12).map(lambda s: f"<{s}>")
_words = st.text(max_size=30).filter(lambda s: "<" not in s)


def _apart(names: list[str | None]) -> bool:
    """No placeholder inside another ("<a>" in "<<a>>"): then naming one would name both."""
    found = [n for n in names if n]
    return not any(a != b and a in b for a in found for b in found)


@settings(max_examples=150, deadline=None)
@given(
    names=st.lists(st.one_of(st.none(), _placeholder), max_size=5, unique=True).filter(_apart),
    picked=st.lists(st.integers(0, 4), max_size=3, unique=True),
    before=_words,
    after=_words,
)
def test_a_box_is_about_the_one_named_image_or_the_only_image(
    names: list[str | None], picked: list[int], before: str, after: str
) -> None:
    named = sorted({i for i in picked if i < len(names) and names[i] is not None})
    text = before + " ".join(names[i] or "" for i in named) + after
    question = Question("box", text, ())
    if len(named) == 1 or (not named and len(names) == 1):
        assert box_image("q", question, names) == (named[0] if named else 0)
        return
    with pytest.raises(ApiUsageError) as refused:
        box_image("q", question, names)
    message = str(refused.value)
    assert "question 'q' is a box question" in message
    if len(named) > 1:
        assert f"name {len(named)} images" in message
    elif not names:
        assert "carries no image" in message
    else:
        assert f"carries {len(names)} images but its instructions name none" in message


def test_only_box_questions_get_an_image_and_a_long_id_is_cut_in_the_message() -> None:
    noul = Question("noul", "Is it?", (Option("false", None), Option("true", None)))
    box = Question("box", "the dog in <b>", ())
    got = with_box_images(["n", "w"], [noul, box], ["<a>", "<b>"])
    assert got == (noul, Question("box", "the dog in <b>", (), image=1))
    with pytest.raises(ApiUsageError, match=r"'x{77}\.\.\.' is a box question"):
        with_box_images(["x" * 200], [Question("box", "the dog", ())], ["<a>", "<b>"])
