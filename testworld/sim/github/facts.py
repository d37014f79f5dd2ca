"""What the real GitHub does that the fake models: the contract between the two.

Every scenario measured against the fake is only as true as the fake. Each fact here is a
behaviour of the real service the fake copies; tests that check the fake honours one are
marked ``@pytest.mark.pins("<id>")``, and scenarios whose result depends on it are marked
``@pytest.mark.relies_on("<id>", ...)``. At the end of a run the suite prints, per fact,
its pinning tests' outcome and the scenarios that rely on it (``tests/conftest.py``), so a
fidelity gap found later fails a pin and names the results it puts in doubt, instead of
letting them pass silently.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Fact:
    statement: str
    source: str
    confirmed: bool = True
    """False: the fake's choice where no public source says what the service does."""


FACTS: dict[str, Fact] = {
    "capacity": Fact(
        "The service assigns a scale set's jobs only within the X-ScaleSetMaxCapacity its "
        "listener last sent; the rest stay acquired until a job ends or the capacity rises.",
        "GitHub's scale set client (actions/scaleset) and ARC's listener send it on every poll",
    ),
    "reassign": Fact(
        "An assigned job that no runner takes is taken back after minutes (JobCompleted "
        "canceled, totalAssignedJobs dips) and assigned again.",
        "ARC #4602 (attempts about 5 minutes apart), ARC #3420",
    ),
    "truncate-50": Fact(
        "A delivery carries at most 50 job messages and the rest are never delivered; the "
        "statistics count every job.",
        "actions-service-api.md; GitHub's scale set client scales from statistics",
    ),
    "app-client-id": Fact(
        "A GitHub App's JWT may name the App ID or the Client ID as its issuer.",
        "GitHub docs: generating a JWT for a GitHub App (the Client ID is recommended)",
    ),
    "last-message-id-ack": Fact(
        "A poll with lastMessageId acknowledges the earlier messages; deleting one later "
        "answers 404.",
        "no public statement: the fake's choice (GitHub's client deletes before polling)",
        confirmed=False,
    ),
    "rest-304-free": Fact(
        "A conditional REST request answered 304 does not count against the rate limit, and "
        "an unchanged listing keeps its ETag.",
        "GitHub REST docs: conditional requests",
    ),
    "webhook-no-retry": Fact(
        "A webhook delivery that fails (no answer, or not 2xx) is not sent again by GitHub "
        "on its own; a redelivery (asked for by hand or the API) keeps its X-GitHub-Delivery.",
        "GitHub docs: handling failed webhook deliveries; redelivering webhooks",
    ),
    "session-409": Fact(
        "A second message session for a scale set is refused with 409 while one exists.",
        "ARC's listener logs (RunnerScaleSetSessionConflictException)",
    ),
}
