"""The tickets of the replay tests, and a script that records them through ``decisiond record``.

Usage: start ``decisiond record --upstream URL --cassette cassettes/tickets.jsonl``, then run
``python record_tickets.py [PROXY_URL]`` (default ``http://127.0.0.1:8000``).
"""

from __future__ import annotations

import sys

#: ticket, the team the recorded service chose, whether it read the ticket as urgent
#: (recorded from decisiond serving minilm-l6, which reads none of them as urgent).
TICKETS: list[tuple[str, str, bool]] = [
    ("I was charged twice for my order and I need the duplicate refunded today.", "billing", False),
    ("The app crashes with an error every time I upload a photo.", "technical", False),
    ("Your invoice has the wrong company address on it, please send a corrected invoice.", "billing", False),
    ("The login page shows a server error and I cannot sign in.", "technical", False),
    ("This is unacceptable! I have been billed for a subscription I cancelled, refund me now!", "billing", False),
]


def main(url: str) -> None:
    from router import TicketRouter

    from decisiond.client import DecisionClient

    with DecisionClient(url) as client:
        router = TicketRouter(client)
        for ticket, _, _ in TICKETS:
            print(ticket, "→", router.route(ticket))  # noqa: T201
        print(client.models())  # noqa: T201  (records /v1/models too)


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "http://127.0.0.1:8000")
