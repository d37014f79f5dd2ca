"""The HorizontalRunnerAutoscaler ``openAPIV3Schema`` (legacy.md 2.5).

Field names, types and enums follow ARC's CRD so that HRAs written for ARC apply
unchanged, and nothing is stricter than ARC's: HRAs from ARC's documentation omit
``minReplicas`` or ``maxReplicas``, and an HRA stored under ARC's CRD must stay writable
after the switch. The controller checks what ARC's controller checked (both replica
bounds, at most 2 metrics of the two types ARC implements, the schedule) and reports a
violation as a Warning event naming the field.
"""

from __future__ import annotations

from typing import Any

Schema = dict[str, Any]

METRIC_TYPES = ("TotalNumberOfQueuedAndInProgressWorkflowRuns", "PercentageRunnersBusy")
FREQUENCIES = ("Daily", "Weekly", "Monthly", "Yearly")
TARGET_KINDS = ("RunnerDeployment", "RunnerSet")


def _string(description: str = "", **extra: Any) -> Schema:
    out: Schema = {"type": "string", **extra}
    if description:
        out["description"] = description
    return out


def _int(description: str = "", **extra: Any) -> Schema:
    out: Schema = {"type": "integer", **extra}
    if description:
        out["description"] = description
    return out


def _time(description: str = "", *, nullable: bool = False) -> Schema:
    out = _string(description, format="date-time")
    if nullable:
        out["nullable"] = True
    return out


def _strings(description: str = "") -> Schema:
    out: Schema = {"type": "array", "items": {"type": "string"}}
    if description:
        out["description"] = description
    return out


def _object(
    props: dict[str, Schema], description: str = "", required: list[str] | None = None
) -> Schema:
    # An empty ``properties`` is left out: the API server drops it, and Helm's server-side
    # apply of the CRD then conflicts with the object it reads back.
    out: Schema = {"type": "object"}
    if props:
        out["properties"] = dict(sorted(props.items()))
    if description:
        out["description"] = description
    if required:
        out["required"] = sorted(required)
    return out


def _array(items: Schema, description: str = "", **extra: Any) -> Schema:
    out: Schema = {"type": "array", "items": items, **extra}
    if description:
        out["description"] = description
    return out


def _metric() -> Schema:
    return _object(
        {
            "type": _string("Which metric to scale on: " + " or ".join(METRIC_TYPES) + "."),
            "repositoryNames": _strings(
                "Repositories (the REPO part of OWNER/REPO) whose queued and in-progress "
                "workflow runs count, for an organization-scoped target."
            ),
            "scaleUpThreshold": _string(
                "Busy fraction (a decimal string, default 0.8) at or above which to scale up."
            ),
            "scaleDownThreshold": _string(
                "Busy fraction (a decimal string, default 0.3) below which to scale down."
            ),
            "scaleUpFactor": _string("Multiplier on scale up (decimal string, default 1.3)."),
            "scaleDownFactor": _string("Multiplier on scale down (decimal string, default 0.7)."),
            "scaleUpAdjustment": _int("Runners to add on scale up, instead of the factor."),
            "scaleDownAdjustment": _int("Runners to remove on scale down, instead of the factor."),
        }
    )


def _scale_up_trigger() -> Schema:
    github_event = _object(
        {
            "workflowJob": _object({}, "Scale on workflow_job webhook events."),
            "checkRun": _object(
                {
                    "types": _strings(),
                    "status": _string(),
                    "names": _strings(),
                    "repositories": _strings(),
                },
                "check_run trigger: accepted for compatibility, ignored since ARC v0.27.0.",
            ),
            "pullRequest": _object(
                {"types": _strings(), "branches": _strings()},
                "pull_request trigger: accepted for compatibility, ignored since ARC v0.27.0.",
            ),
            "push": _object({}, "push trigger: accepted for compatibility, ignored."),
        }
    )
    return _object(
        {
            "githubEvent": github_event,
            "amount": _int("Ignored for workflowJob (each job reserves one runner)."),
            "duration": _string(
                "How long a reservation made by this trigger lasts (Go duration such as "
                '"30m"; default 10m).'
            ),
        }
    )


def _capacity_reservation() -> Schema:
    return _object(
        {
            "name": _string(
                "What the reservation is for: gharc's webhook server writes job-<id> of the "
                "workflow job, so that a redelivery or the queued-job poll does not reserve "
                "twice and the job's completion releases its own reservation."
            ),
            "effectiveTime": _time(),
            "expirationTime": _time(),
            "replicas": _int(),
        },
        "Runners reserved by the webhook server until expirationTime.",
    )


def _scheduled_override() -> Schema:
    return _object(
        {
            "startTime": _time(),
            "endTime": _time(),
            "minReplicas": _int(
                "minReplicas while the override is active; omitted means unchanged.",
                minimum=0,
                nullable=True,
            ),
            "recurrenceRule": _object(
                {
                    "frequency": _string(
                        "Repeat Daily, Weekly, Monthly or Yearly; omitted means once.",
                        enum=list(FREQUENCIES),
                    ),
                    "untilTime": _time("Last time an occurrence may start; omitted: forever."),
                }
            ),
        },
        "Overrides minReplicas during [startTime, endTime), optionally recurring.",
        required=["startTime", "endTime"],
    )


def _spec() -> Schema:
    return _object(
        {
            "scaleTargetRef": _object(
                {
                    "kind": _string(
                        "RunnerDeployment (the default) or RunnerSet.", enum=list(TARGET_KINDS)
                    ),
                    "name": _string("Name of the target in the HRA's namespace."),
                },
                "The RunnerDeployment or RunnerSet whose replicas this HRA sets.",
            ),
            "minReplicas": _int("Lowest replica count; negative means 1."),
            "maxReplicas": _int("Highest replica count."),
            "scaleDownDelaySecondsAfterScaleOut": _int(
                "Seconds after the last scale out during which the HRA does not scale down "
                "(default: the controller's --default-scale-down-delay, 10 minutes)."
            ),
            "metrics": _array(_metric(), "Pull metrics (at most 2)."),
            "scaleUpTriggers": _array(_scale_up_trigger(), "Webhook-driven scaling."),
            "capacityReservations": _array(_capacity_reservation()),
            "scheduledOverrides": _array(_scheduled_override()),
            "githubAPICredentialsFrom": _object(
                {"secretRef": _object({"name": _string()}, required=["name"])},
                "A Secret in the HRA's namespace with GitHub credentials for this HRA.",
            ),
        },
    )


def _status() -> Schema:
    return _object(
        {
            "observedGeneration": _int(format="int64"),
            "desiredReplicas": _int("The replica count last written to the target."),
            "lastSuccessfulScaleOutTime": _time(nullable=True),
            "cacheEntries": _array(
                _object({"key": _string(), "value": _int(), "expirationTime": _time()}),
                "Written by ARC <= v0.21 only; kept so old objects stay valid.",
            ),
            "scheduledOverridesSummary": _string(
                'The next change a scheduled override brings, as "min=N time=T".'
            ),
        }
    )


def horizontal_runner_autoscaler_schema() -> Schema:
    """The HRA ``openAPIV3Schema`` (legacy.md 2.5)."""
    return _object(
        {
            "apiVersion": _string(),
            "kind": _string(),
            "metadata": {"type": "object"},
            "spec": _spec(),
            "status": _status(),
        }
    )
