"""A malformed GitHub answer never puts a secret field's value into an error message.

Validation errors end up in logs, events and status messages; pydantic's default message
repeated the input (``input_value={'messageQueueAccessToken': 'eyJhbGciOi...``), which
printed part of a queue token or of a JIT config when any other field was wrong. The models
are read by gharc.github.datamodel now; its errors must not do that either.
"""

from __future__ import annotations

from typing import Any

import pytest

from gharc.github.datamodel import DataModel, ValidationError
from gharc.github.models import (
    RegistrationToken,
    RunnerScaleSetJitRunnerConfig,
    RunnerScaleSetSession,
    _first_error,
)

TOKEN = "eyJhbGciOiJSUzI1NiJ9.SECRET-QUEUE-TOKEN-0123456789"
JIT = "ZXlKaGJHY2lPaUpTVXpJMU5pSjkuU0VDUkVULUpJVC1DT05GSUc="
REG = "AABBCCSECRETREGISTRATIONTOKEN"

CASES: list[tuple[type[DataModel], dict[str, Any], str]] = [
    # sessionId missing: the error's input is the whole object, token included.
    (
        RunnerScaleSetSession,
        {"messageQueueUrl": "https://q", "messageQueueAccessToken": TOKEN},
        TOKEN,
    ),
    # the token itself has the wrong type
    (
        RunnerScaleSetSession,
        {"sessionId": "s", "messageQueueUrl": "u", "messageQueueAccessToken": [TOKEN]},
        TOKEN,
    ),
    (RunnerScaleSetJitRunnerConfig, {"runner": "not-an-object", "encodedJITConfig": JIT}, JIT),
    (RunnerScaleSetJitRunnerConfig, {"encodedJITConfig": JIT}, JIT),
    (
        RunnerScaleSetJitRunnerConfig,
        {"runner": {"id": 1, "name": "r"}, "encodedJITConfig": {JIT: 1}},
        JIT,
    ),
    (RegistrationToken, {"token": REG, "expires_at": "tomorrow"}, REG),
    (RegistrationToken, {"token": REG}, REG),
]


@pytest.mark.parametrize(("model", "body", "secret"), CASES)
def test_validation_error_text_holds_no_secret(
    model: type[DataModel], body: dict[str, Any], secret: str
) -> None:
    with pytest.raises(ValidationError) as info:
        model.model_validate(body)
    # str() is what tracebacks, log lines and ``f"{err}"`` messages show.
    for text in (str(info.value), repr(info.value), _first_error(info.value)):
        for size in (8, len(secret)):
            assert secret[:size] not in text, text
