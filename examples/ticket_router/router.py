"""A tiny application that calls a decision service: route a support ticket.

It is the kind of code whose tests should run offline: ``route`` asks three questions of the
service behind ``base_url`` (decisiond, a hosted service, or a replica) and turns the answers into
a routing decision with the application's own rules (escalate angry, urgent billing tickets).
"""

from __future__ import annotations

from dataclasses import dataclass

from decisiond.client import Choice, DecisionClient, DecisionRequest, Noul, Score

TEAM = Choice(
    "Which team should handle this ticket?",
    {"billing": "Payments, invoices, refunds", "technical": "Bugs, crashes, errors", "other": None},
)
URGENT = Noul.of("Does the customer need this solved today?")
MOOD = Score.of("How frustrated is the customer?", "Calm", "Annoyed", "Furious")


@dataclass(frozen=True)
class Route:
    """Where a ticket goes."""

    team: str
    urgent: bool
    mood: str
    escalate: bool


class TicketRouter:
    """Routes tickets through a System One decision service.

    Args:
        client (DecisionClient): a client of the service.
        model (str, optional): the model to ask. Defaults to the service's default.
    """

    def __init__(self, client: DecisionClient, model: str | None = None) -> None:
        self.client = client
        self.model = model

    def route(self, ticket: str) -> Route:
        """Ask the service about ``ticket`` and decide where it goes."""
        request = DecisionRequest(ticket, {"team": TEAM, "urgent": URGENT, "mood": MOOD})
        response = self.client.decide(self.model, request)
        team = response.choice("team")
        urgent = response.noul("urgent").probability >= 0.5
        mood = response.score("mood")
        angry = mood.level() >= 2
        team_name = team.choice if team.confidence >= 0.2 else "other"  # unsure: a human triages it
        return Route(team_name, urgent, str(mood.label()), escalate=urgent and angry)
