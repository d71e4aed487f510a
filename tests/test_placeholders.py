"""An asset's placeholder must be referenced by a text the model reads (spec/wire.md §2, §8; issue
"A drop-in for the hosted service": placeholders that must be referenced), whichever way it came."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from decisiond.errors import ApiUsageError
from decisiond.media import check_placeholders, strings_of

ASSET = {"type": "image", "format": "png", "data_base64": "AAAA"}


def test_every_string_of_a_json_value_is_found_keys_included() -> None:
    value = ["state <a>", {"instructions": {"k <b>": [1, True, None, "x <c>"]}, "criteria": None}]
    assert set(strings_of(value)) >= {"state <a>", "k <b>", "x <c>", "instructions", "criteria"}


def test_a_placeholder_in_the_state_an_instruction_or_a_criterion_is_referenced() -> None:
    for texts in (["a photo: <p>"], ["", "is <p> blurry?"], ["x", "option", "<p> shows a dog"]):
        check_placeholders({"<p>": ASSET}, texts)


def test_an_unreferenced_or_empty_placeholder_is_refused_and_named() -> None:
    """Bug: an asset whose placeholder appeared nowhere was answered 200, its image read by no text."""
    with pytest.raises(ApiUsageError, match="'<q>' is not referenced"):
        check_placeholders({"<p>": ASSET, "<q>": ASSET}, ["a photo: <p>"])
    with pytest.raises(ApiUsageError, match="empty placeholder"):
        check_placeholders({"": ASSET}, ["a photo"])


@given(placeholder=st.text(min_size=1, max_size=20), before=st.text(max_size=20), after=st.text(max_size=20))
def test_any_placeholder_is_referenced_exactly_when_some_text_contains_it(
    placeholder: str, before: str, after: str
) -> None:
    check_placeholders({placeholder: ASSET}, [before + placeholder + after])
    unrelated = before.replace(placeholder, "") if placeholder not in before else ""
    if placeholder not in unrelated:
        with pytest.raises(ApiUsageError):
            check_placeholders({placeholder: ASSET}, [unrelated])
