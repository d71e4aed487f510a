"""Questions → slots and slot texts (pure)."""

from __future__ import annotations

from decisiond.render import Option, Question, SlotTemplates, to_question, to_text
from decisiond.wire import ChoiceQuestion, NoulCriteria, NoulQuestion, ScoreQuestion


def test_to_text_keeps_key_order_and_unicode() -> None:
    assert to_text("  as is ") == "  as is "
    assert to_text({"z": "환불", "a": [1, None, True]}) == '{"z": "환불", "a": [1, null, true]}'
    assert to_text(None) == ""


def test_noul_slots_are_false_then_true() -> None:
    q = to_question(NoulQuestion(type="noul", instructions="Urgent?", criteria=NoulCriteria(true="Says today")))
    assert q == Question("noul", "Urgent?", (Option("false", None, given=False), Option("true", "Says today")))


def test_a_noul_side_sent_as_null_is_told_apart_from_an_absent_one() -> None:
    """Regression: an explicit ``null`` side and a missing side became the same Option, so the
    strands-decider template (which writes its default text only for a missing side) could not
    render the request as upstream does."""
    criteria = NoulCriteria.model_validate({"false": None})
    q = to_question(NoulQuestion(type="noul", instructions="Urgent?", criteria=criteria))
    assert q.options == (Option("false", None, given=True), Option("true", None, given=False))
    bare = to_question(NoulQuestion(type="noul", instructions="Urgent?"))
    assert [o.given for o in bare.options] == [False, False]


def test_choice_and_score_slots_keep_order() -> None:
    c = to_question(ChoiceQuestion(type="choice", criteria={"b": None, "a": {"x": 1}}))
    assert [o.key for o in c.options] == ["b", "a"] and c.options[1].description == {"x": 1}
    s = to_question(ScoreQuestion(type="score", criteria=["low", {"mid": 1}, "high"]))
    assert [o.key for o in s.options] == ["0", "1", "2"] and s.size == 3


def test_slot_texts_by_hand() -> None:
    t = SlotTemplates()
    choice = Question("choice", "Which team?", (Option("billing", "Refunds"), Option("technical", None)))
    assert t.slot_texts(choice) == ("Which team? billing: Refunds", "Which team? technical")
    noul = Question("noul", "Urgent?", (Option("false", None), Option("true", "Says today")))
    assert t.slot_texts(noul) == ("Urgent? No.", "Urgent? Says today")
    score = Question("score", None, (Option("0", "Calm"), Option("1", {"level": "angry"})))
    assert t.slot_texts(score) == ("Calm", '{"level": "angry"}')


def test_custom_templates() -> None:
    t = SlotTemplates(choice="{option} / {instructions}", yes_text="yes", no_text="no")
    q = Question("choice", "Q", (Option("a", None),))
    assert t.slot_texts(q) == ("a / Q",)
    assert t.slot_texts(Question("noul", "Q", (Option("false", None), Option("true", None)))) == ("Q no", "Q yes")
