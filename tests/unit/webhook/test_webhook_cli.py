"""``gharc webhook-server`` flags: ARC's names and defaults, the env secret, aliases."""

from __future__ import annotations

import pytest

from gharc.settings.declare import UsageError
from gharc.webhook.main import parse_args, server_url
from testworld.sim.github import FakeGitHubState
from testworld.sim.github.webhooks import workflow_job_payload

ENV = {"GITHUB_WEBHOOK_SECRET_TOKEN": "s"}


def test_defaults_are_arcs_and_the_secret_falls_back_to_the_environment() -> None:
    args = parse_args([], {"GITHUB_WEBHOOK_SECRET_TOKEN": "from-env"})
    assert (args.webhook_addr, args.queue_limit) == (":8000", 100)
    assert args.log_level == "debug" and args.batch_window == 3.0
    assert args.secret == "from-env"
    assert parse_args(["--github-webhook-secret-token", "flag"], {}).secret == "flag"
    assert parse_args(["--webhook-secret", "alias"], {}).secret == "alias"
    assert (args.read_timeout, args.max_concurrent_reads, args.ack_timeout) == (10.0, 4, 8.0)
    assert args.max_body_bytes == 25 * 1024 * 1024 and args.queued_job_poll_interval == 20.0


def test_metrics_are_off_unless_an_address_is_given() -> None:
    """Issue 20 §4: a metrics port listening on every interface by default is not what
    ARC's chart does; the operator opts in with an address."""
    assert parse_args([], ENV).metrics_addr == "0"
    assert parse_args(["--metrics-addr", ":8080"], ENV).metrics_addr == ":8080"


def test_no_secret_refuses_to_start_unless_insecure_is_explicit() -> None:
    """Issue 20: with no secret the server accepted unsigned deliveries after a warning."""
    with pytest.raises(UsageError, match="no webhook secret"):
        parse_args([], {})
    args = parse_args(["--insecure-allow-unsigned-deliveries"], {})
    assert args.secret == "" and args.insecure_allow_unsigned


def test_port_and_addr_aliases_pick_the_listen_address() -> None:
    assert parse_args(["--port", "9000"], ENV).webhook_addr == "0.0.0.0:9000"
    assert parse_args(["--addr", "127.0.0.1:1234"], ENV).webhook_addr == "127.0.0.1:1234"


def test_bad_values_are_usage_errors() -> None:
    with pytest.raises(UsageError):
        parse_args(["--log-level", "loud"], ENV)
    with pytest.raises(UsageError):
        parse_args(["--queue-limit", "0"], ENV)
    for flag in ("--read-timeout", "--max-body-bytes", "--max-concurrent-reads", "--ack-timeout"):
        with pytest.raises(UsageError, match=flag):
            parse_args([flag, "0"], ENV)
    with pytest.raises(UsageError):
        parse_args(["--queued-job-poll-interval", "-1"], ENV)


def test_the_server_url_comes_from_the_api_url() -> None:
    assert server_url(parse_args([], ENV)) == "https://github.com"
    assert server_url(parse_args(["--github-url", "https://ghe.example/api/v3/"], ENV)) == (
        "https://ghe.example"
    )


def test_the_fake_sends_the_fields_arc_reads() -> None:
    state = FakeGitHubState()
    state.create_org("acme", "big-corp")
    job = state.enqueue_job("acme/app", ["self-hosted", "linux"])
    p = workflow_job_payload(state, job, "queued")
    assert p["action"] == "queued"
    assert p["workflow_job"]["labels"] == ["self-hosted", "linux"]
    assert p["repository"]["name"] == "app"
    assert p["repository"]["owner"] == {"login": "acme", "type": "Organization"}
    assert p["enterprise"]["slug"] == "big-corp"
    state.cancel_job(job.request_id)
    done = workflow_job_payload(state, job, "completed")
    assert done["workflow_job"]["conclusion"] == "cancelled"
    assert done["workflow_job"]["runner_id"] is None
