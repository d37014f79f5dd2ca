"""Naming rules of spec section 4; golden values computed with Go (hash/fnv + apimachinery rand)."""

from __future__ import annotations

import pytest

from gharc.api.scaleset import constants as c


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("", "65bb57b6b5"),
        ("default", "68c4584df8"),
        ("arc-runners", "754b578df7"),
        ("arc-runners@@https://github.com/my-org", "56b4bcfc6b"),
        ("test-ns@testgroup@https://github.com/owner/repo", "c7fb7467b"),
        ("arc-runners@default@https://github.com/enterprises/acme", "bdfcfdb6c"),
    ],
)
def test_fnv_hash_string_matches_go(text: str, expected: str) -> None:
    assert c.fnv_hash_string(text) == expected


def test_fnv1a_32_reference_vectors() -> None:
    # Published FNV-1a 32 test vectors.
    assert c.fnv1a_32(b"") == 0x811C9DC5
    assert c.fnv1a_32(b"a") == 0xE40C292C
    assert c.fnv1a_32(b"foobar") == 0xBF9CF968


def test_safe_encode_maps_digits_like_apimachinery() -> None:
    assert c.safe_encode_string("0123456789") == "456789bcdf"


def test_listener_name_uses_namespace_group_and_url() -> None:
    name = c.listener_name("arc-runners", "arc-runners", "", "https://github.com/my-org")
    assert name == "arc-runners-56b4bcfc-listener"
    ent = c.listener_name(
        "arc-runners", "arc-runners", "default", "https://github.com/enterprises/acme"
    )
    assert ent == "arc-runners-bdfcfdb6-listener"


def test_listener_name_changes_with_group_and_url() -> None:
    base = c.listener_name("s", "ns", "", "https://github.com/o")
    assert base != c.listener_name("s", "ns", "g", "https://github.com/o")
    assert base != c.listener_name("s", "ns", "", "https://github.com/o2")
    assert base != c.listener_name("s", "ns2", "", "https://github.com/o")


def test_listener_name_for_object() -> None:
    ars = {
        "metadata": {"name": "test-ars", "namespace": "test-ns"},
        "spec": {"runnerGroup": "testgroup", "githubConfigUrl": "https://github.com/owner/repo"},
    }
    assert c.listener_name_for(ars) == "test-ars-c7fb7467-listener"
    assert c.listener_name_for({"metadata": {"name": "a", "namespace": "b"}}) == c.listener_name(
        "a", "b", "", ""
    )


def test_listener_owned_object_names() -> None:
    n = "x-abcdefgh-listener"
    assert c.listener_service_account_name(n) == n
    assert c.listener_role_name(n) == n
    assert c.listener_role_binding_name(n) == n
    assert c.listener_pod_name(n) == n
    assert c.listener_config_secret_name(n) == f"{n}-config"
    assert c.listener_proxy_secret_name(n) == f"{n}-proxy"


def test_ephemeral_runner_set_names() -> None:
    assert c.ephemeral_runner_set_name("arc") == "arc"
    assert c.ephemeral_runner_generate_name("arc") == "arc-runner-"
    assert c.ephemeral_runner_set_proxy_secret_name("arc", "default") == "arc-68c4584d-runner-proxy"
    assert c.runner_pod_name("arc-runner-abcde") == "arc-runner-abcde"
    assert c.runner_jit_secret_name("arc-runner-abcde") == "arc-runner-abcde"


def test_max_ars_name_keeps_listener_name_a_valid_label_value() -> None:
    name = c.listener_name("a" * c.MAX_AUTOSCALING_RUNNER_SET_NAME_LENGTH, "ns", "", "u")
    assert len(name) == c.LABEL_VALUE_MAX_LENGTH


def test_trim_label_value() -> None:
    long = "o" * 64
    trimmed = c.trim_label_value(long)
    assert trimmed == "o" * 58 + "-trim"
    assert len(trimmed) == 63
    assert c.trim_label_value("o" * 63) == "o" * 63
    assert c.trim_label_value("-_.org.-_") == "org"
    assert c.trim_label_value("") == ""


def test_github_url_labels() -> None:
    assert c.github_url_labels(organization="owner", repository="repo") == {
        "actions.github.com/organization": "owner",
        "actions.github.com/repository": "repo",
    }
    assert c.github_url_labels(enterprise="e" * 70) == {
        "actions.github.com/enterprise": "e" * 58 + "-trim"
    }
    assert c.github_url_labels() == {}


def test_listener_role_rules() -> None:
    rules = c.listener_role_rules(["arc"])
    assert rules[0] == {
        "apiGroups": ["actions.github.com"],
        "resources": ["ephemeralrunnersets"],
        "resourceNames": ["arc"],
        "verbs": ["get", "list", "watch", "patch"],
    }
    assert rules[1]["verbs"] == ["patch"]
    assert rules[1]["resources"] == ["ephemeralrunners", "ephemeralrunners/status"]
    assert "resourceNames" not in rules[1]


def test_exact_strings() -> None:
    # A few that other components match on byte for byte.
    assert c.FINALIZER_EPHEMERAL_RUNNER_REGISTRATION == (
        "ephemeralrunner.actions.github.com/runner-registration-finalizer"
    )
    assert c.ANNOTATION_RUNNER_SCALE_SET_ID == "runner-scale-set-id"
    assert c.LABEL_VALUE_PART_OF == "gha-runner-scale-set"
    assert c.COMPONENT_LISTENER == "runner-scale-set-listener"
    assert c.API_VERSION == "actions.github.com/v1alpha1"
    assert c.MAX_RUNNERS_UNLIMITED == 2147483647
