"""The listener logs as the controller and the webhook server do: one set-up
(gharc.kube.logging.configure_logging), one JSON shape, one level policy. A log shipper
parsing ``log_format: json`` must not need a second schema for listener pods."""

from __future__ import annotations

import json
import logging
from collections.abc import Iterator

import pytest
from listener_fakes import config

from gharc.controllers.settings import ControllerSettings
from gharc.kube.logging import configure_logging
from gharc.webhook.settings import WebhookSettings


@pytest.fixture(autouse=True)
def _restore_logging() -> Iterator[None]:
    root, ours = logging.getLogger(), logging.getLogger("gharc")
    saved = (list(root.handlers), root.level, ours.level)
    yield
    root.handlers[:] = saved[0]
    root.setLevel(saved[1])
    ours.setLevel(saved[2])


def _json_line(capsys: pytest.CaptureFixture[str]) -> dict[str, object]:
    logging.getLogger("gharc.listener.test").info("scaled to %d", 3, extra={"runners": 3})
    logging.getLogger("httpx").info("HTTP Request: GET ...")  # third-party: below WARNING
    lines = capsys.readouterr().err.strip().splitlines()
    assert len(lines) == 1, lines
    entry: dict[str, object] = json.loads(lines[0])
    return entry


def test_the_listener_json_lines_are_the_controllers_and_the_webhook_servers(
    capsys: pytest.CaptureFixture[str],
) -> None:
    configure_logging(config(log_level="info", log_format="json"))
    listener = _json_line(capsys)
    assert listener["msg"] == "scaled to 3" and listener["runners"] == 3
    assert listener["level"] == "info" and listener["logger"] == "gharc.listener.test"
    assert str(listener["ts"]).endswith("Z")
    for settings in (ControllerSettings(), WebhookSettings()):
        settings.log_level, settings.log_format = "info", "json"
        configure_logging(settings)
        assert _json_line(capsys).keys() == listener.keys()


@pytest.mark.parametrize(("name", "logged"), [("debug", True), ("warning", False)])
def test_the_listener_level_names_apply_to_gharc_only(
    capsys: pytest.CaptureFixture[str], name: str, logged: bool
) -> None:
    configure_logging(config(log_level=name, log_format="text"))
    logging.getLogger("gharc.listener.test").debug("detail")
    logging.getLogger("httpx").debug("third-party detail")
    err = capsys.readouterr().err
    assert ("detail" in err) is logged
    assert "third-party" not in err
