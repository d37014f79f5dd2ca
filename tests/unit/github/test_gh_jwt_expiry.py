"""The admin token's ``exp`` is read without PyJWT; anything unreadable gives the fallback."""

from __future__ import annotations

import base64
import json

import jwt
import pytest

from gharc.github.actions import _jwt_expiry

KEY = "k" * 32


def _segment(raw: bytes) -> str:
    return base64.urlsafe_b64encode(raw).rstrip(b"=").decode()


def test_exp_of_a_signed_token() -> None:
    token = jwt.encode({"exp": 1_900_000_000, "sub": "é" * 5}, KEY, algorithm="HS256")
    assert _jwt_expiry(token, 1.0) == 1_900_000_000.0


@pytest.mark.parametrize(
    "payload",
    [
        b'{"exp": "soon"}',  # not a number
        b'{"iat": 1}',  # no exp
        b"[1, 2]",  # not an object
        b"not json",
        b"\xff\xfe",  # not UTF-8
    ],
)
def test_unusable_payload_gives_the_fallback(payload: bytes) -> None:
    token = f"{_segment(b'{}')}.{_segment(payload)}.sig"
    assert _jwt_expiry(token, 7.0) == 7.0


@pytest.mark.parametrize("token", ["", "only.two", "a.b.c.d", "a.!!!.c", "a.\u00e9.c"])
def test_malformed_token_gives_the_fallback(token: str) -> None:
    assert _jwt_expiry(token, 7.0) == 7.0


def test_padding_is_restored() -> None:
    for n in range(1, 5):  # payload lengths that need 0..3 padding characters
        claims = {"exp": 5, "p": "x" * n}
        token = f"e30.{_segment(json.dumps(claims).encode())}.s"
        assert _jwt_expiry(token, 0.0) == 5.0
