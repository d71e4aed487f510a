"""The router's rules, tested against scripted answers: exact numbers, no model, no network."""

from __future__ import annotations

import pytest
from router import TicketRouter

from decisiond.client import DecisionAPIError

pytestmark = pytest.mark.decisiond(scripted="../rules.toml")


def test_an_angry_urgent_billing_ticket_is_escalated(decisiond) -> None:
    route = TicketRouter(decisiond.client).route("I was charged twice and I need the refund today!")
    assert (route.team, route.urgent, route.mood, route.escalate) == ("billing", True, "Furious", True)


def test_a_calm_bug_report_is_not_escalated(decisiond) -> None:
    route = TicketRouter(decisiond.client).route("The app shows an error when I upload a photo.")
    assert (route.team, route.urgent, route.mood, route.escalate) == ("technical", False, "Calm", False)


def test_an_unsure_team_goes_to_a_human(decisiond) -> None:
    route = TicketRouter(decisiond.client).route("Hello, I have a question about my account.")
    assert route.team == "other"


def test_a_question_the_rules_do_not_cover_is_refused(decisiond) -> None:
    from decisiond.client import DecisionRequest, Noul

    with pytest.raises(DecisionAPIError) as caught:
        decisiond.client.decide(None, DecisionRequest("hi", {"spam": Noul.of("Is this spam?")}))
    assert caught.value.status == 404
