"""A yes/no question → an affirmative statement, by rule; and the generic texts a statement's
similarity to a state is measured against.

A sentence embedding model scores how close two texts are in meaning, not whether one entails
the other, and it barely sees negation. So a noul is read as a statement ("Is the customer
satisfied?" → "the customer satisfied"), and a negated question ("Is the customer not
satisfied?") as its affirmative, whose probability is then complemented: the two answers of a
negation pair sum to 1 by construction. The rules are deliberately small and English-only: the
leading auxiliary and the question mark go; ``not``/``n't``/``no one``/``never``/``no`` mark a
negation and are undone once, when they belong to the question itself: one after a subordinator or a
second auxiliary ("Does the customer say they did not receive it?") negates a clause of its own, and
the question is read as asked.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

_AUXILIARY = re.compile(
    r"^\s*(is|are|was|were|am|do|does|did|has|have|had|can|could|will|would|should|shall|may|might|must)\b\s*",
    re.IGNORECASE,
)
_CONTRACTED = re.compile(
    r"^\s*(isn't|aren't|wasn't|weren't|don't|doesn't|didn't|hasn't|haven't|hadn't|can't|cannot|couldn't|"
    r"won't|wouldn't|shouldn't|mustn't)\b\s*",
    re.IGNORECASE,
)
#: One negation marker each, and what undoes it (the first found is undone).
_NEGATIONS: tuple[tuple[re.Pattern[str], str], ...] = (
    (re.compile(r"\bnot\s+", re.IGNORECASE), ""),
    (re.compile(r"\bno one\b", re.IGNORECASE), "someone"),
    (re.compile(r"\bnobody\b", re.IGNORECASE), "somebody"),
    (re.compile(r"\bnever\b", re.IGNORECASE), "ever"),
    (re.compile(r"\bno\b", re.IGNORECASE), "a"),
)


#: Words that open a clause of the question's own (a subordinator, or a second auxiliary): a negation
#: after one of them negates that clause ("Does the customer say they did not receive it?"), not the
#: question, so the question is read as asked.
_CLAUSE_OPENERS = re.compile(
    r"\b(that|if|whether|because|when|while|since|although|unless|who|whom|whose|which|where|"
    r"is|are|was|were|am|be|been|do|does|did|has|have|had|can|could|will|would|should|shall|may|might|must)\b",
    re.IGNORECASE,
)


def _main_negation(text: str) -> tuple[re.Match[str], str] | None:
    """The first negation marker of ``text`` (a question after its leading auxiliary) and what undoes
    it, or None when there is none or the first one sits inside a clause of its own."""
    found = [(m, n, undo) for n, (pattern, undo) in enumerate(_NEGATIONS) if (m := pattern.search(text))]
    if not found:
        return None
    match, _, undo = min(found, key=lambda f: (f[0].start(), f[1]))
    if _CLAUSE_OPENERS.search(text[: match.start()]):
        return None
    return match, undo


def _undo(text: str, match: re.Match[str], undo: str) -> str:
    return re.sub(r"\s{2,}", " ", text[: match.start()] + undo + text[match.end() :]).strip()


@dataclass(frozen=True)
class Statement:
    """A question read as a statement.

    Attributes:
        text: the affirmative statement.
        negated: the question asked the negation of ``text`` (p(yes) is 1 − p(text)).
    """

    text: str
    negated: bool


def affirmative(question: str) -> Statement:
    """The affirmative statement of a yes/no question, and whether the question was negated.

    Example:
        >>> affirmative("Is the customer not satisfied?")
        Statement(text='the customer satisfied', negated=True)
        >>> affirmative("Doesn't the ticket mention a deadline?")
        Statement(text='the ticket mention a deadline', negated=True)
        >>> affirmative("Names a deadline")
        Statement(text='Names a deadline', negated=False)
    """
    text = question.strip()
    negated = False
    contracted = _CONTRACTED.match(text)
    if contracted:
        text, negated = text[contracted.end() :], True
    elif text.endswith("?"):
        auxiliary = _AUXILIARY.match(text)
        if auxiliary:
            text = text[auxiliary.end() :]
        if main := _main_negation(text):
            text, negated = _undo(text, *main), True
    return Statement(text.strip().rstrip("?").strip(), negated)


_POSITIVE_AUXILIARY = {
    "isn't": "is", "aren't": "are", "wasn't": "was", "weren't": "were", "don't": "do", "doesn't": "does",
    "didn't": "did", "hasn't": "has", "haven't": "have", "hadn't": "had", "can't": "can", "cannot": "can",
    "couldn't": "could", "won't": "will", "wouldn't": "would", "shouldn't": "should", "mustn't": "must",
}  # fmt: skip


def positive_question(question: str) -> Statement:
    """A negated yes/no question made positive, still a question, and whether it was negated.

    The same rules as :func:`affirmative`, keeping the auxiliary (for a model that reads questions).

    Example:
        >>> positive_question("Doesn't the ticket mention a deadline?")
        Statement(text='Does the ticket mention a deadline?', negated=True)
        >>> positive_question("Is there no workaround?")
        Statement(text='Is there a workaround?', negated=True)
    """
    text = question.strip()
    if not text.endswith("?"):
        return Statement(text, False)
    contracted = _CONTRACTED.match(text)
    if contracted:
        word = contracted.group(1)
        positive = _POSITIVE_AUXILIARY[word.lower()]
        positive = positive.capitalize() if word[0].isupper() else positive
        return Statement(positive + " " + text[contracted.end() :], True)
    auxiliary = _AUXILIARY.match(text)
    if not auxiliary:
        return Statement(text, False)
    rest = text[auxiliary.end() :]
    main = _main_negation(rest)
    if main is None:
        return Statement(text, False)
    return Statement(text[: auxiliary.end()] + _undo(rest, *main), True)


#: Generic texts, of many kinds and none in particular: a state's similarity to a statement is read
#: as a z-score against these texts' similarities to the same statement. Fixed, so answers never
#: depend on other requests.
GENERIC_TEXTS: tuple[str, ...] = (
    "Hello, I have a question.",
    "Thanks for getting back to me.",
    "Please find the attached document.",
    "The meeting has been moved to Tuesday afternoon.",
    "Can you send me more information?",
    "I ordered a blue jacket last month.",
    "The weather was cloudy with some rain in the evening.",
    "Our team is working on the next release.",
    "Let me know if you need anything else.",
    "I updated the spreadsheet with the new numbers.",
    "The train was a few minutes late this morning.",
    "We had pasta for dinner.",
    "The report is due at the end of the quarter.",
    "I read an article about gardening.",
    "The office will be closed on the public holiday.",
    "She bought a new bicycle for commuting.",
    "Here is the link to the shared folder.",
    "The software version is 3.2.1.",
    "He moved to another city last year.",
    "The package contains two cables and a manual.",
    "Could you confirm the address?",
    "The museum opens at ten.",
    "I am writing about my account.",
    "The results of the survey are in.",
    "There is a new cafe near the station.",
    "The function returns a list of strings.",
    "We discussed the budget for next year.",
    "The children played in the park.",
    "Please review the changes when you can.",
    "It was a normal day at work.",
    "The store sells shoes and bags.",
    "I will be out of the office next week.",
    "This product comes in three colours.",
    "The log file shows the service started.",
    "Our customer support team answers emails.",
    "The comment was posted yesterday.",
    "A new user signed up for the newsletter.",
    "The invoice lists the items ordered.",
    "The command prints the current directory.",
    "The review mentions the hotel breakfast.",
)
