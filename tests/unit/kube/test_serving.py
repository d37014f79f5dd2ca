"""Address flags: one reading of "off" and of ``[host]:port`` for every gharc server, so the
listener serves metrics on the port its pod declares and the controller binds as ARC does."""

from __future__ import annotations

import pytest

from gharc.kube.serving import host_port, serving_address


@pytest.mark.parametrize(("addr", "served"), [("0", None), (" ", None), (":8080", ":8080")])
def test_zero_or_empty_turns_a_server_off(addr: str, served: str | None) -> None:
    assert serving_address(addr) == served


@pytest.mark.parametrize(
    ("addr", "parts"),
    [
        (":8080", ("0.0.0.0", 8080)),
        ("127.0.0.1:9", ("127.0.0.1", 9)),
        ("[::1]:9", ("::1", 9)),
        ("8080", ("0.0.0.0", 8080)),
        ("127.0.0.1:", ("127.0.0.1", 0)),
    ],
)
def test_host_port_reads_addresses_as_go_listen(addr: str, parts: tuple[str, int]) -> None:
    assert host_port(addr) == parts


@pytest.mark.parametrize("addr", ["localhost:http", ":65536", ":-1"])
def test_host_port_refuses_a_port_that_is_not_one(addr: str) -> None:
    with pytest.raises(ValueError, match="port"):
        host_port(addr)
