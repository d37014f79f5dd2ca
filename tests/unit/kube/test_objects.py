"""The object readers every controller shares: one answer for "deleting", "finalizer",
"metav1.Time", "drift" and "Secret data"."""

from __future__ import annotations

import base64
import datetime as dt
import re
from pathlib import Path
from typing import Any

import pytest

from gharc.kube import objects

# Both drift call sites: the listener reconciler (listener spec, Role rules, ARS runner
# template) and the EphemeralRunnerSet reconciler (runner spec) must agree.
CALL_SITES = [objects.semantically_equal, objects.semantically_equal]


@pytest.mark.parametrize("equal", CALL_SITES)
@pytest.mark.parametrize(
    ("a", "b"),
    [
        ({}, None),  # an empty map reads back as absent (omitempty)
        ([None], [{}]),  # an emptied list item is the same item either way
        ([], None),
        ({"env": [], "resources": {}, "nodeSelector": None}, {}),
        (
            {"containers": [{"name": "runner", "env": [], "resources": {}}], "x": None},
            {"containers": [{"name": "runner"}]},
        ),
        ({"containers": [{"name": "a"}, {}]}, {"containers": [{"name": "a"}, {"env": []}]}),
    ],
)
def test_absent_and_empty_are_the_same_field(equal: Any, a: Any, b: Any) -> None:
    assert equal(a, b)
    assert equal(b, a)


@pytest.mark.parametrize("equal", CALL_SITES)
@pytest.mark.parametrize(
    ("a", "b"),
    [
        ({"replicas": 0}, {}),  # zero is a value
        ({"x": ""}, {}),  # so is the empty string
        ({"containers": [{"name": "runner", "image": "r"}]}, {"containers": [{"name": "s"}]}),
        ([{"name": "a"}, {"name": "b"}], [{"name": "b"}, {"name": "a"}]),  # order matters
        ([{}, {"name": "a"}], [{"name": "a"}]),  # so do positions
    ],
)
def test_values_and_positions_are_drift(equal: Any, a: Any, b: Any) -> None:
    assert not equal(a, b)


def test_metadata_readers() -> None:
    obj = {
        "metadata": {
            "deletionTimestamp": "2024-05-01T12:00:00Z",
            "finalizers": ["a/b"],
            "labels": {"l": "1"},
            "annotations": {"a": "2"},
        }
    }
    assert objects.is_deleting(obj) and not objects.is_deleting({"metadata": {}})
    assert objects.deleting_since(obj) == dt.datetime(2024, 5, 1, 12, tzinfo=dt.UTC)
    assert objects.deleting_since({"metadata": {}}) is None and objects.deleting_since({}) is None
    assert objects.has_finalizer(obj, "a/b") and not objects.has_finalizer({}, "a/b")
    assert objects.finalizers_with(obj, "c/d", "a/b", "c/d") == ["a/b", "c/d"]
    assert objects.finalizers_with({}, "c/d") == ["c/d"]
    assert objects.finalizers_without(obj, "a/b") == [] and objects.finalizers_without({}) == []
    assert obj["metadata"]["finalizers"] == ["a/b"]  # the object is left as it was
    labels = objects.labels_of(obj)
    labels["new"] = "x"  # a copy
    assert objects.labels_of(obj) == {"l": "1"}
    assert objects.annotations_of(obj) == {"a": "2"} and objects.annotations_of({}) == {}


def test_unset_or_null_sections_read_as_empty() -> None:
    for unset in ({}, {"metadata": None, "spec": None, "status": None}):
        assert objects.meta(unset) == objects.spec_of(unset) == objects.status_of(unset) == {}
    obj = {"metadata": {"name": "n"}, "spec": {"replicas": 2}, "status": {"phase": "Running"}}
    assert objects.meta(obj)["name"] == "n"
    assert objects.spec_of(obj)["replicas"] == 2
    assert objects.status_of(obj)["phase"] == "Running"


def test_times_round_trip_and_bad_ones_are_unset_unless_strict() -> None:
    t = objects.parse_time("2024-05-01T12:00:00Z")
    assert t == dt.datetime(2024, 5, 1, 12, tzinfo=dt.UTC)
    assert t is not None and objects.format_time(t) == "2024-05-01T12:00:00Z"
    assert objects.parse_time("2024-05-01T14:00:00+02:00") == t
    assert objects.parse_time("2024-05-01T12:00:00") == t  # no offset: UTC
    assert objects.parse_time(None) is None and objects.parse_time("") is None
    assert objects.parse_time("yesterday") is None
    with pytest.raises(ValueError, match="RFC 3339"):
        objects.parse_time("yesterday", strict=True)


def test_int_parsers_read_bad_values_as_the_default() -> None:
    assert objects.int_or("7") == 7 and objects.int_or(7) == 7
    assert objects.int_or(None) == 0 and objects.int_or("seven") == 0
    assert objects.int_or("seven", -1) == -1
    assert objects.int_or_none("7") == 7 and objects.int_or_none(None) is None
    assert objects.int_or_none("") is None and objects.int_or_none([]) is None


def test_secret_data_is_decoded_with_string_data_on_top() -> None:
    secret = {
        "data": {"a": base64.b64encode(b"x").decode(), "b": base64.b64encode(b"y").decode()},
        "stringData": {"b": "z"},
    }
    assert objects.decode_secret_data(secret) == {"a": "x", "b": "z"}
    bad = {"data": {"k": base64.b64encode(b"\xff").decode()}}
    with pytest.raises(UnicodeDecodeError):
        objects.decode_secret_data(bad)
    assert objects.decode_secret_data(bad, errors="replace") == {"k": "\ufffd"}


GHARC = Path(objects.__file__).parents[1]

#: Rules with one home, and where a copy may stand: the home, and copies with a "why" (a
#: module that may not import the home).
ONE_HOME = {
    # metav1.Time and other RFC 3339 times: gharc.kube.objects.parse_time
    r"fromisoformat\(": {
        "kube/objects.py": "the home",
        "api/schedule.py": "why: schedule times without an offset are local to a time zone",
        "github/datamodel.py": "why: gharc.github imports nothing of gharc",
    },
    # "being deleted" and since when: gharc.kube.objects.is_deleting, deleting_since
    r'get\("deletionTimestamp"\)': {
        "kube/objects.py": "the home",
        "sim/kubelet.py": "why: testworld.sim imports only gharc.api",
    },
    # the GitHub web host from an API or Enterprise URL: gharc.github.config.server_url
    r'(len|removesuffix)\("/api/v3"\)': {
        "github/config.py": "the home",
    },
    # a number read from an object, bad values as the default: gharc.kube.objects.int_or
    r"def int_or\b": {
        "kube/objects.py": "the home",
    },
    # the scale set id annotation, "not created yet" unless a positive number:
    # AutoscalingRunnerSetView.scale_set_id
    r"get\((c\.)?ANNOTATION_RUNNER_SCALE_SET_ID\b": {
        "api/scaleset/views.py": "the home",
    },
    # an EphemeralRunner's registration and job (busy): EphemeralRunnerView
    r"get\([\"'](runnerId|jobId)[\"']\)": {
        "api/scaleset/views.py": "the home",
    },
    # the runners' scale set id: EphemeralRunnerView/EphemeralRunnerSetView.scale_set_id
    r'get\("runnerScaleSetId"\)': {
        "api/scaleset/views.py": "the home",
        "controllers/scaleset/orphans.py": "why: a runner as GitHub lists it, not an object",
    },
    # an EphemeralRunnerSet's patch, revisions and cleanup marker: EphemeralRunnerSetView
    r'get\("(patchID|(appliedA|a)ctionableRevision|finishedRunnerCleanupPatchID)"\)': {
        "api/scaleset/views.py": "the home",
        "controllers/scaleset/autoscalingrunnerset.py": "why: reads back the patch it wrote",
    },
    # a legacy runner's ephemeral and docker defaults: gharc.api.legacy.views.RunnerConfigView
    r'get\("(ephemeral|dockerEnabled|dockerdWithinRunnerContainer)"\)': {
        "api/legacy/views.py": "the home",
    },
    # the processes' log set-up and line formats: gharc.kube.logging.configure_logging
    r"def configure_logging\b|\(logging\.Formatter\)": {
        "kube/logging.py": "the home",
    },
    # "0" or "" turns an address flag's server off: gharc.kube.serving.serving_address
    r'\(""\s*,\s*"0"\)|\("0"\s*,\s*""\)': {
        "kube/serving.py": "the home",
        "testing/helm.py": "why: an environment switch (GHARC_REQUIRE_HELM), not an address",
    },
    # an address's host and port, as Go's net.Listen reads it: gharc.kube.serving.host_port
    r'rpartition\(":"\)': {
        "kube/serving.py": "the home",
    },
    # an HRA's bounds (maxReplicas unset: no bound) and last decision:
    # gharc.api.legacy.views.HorizontalRunnerAutoscalerView
    r'get\("(minReplicas|maxReplicas|desiredReplicas)"\)': {
        "api/legacy/views.py": "the home",
    },
}


@pytest.mark.parametrize("pattern", sorted(ONE_HOME))
def test_a_rule_with_one_home_is_not_copied(pattern: str) -> None:
    """A second copy of a rule drifts from the first: the controller and the webhook server
    once turned the same GitHub Enterprise URL into different hosts."""
    found = {
        str(path.relative_to(GHARC))
        for path in GHARC.rglob("*.py")
        if re.search(pattern, path.read_text(encoding="utf-8"))
    }
    assert found - set(ONE_HOME[pattern]) == set(), "use the rule's home instead"
