"""The router against answers recorded from a real service (cassettes/tickets.jsonl), replayed
byte for byte: the same code path as production, no model, no network, no key.

Re-record with ``decisiond record --upstream URL --cassette cassettes/tickets.jsonl`` and
``DECISIOND_URL=http://127.0.0.1:8000 python record_tickets.py``.
"""

from __future__ import annotations

import pytest
from record_tickets import TICKETS
from router import TicketRouter

from decisiond.client import DecisionAPIError

pytestmark = pytest.mark.decisiond(replay="../cassettes/tickets.jsonl")


@pytest.mark.parametrize(("ticket", "team"), [(t, team) for t, team, _ in TICKETS])
def test_recorded_tickets_are_routed_to_their_team(decisiond, ticket: str, team: str) -> None:
    assert TicketRouter(decisiond.client).route(ticket).team == team


@pytest.mark.parametrize(("ticket", "urgent"), [(t, urgent) for t, _, urgent in TICKETS])
def test_recorded_tickets_urgency(decisiond, ticket: str, urgent: bool) -> None:
    assert TicketRouter(decisiond.client).route(ticket).urgent is urgent


def test_an_unrecorded_ticket_fails_loudly(decisiond) -> None:
    with pytest.raises(DecisionAPIError) as caught:
        TicketRouter(decisiond.client).route("A ticket nobody recorded.")
    assert caught.value.status == 404 and "tickets.jsonl" in caught.value.message
