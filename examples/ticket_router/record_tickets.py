"""The tickets of the replay tests, and a script that records them through ``decisiond record``.

Usage: start ``decisiond record --upstream URL --cassette cassettes/tickets.jsonl``, then run
``python record_tickets.py [PROXY_URL]`` (default ``http://127.0.0.1:8000``).
"""

from __future__ import annotations

import sys

#: ticket, the team the recorded service chose, whether it read the ticket as urgent.
TICKETS: list[tuple[str, str, bool]] = []


def main(url: str) -> None:
    from router import TicketRouter

    from decisiond.client import DecisionClient

    with DecisionClient(url) as client:
        router = TicketRouter(client)
        for ticket, _, _ in TICKETS:
            print(ticket, "→", router.route(ticket))  # noqa: T201


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "http://127.0.0.1:8000")
