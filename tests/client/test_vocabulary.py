"""The vocabulary's refusals (the seed's "Refusals" paragraph, one test per rule) and its helpers."""

from __future__ import annotations

import dataclasses

import pytest

from decisiond.client import Choice, ChoiceAnswer, DecisionRequest, Noul, NoulAnswer, Score, ScoreAnswer
from decisiond.client.codec import encode_question, request_from_wire

# -- questions ---------------------------------------------------------------------------------


@pytest.mark.parametrize("blank", ["", "   ", None, {}, []])
def test_blank_instructions_are_refused(blank: object) -> None:
    for build in (lambda: Choice(blank, {"a": None}), lambda: Noul(blank), lambda: Score(blank, ["lo", "hi"])):
        with pytest.raises(ValueError, match="instructions"):
            build()


def test_instructions_that_are_not_text_are_refused() -> None:
    with pytest.raises(ValueError, match="instructions must be text"):
        Noul(3)


def test_structured_instructions_are_accepted_and_frozen() -> None:
    noul = Noul({"ask": "Is it urgent?", "examples": ["today"]})
    assert noul.instructions["ask"] == "Is it urgent?"
    with pytest.raises(TypeError):
        noul.instructions["ask"] = "changed"  # type: ignore[index]


def test_choice_without_options_is_refused() -> None:
    with pytest.raises(ValueError, match="at least one option"):
        Choice("Which team?", {})
    with pytest.raises(ValueError, match="at least one option"):
        Choice.of("Which team?")


@pytest.mark.parametrize("key", ["", "  "])
def test_choice_with_a_blank_key_is_refused(key: str) -> None:
    with pytest.raises(ValueError, match="option key .* blank"):
        Choice("Which team?", {"billing": None, key: "nothing"})


def test_choice_keeps_option_order_and_descriptions() -> None:
    choice = Choice("Which team?", {"other": None, "billing": "Payments", "technical": None})
    assert choice.keys == ("other", "billing", "technical")
    assert dict(choice.options) == {"other": None, "billing": "Payments", "technical": None}
    assert Choice.of("Which?", "b", "a").keys == ("b", "a")
    assert Choice.of("Which?", "a") == Choice("Which?", {"a": None})


@pytest.mark.parametrize(("yes", "no"), [("Names a deadline", None), (None, "No time pressure")])
def test_noul_describing_only_one_side_is_accepted_and_sent_as_such(yes: str | None, no: str | None) -> None:
    """Regression: the client refused a one-sided noul (the README's first example) that the wire
    allows; the side not described must be left out of the body, not sent as null."""
    noul = Noul("Is it urgent?", yes=yes, no=no)
    assert noul.described
    sent = {"true": yes, "false": no}
    assert encode_question(noul)["criteria"] == {side: text for side, text in sent.items() if text is not None}
    request = request_from_wire({"state": "s", "questions": {"q": encode_question(noul)}})[1]
    assert request.questions["q"] == noul


def test_noul_describes_both_sides_or_neither() -> None:
    assert not Noul.of("Is it urgent?").described
    assert Noul("Is it urgent?", yes="a deadline", no="no deadline").described


def test_score_of_one_level_is_refused() -> None:
    with pytest.raises(ValueError, match="at least two levels"):
        Score.of("How angry?", "Calm")


@pytest.mark.parametrize("level", ["", " ", None])
def test_score_with_a_blank_level_is_refused(level: object) -> None:
    with pytest.raises(ValueError, match="level 1"):
        Score("How angry?", ["Calm", level, "Furious"])


def test_score_keeps_levels_lowest_first() -> None:
    assert Score.of("How angry?", "Calm", "Annoyed", "Furious").levels == ("Calm", "Annoyed", "Furious")


def test_questions_are_immutable() -> None:
    choice = Choice.of("Which?", "a", "b")
    with pytest.raises(dataclasses.FrozenInstanceError):
        choice.instructions = "other"  # type: ignore[misc]
    with pytest.raises(TypeError):
        choice.options["c"] = None  # type: ignore[index]


# -- requests ----------------------------------------------------------------------------------


def test_request_without_a_state_is_refused() -> None:
    with pytest.raises(ValueError, match="needs a state"):
        DecisionRequest(None, {"q": Noul.of("Is it?")})


def test_request_without_a_question_is_refused() -> None:
    with pytest.raises(ValueError, match="at least one question"):
        DecisionRequest("state", {})


@pytest.mark.parametrize("question_id", ["", "   "])
def test_request_with_a_blank_id_is_refused(question_id: str) -> None:
    with pytest.raises(ValueError, match="question id .* blank"):
        DecisionRequest("state", {"ok": Noul.of("Is it?"), question_id: Noul.of("Is it?")})


def test_request_with_a_value_that_is_not_a_question_is_refused() -> None:
    with pytest.raises(ValueError, match="not a Choice, Noul or Score"):
        DecisionRequest("state", {"q": "Is it?"})  # type: ignore[dict-item]


def test_request_keeps_question_order_and_any_json_state() -> None:
    request = DecisionRequest({"ticket": "hi", "tier": 2}, {"z": Noul.of("Z?"), "a": Noul.of("A?")})
    assert list(request.questions) == ["z", "a"]
    assert request.state == {"ticket": "hi", "tier": 2}


# -- answers -----------------------------------------------------------------------------------


def test_choice_answer_whose_winner_is_not_among_the_options_is_refused() -> None:
    with pytest.raises(ValueError, match="winner 'refunds' is not among the options"):
        ChoiceAnswer("refunds", {"billing": 0.9, "technical": 0.1}, 0.8)


def test_choice_answer_with_a_missing_probability_is_refused() -> None:
    with pytest.raises(ValueError, match="probability of option 'technical' is missing"):
        ChoiceAnswer("billing", {"billing": 0.9, "technical": None}, 0.8)  # type: ignore[dict-item]
    with pytest.raises(ValueError, match="needs a probability per option"):
        ChoiceAnswer("billing", {}, 0.8)


def test_choice_answer_with_a_missing_confidence_is_refused() -> None:
    with pytest.raises(ValueError, match="confidence is missing"):
        ChoiceAnswer("billing", {"billing": 1.0}, None)  # type: ignore[arg-type]


@pytest.mark.parametrize("bad", [-0.01, 1.01, float("nan"), float("inf")])
def test_choice_answer_probability_or_confidence_outside_0_1_is_refused(bad: float) -> None:
    with pytest.raises(ValueError, match="probability of option 'billing'"):
        ChoiceAnswer("billing", {"billing": bad, "technical": 0.1}, 0.5)
    with pytest.raises(ValueError, match="confidence"):
        ChoiceAnswer("billing", {"billing": 0.9, "technical": 0.1}, bad)


def test_score_answer_with_a_probability_count_other_than_its_level_count_is_refused() -> None:
    with pytest.raises(ValueError, match="2 probabilities for 3 levels"):
        ScoreAnswer(1.0, [0.5, 0.5], ["Calm", "Annoyed", "Furious"], 0.5)


@pytest.mark.parametrize("position", [-0.1, 2.01, float("nan")])
def test_score_answer_with_a_position_off_its_scale_is_refused(position: float) -> None:
    with pytest.raises(ValueError, match="position"):
        ScoreAnswer(position, [0.2, 0.3, 0.5], ["Calm", "Annoyed", "Furious"], 0.5)


def test_score_answer_probability_or_confidence_outside_0_1_is_refused() -> None:
    with pytest.raises(ValueError, match="probability of level 2"):
        ScoreAnswer(1.0, [0.2, 0.3, 1.5], ["Calm", "Annoyed", "Furious"], 0.5)
    with pytest.raises(ValueError, match="confidence"):
        ScoreAnswer(1.0, [0.2, 0.3, 0.5], ["Calm", "Annoyed", "Furious"], None)  # type: ignore[arg-type]


def test_noul_answer_outside_0_1_or_not_a_number_is_refused() -> None:
    with pytest.raises(ValueError, match="outside 0 to 1"):
        NoulAnswer(1.2)
    with pytest.raises(ValueError, match="not a number"):
        NoulAnswer("0.5")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="not a number"):
        NoulAnswer(True)


def test_choice_answer_helpers() -> None:
    answer = ChoiceAnswer("billing", {"technical": 0.3, "billing": 0.6, "other": 0.1}, 0.4)
    assert answer.probability == 0.6
    assert answer.ranked() == [("billing", 0.6), ("technical", 0.3), ("other", 0.1)]
    assert answer.margin() == pytest.approx(0.3)
    assert ChoiceAnswer("a", {"a": 1.0}, 1.0).margin() == 1.0
    tie = ChoiceAnswer("a", {"a": 0.5, "b": 0.5}, 0.0)
    assert tie.ranked() == [("a", 0.5), ("b", 0.5)]
    assert tie.margin() == 0.0


def test_score_answer_helpers() -> None:
    answer = ScoreAnswer(1.05, [0.0, 0.95, 0.05], ["Calm", "Concerned but civil", "Very angry"], 0.925)
    assert answer.top_level == 1
    assert answer.level() == 1
    assert answer.label() == "Concerned but civil"
    assert ScoreAnswer(1.5, [0.5, 0.0, 0.5], ["a", "b", "c"], 0.0).level() == 2  # halves round up
    assert ScoreAnswer(1.5, [0.5, 0.0, 0.5], ["a", "b", "c"], 0.0).top_level == 0  # first on a tie
    assert ScoreAnswer(0.49, [0.51, 0.49], ["lo", "hi"], 0.0).label() == "lo"


def test_noul_answer_truth() -> None:
    assert NoulAnswer(0.81).probability == 0.81
    assert NoulAnswer(0.81)
    assert not NoulAnswer(0.5)
