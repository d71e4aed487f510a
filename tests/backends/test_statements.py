"""Yes/no questions made affirmative statements by rule (the default model's noul readout)."""

from __future__ import annotations

import pytest

from decisiond.backends.noul_statements import one_sided, statement_text
from decisiond.backends.statements import Statement, affirmative, positive_question
from decisiond.render import Option, Question


@pytest.mark.parametrize(
    ("question", "expected"),
    [
        ("Is the customer satisfied?", Statement("the customer satisfied", False)),
        ("Is the customer not satisfied?", Statement("the customer satisfied", True)),
        ("Does the ticket mention a deadline?", Statement("the ticket mention a deadline", False)),
        ("Does the ticket not mention a deadline?", Statement("the ticket mention a deadline", True)),
        ("Doesn't the ticket mention a deadline?", Statement("the ticket mention a deadline", True)),
        ("Is there no workaround?", Statement("there a workaround", True)),
        ("Is no one's safety at risk?", Statement("someone's safety at risk", True)),
        ("Has the customer never ordered before?", Statement("the customer ever ordered before", True)),
        ("Was malware detected?", Statement("malware detected", False)),
        ("Names a deadline", Statement("Names a deadline", False)),  # not a question: kept as is
        # a negation inside a clause of its own negates that clause, not the question: read as asked
        (
            "Does the customer say they did not receive the refund?",
            Statement("the customer say they did not receive the refund", False),
        ),
        (
            "Does the ticket report that the device does not turn on?",
            Statement("the ticket report that the device does not turn on", False),
        ),
        ("Is it a problem when nobody answers?", Statement("it a problem when nobody answers", False)),
        ("Not a question, no mark", Statement("Not a question, no mark", False)),
    ],
)
def test_affirmative(question: str, expected: Statement) -> None:
    assert affirmative(question) == expected


def test_a_question_and_its_negation_share_one_statement() -> None:
    plain, negated = affirmative("Is this comment insulting?"), affirmative("Is this comment not insulting?")
    assert plain.text == negated.text and not plain.negated and negated.negated


def noul(instructions: str, false: str | None = None, true: str | None = None) -> Question:
    return Question("noul", instructions, (Option("false", false), Option("true", true)))


def test_only_nouls_without_criteria_are_read_as_statements() -> None:
    assert statement_text(noul("Is it not urgent?")) == ("it urgent", True)
    assert statement_text(noul("")) == ("Yes.", False)
    assert statement_text(noul("Is it urgent?", true="Says now or today")) is None
    assert statement_text(noul("Is it urgent?", false="Can wait", true="Must be now")) is None
    assert statement_text(Question("choice", "x", (Option("a", None),))) is None


def test_a_one_sided_noul_keeps_its_sides_under_affirmative_instructions() -> None:
    question = noul("Is it not urgent?", true="Says now")
    assert one_sided(question) == (Question("noul", "it urgent", question.options), True)
    assert one_sided(noul("Is it urgent?", false="Can wait"))[1] is False  # type: ignore[index]
    assert one_sided(noul("Is it urgent?")) is None
    assert one_sided(noul("Is it urgent?", false="Can wait", true="Must be now")) is None


@pytest.mark.parametrize(
    ("question", "expected"),
    [
        ("Is the customer not satisfied?", Statement("Is the customer satisfied?", True)),
        ("Doesn't the ticket mention a deadline?", Statement("Does the ticket mention a deadline?", True)),
        ("can't this wait?", Statement("can this wait?", True)),
        ("Is there no workaround?", Statement("Is there a workaround?", True)),
        ("Is no one's safety at risk?", Statement("Is someone's safety at risk?", True)),
        ("Is the customer satisfied?", Statement("Is the customer satisfied?", False)),
        ("Not late.", Statement("Not late.", False)),
        ("Why not?", Statement("Why not?", False)),  # no auxiliary: not a yes/no question to rewrite
    ],
)
def test_positive_question(question: str, expected: Statement) -> None:
    assert positive_question(question) == expected


@pytest.mark.parametrize(
    "question",
    [
        "Does the customer say they did not receive the refund?",
        "Does this alert suggest the account is not compromised?",
        "Is the customer upset because the parcel did not arrive?",
        "Can you tell whether no one replied?",
    ],
)
def test_a_negation_in_a_clause_of_its_own_is_asked_as_sent(question: str) -> None:
    assert positive_question(question) == Statement(question, False)
