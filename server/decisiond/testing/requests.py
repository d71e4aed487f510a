"""The triage request of the README, shared by the tests, the benchmark and the check scripts."""

from __future__ import annotations

from typing import Any

TRIAGE_STATE = "I was charged twice for one order and I need the duplicate refunded today."

#: A choice with a null description, a one-sided noul and a three-level score.
TRIAGE_QUESTIONS: dict[str, Any] = {
    "department": {
        "type": "choice",
        "instructions": "Which team should handle this ticket?",
        "criteria": {"billing": "Payments, invoicing, refunds", "technical": None, "other": "None of the above"},
    },
    "is_urgent": {
        "type": "noul",
        "instructions": "Does the ticket communicate time pressure?",
        "criteria": {"true": "Names a deadline, or says now or today"},
    },
    "frustration": {
        "type": "score",
        "instructions": "How frustrated is the customer?",
        "criteria": ["Calm", "Concerned but civil", "Very angry"],
    },
}

#: The whole request body.
TRIAGE: dict[str, Any] = {"state": TRIAGE_STATE, "questions": TRIAGE_QUESTIONS}
