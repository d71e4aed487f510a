"""Which nouls the bi-encoder reads as statements (:mod:`.statements`), and the constants of that readout.

:func:`statement_text` picks nouls without criteria (read as a statement against the generic bank),
:func:`one_sided` nouls with one described side (compared as sides under affirmative instructions).
"""

from __future__ import annotations

from ..render import Question, to_text
from .statements import affirmative

#: p(true) of a statement noul is sigmoid(NOUL_SLOPE · z + NOUL_OFFSET), z the state's z-score among the
#: generic texts: the even point is z = 1.2 (a state about the statement sits well above generic texts).
#: Both were set on the even-numbered states of eval/labelled.jsonl only (the even point for accuracy, the
#: slope by NLL), so the odd half is out of sample (nouls 0.62 there, 0.70 on the even half); `decisiond
#: calibrate` refits them on a user's own examples.
NOUL_SLOPE = 0.47
NOUL_OFFSET = -0.56
#: A state whose tokens are at least this share of unknown tokens is unreadable (answered uniformly).
UNREADABLE_SHARE = 0.5


def _described(question: Question) -> list[bool]:
    return [o.description is not None and to_text(o.description).strip() != "" for o in question.options]


def statement_text(question: Question) -> tuple[str, bool] | None:
    """The statement a noul without criteria is read as, and whether it is negated; None for any
    other question (a noul with a described side compares its sides).

    Example:
        >>> from decisiond.render import Option
        >>> statement_text(Question("noul", "Is it not late?", (Option("false", None), Option("true", None))))
        ('it late', True)
    """
    if question.kind != "noul" or any(_described(question)):
        return None
    statement = affirmative(to_text(question.instructions))
    return statement.text or "Yes.", statement.negated


def one_sided(question: Question) -> tuple[Question, bool] | None:
    """A noul with exactly one described side, its instructions made affirmative, and whether they were
    negated (its two logits are then swapped: the complement); None for any other question.

    Its sides are compared as before (the described side against ``Yes.``/``No.``): on the triage
    example this reads the time pressure of "refunded today" (0.81) where the statement readout did not (0.39).
    """
    if question.kind != "noul" or sum(_described(question)) != 1:
        return None
    statement = affirmative(to_text(question.instructions))
    return Question("noul", statement.text, question.options), statement.negated
