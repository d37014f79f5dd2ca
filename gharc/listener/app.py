"""The listener's main loop and process wiring.

:class:`Listener` is the loop, over injected seams (an Actions API, a Kubernetes patcher, a
sleep that a stop interrupts) so unit tests drive it with fakes and ``looptime``.
:func:`run` builds the real pieces from a :class:`ListenerConfig`, installs the signal
handlers and turns the outcome into an exit code:

* 0: stopped by SIGTERM/SIGINT; polling stopped and the session was deleted, so the next
  listener gets the session at once instead of waiting out a 409;
* 1: a deterministic failure (bad credentials, scale set gone, rate limit far away, session
  held by someone else), printed as one line. The AutoscalingListener controller's restart
  backoff (behaviours.md B1) paces the retry, not this process. The session is left open
  and recorded on the EphemeralRunnerSet: the next listener resumes it (see ``session``);
* 2: the config is invalid (see ``__main__``).
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import random
import signal
import socket
import sys
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from datetime import UTC, datetime
from typing import Any, TypeVar

from gharc.github import errors as gherrors
from gharc.listener.capacity import CapacityPolicy
from gharc.listener.config import ConfigError, ListenerConfig
from gharc.listener.handler import MessageHandler
from gharc.listener.metrics import ListenerMetrics, MetricsServer
from gharc.listener.runnerset_writes import RunnerSetPatcher, StaleStatistics
from gharc.listener.scaler import Scaler
from gharc.listener.session import (
    ActionsAPI,
    FatalError,
    SessionClient,
    Stopped,
    describe_fatal,
    is_fatal,
    is_transient,
    jittered,
)

__all__ = ["EXIT_CONFIG", "EXIT_FATAL", "EXIT_OK", "Listener", "run"]

log = logging.getLogger("gharc.listener")

EXIT_OK = 0
EXIT_FATAL = 1
EXIT_CONFIG = 2

T = TypeVar("T")

STALE_PATCH_ATTEMPTS = 3
"""Patches of one count tried against a moving cleanup marker; the last is unconditional."""


class Listener:
    """Long-polls one scale set's queue and keeps its EphemeralRunnerSet at the desired count."""

    def __init__(
        self,
        cfg: ListenerConfig,
        api: ActionsAPI,
        patcher: RunnerSetPatcher,
        *,
        metrics: ListenerMetrics | None = None,
        owner: str | None = None,
        rng: random.Random | None = None,
        step_attempts: int = 5,
        on_session: Callable[[str], None] | None = None,
    ) -> None:
        self.cfg = cfg
        self.api = api
        self.patcher = patcher
        self.metrics = metrics
        self.rng = rng or random.Random()
        self.stop_event = asyncio.Event()
        self._polling: asyncio.Future[Any] | None = None
        """The long poll in flight: a stop cancels it."""
        self.step_attempts = step_attempts
        self.scaler = Scaler(cfg.min_runners, cfg.max_runners)
        self.capacity = CapacityPolicy(
            cfg.min_runners,
            cfg.scheduled_overrides,
            burst_runners=cfg.burst_runners,
            burst_decay_seconds=cfg.burst_decay_seconds,
        )
        self.wall_clock: Callable[[], datetime] = lambda: datetime.now(UTC)
        self.sessions = SessionClient(
            api,
            cfg.runner_scale_set_id,
            owner or _hostname(),
            config_url=cfg.configure_url,
            sleep=self.sleep,
            rng=self.rng,
            record=patcher if hasattr(patcher, "recorded_session") else None,  # type: ignore[arg-type]
        )
        self.on_session = on_session
        self.on_message: Callable[[], None] | None = None
        """Called after each handled message (the in-process host reports activity)."""
        self.keep_session_on_stop = False
        """A stop leaves the session open and recorded (a restart that resumes it)."""
        self.last_message_at: float | None = None
        """Loop time of the last message handled (the in-process host reports it)."""
        self.handler = MessageHandler(
            self.sessions, patcher, self.scaler, metrics=metrics, retry=self._retry
        )
        self.last_message_id = 0
        self._publish_lock = asyncio.Lock()
        self.cleanups_answered = 0
        self.stale_patches = 0
        """Counts whose statistics predate the set's last cleanup (B3), so read again: refused
        by the API server, or known stale before sending."""
        self._marker_seen: int | None = None
        """The newest cleanup marker of the set seen (``None``: none, or not followed)."""
        self.polls = 0
        self.messages = 0
        self.session_deleted = False

    # -- control -------------------------------------------------------------------------------

    def request_stop(self) -> None:
        """Signal-safe: stop polling at the next opportunity (an in-flight poll is cancelled)."""
        if not self.stop_event.is_set():
            log.info("stop requested")
        self.stop_event.set()
        if self._polling is not None:
            self._polling.cancel()

    @property
    def stopping(self) -> bool:
        return self.stop_event.is_set()

    async def sleep(self, seconds: float) -> bool:
        """Sleep unless stopped; True when a stop was requested (now or during the wait)."""
        if self.stopping:
            return True
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self.stop_event.wait(), timeout=max(0.0, seconds))
        return self.stopping

    async def _retry(self, what: str, op: Callable[[], Awaitable[T]]) -> T:
        """Retry transient failures of one step a few times; others propagate at once."""
        attempt = 0
        while True:
            attempt += 1
            try:
                return await op()
            except Exception as err:
                if not is_transient(err) or attempt >= self.step_attempts:
                    raise
                wait = jittered(attempt, self.cfg.transient_max_backoff_seconds, self.rng)
                log.warning("%s failed (%s); retry %d in %.1fs", what, err, attempt, wait)
                if await self.sleep(wait):
                    raise Stopped from None

    # -- the loop --------------------------------------------------------------------------------

    async def run(self) -> None:
        """Open the session, publish the first count, then poll until stopped.

        Raises :class:`FatalError` for a deterministic failure; returns after a stop.
        """
        cfg = self.cfg
        if self.metrics is not None:
            self.metrics.record_static(cfg.min_runners, cfg.max_runners)
        try:
            session = await self.sessions.open(
                conflict_attempts=cfg.session_conflict_attempts,
                conflict_initial_backoff=cfg.session_conflict_initial_backoff_seconds,
                conflict_max_backoff=cfg.session_conflict_max_backoff_seconds,
                transient_max_backoff=cfg.transient_max_backoff_seconds,
            )
        except Stopped:
            return
        if self.on_session is not None:
            self.on_session(session.session_id)
        answering: asyncio.Task[None] | None = None
        following: asyncio.Task[None] | None = None
        try:
            if session.statistics is None:
                # A resumed session may come back without statistics: read them fresh.
                rss = await self._retry(
                    "read statistics",
                    lambda: self.api.get_runner_scale_set_by_id(cfg.runner_scale_set_id),
                )
                if rss is not None:
                    self.handler.record_statistics(rss.statistics)
            self.handler.record_statistics(session.statistics)
            await self._continue_patch_sequence()
            await self.publish()
            markers = getattr(self.patcher, "cleanup_markers", None)
            if markers is not None:
                answering = asyncio.create_task(self._answer_cleanups(markers()))
            if self.capacity.active:
                following = asyncio.create_task(self._follow_capacity())
            await self._poll_loop()
        except Stopped:
            pass
        except FatalError:
            raise
        except Exception as err:
            if is_transient(err):  # pragma: no cover - every transient path is caught below
                raise
            raise FatalError(
                describe_fatal(err, cfg.runner_scale_set_id, cfg.configure_url)
            ) from None
        finally:
            for task in (answering, following):
                if task is not None:
                    task.cancel()
                    await asyncio.gather(task, return_exceptions=True)
            if self.stopping and not self.keep_session_on_stop:
                self.session_deleted = await self._close_session()
            # Otherwise the session stays open and recorded: the successor resumes it.

    async def _continue_patch_sequence(self) -> None:
        """Carry on from the EphemeralRunnerSet's current patch ID instead of from 0.

        ARC's listener starts every life at ID 0, which the controller never suppresses
        (B3): if a job finished while no listener ran, the first patch of the new one is
        compared against a runner count from before the finish, and a runner is created
        for the finished job (seen as 243 runners for 240 jobs across a leader kill). A
        fresh non-zero ID keeps the cleanup marker meaningful across listener lives.
        """
        read = getattr(self.patcher, "current_patch_id", None)
        if read is None:
            return
        try:
            current = await read()
        except Exception as err:  # the sequence from 0 still works, as ARC's does
            log.info("could not read the current patch ID (%s); starting from 0", err)
            return
        self.scaler.continue_from(current)

    async def _answer_cleanups(self, markers: AsyncIterator[int]) -> None:
        """Answer the set's finished-runner cleanup marker with a fresh count (B3).

        After cleaning up finished runners for patch N, the EphemeralRunnerSet suppresses
        scale up until it sees a patch other than N: the gap the cleanup opened may be a job
        that already finished. Without an answer the set waits for the next message, which
        after a burst of completions can be a whole long poll (50 s) away while jobs queue.
        The count must not be the one N was built from (the completion may not have reached
        this listener yet), so the statistics are read fresh from the service first: a
        runner reports its job complete before its pod exits, so they include it.

        A marker for a patch of 0 replicas is not answered: the suppression only holds back
        creating runners, and at 0 there is nothing to create. That is how a quiet set's
        job ends (the completion's patch, then its cleanup), and the answer cost it a
        statistics read from the service and one more patch and reconcile of the set.
        """
        try:
            async for marker in markers:
                self._marker_seen = marker
                last = self.scaler.last_published
                if marker <= 0 or last is None or marker != last.patch_id or last.replicas == 0:
                    continue
                try:
                    rss = await self._retry(
                        "refresh statistics",
                        lambda: self.api.get_runner_scale_set_by_id(self.cfg.runner_scale_set_id),
                    )
                except Stopped:
                    return
                except Exception as err:
                    log.warning("cleanup marker %d not answered: %s", marker, err)
                    continue
                if rss is not None and rss.statistics is not None:
                    self.handler.record_statistics(rss.statistics, marker)
                self.scaler.mark_dirty()
                if await self.publish():
                    self.cleanups_answered += 1
        except Stopped:
            return

    async def _poll_loop(self) -> None:
        failures = 0
        while not self.stopping:
            marker = self._marker_seen  # known before the service counts this answer's jobs
            try:
                msg = await self._poll()
            except Stopped:
                return
            except FatalError:
                raise
            except Exception as err:
                if not is_transient(err):
                    raise
                failures += 1
                wait = jittered(failures, self.cfg.transient_max_backoff_seconds, self.rng)
                log.warning("getting a message failed (%s); retrying in %.1fs", err, wait)
                if await self.sleep(wait):
                    return
                continue
            failures = 0
            self.polls += 1
            if msg is None:
                # Nothing new: re-evaluate anyway, so a shortfall (a failed runner, a lost
                # patch) is re-requested every cycle, not only when a job arrives.
                if self.handler.statistics_unconfirmed:
                    await self._refresh_statistics("the queue went quiet")
                await self.publish()
                continue
            try:
                result = await self.handler.handle(msg, marker)
            except (Stopped, FatalError):
                raise
            except Exception as err:
                if is_fatal(err):
                    raise
                if not is_transient(err):
                    # Retrying cannot help (a bug, an answer about this message alone):
                    # redelivering it would stall every message queued behind it.
                    await self._drop(msg.message_id, err)
                    await self.publish()  # its statistics were recorded before the failure
                    continue
                # Not acknowledged: the service redelivers it; every step is idempotent.
                failures += 1
                wait = jittered(failures, self.cfg.transient_max_backoff_seconds, self.rng)
                log.warning(
                    "message %d not handled (%s); retrying in %.1fs", msg.message_id, err, wait
                )
                if await self.sleep(wait):
                    return
                continue
            # NB: the delete goes beside the patch, not before it: the patch is what the job
            # waits for, and a message handled twice is handled the same (each step is
            # idempotent), so the order costs nothing if either fails.
            ack = None if result.acknowledged else asyncio.ensure_future(self._ack(msg.message_id))
            try:
                if result.statistics_behind:
                    await self._refresh_statistics(
                        f"message {msg.message_id} is ahead of its counts"
                    )
                    # The publish below sends only what changed: a count the read confirmed
                    # is still re-requested with a fresh ID.
                    self.scaler.mark_dirty()
                if result.available or result.assigned:
                    self.capacity.note_demand(asyncio.get_running_loop().time())
                await self.publish(changed_only=True)
            finally:
                ack_error = None if ack is None else await ack
            if ack_error is not None:
                if not is_transient(ack_error):
                    await self._drop(msg.message_id, ack_error)
                    continue
                # Not acknowledged: the service redelivers it.
                failures += 1
                wait = jittered(failures, self.cfg.transient_max_backoff_seconds, self.rng)
                log.warning(
                    "message %d not deleted (%s); retrying in %.1fs",
                    msg.message_id,
                    ack_error,
                    wait,
                )
                if await self.sleep(wait):
                    return
                continue
            self.messages += 1
            self.last_message_id = msg.message_id
            self.last_message_at = asyncio.get_running_loop().time()
            if self.on_message is not None:
                self.on_message()
            log.debug("message %d: %s", msg.message_id, result)

    async def _refresh_statistics(self, why: str) -> None:
        """Read the statistics fresh: a message's can lag the jobs in its body (ARC #3420).

        Without this, the last batch of a burst can leave the count short of its assigned
        jobs for good: no message follows to correct it, and a 202 carries no statistics.
        One call, only after job activity; a failure keeps the counts already known. A
        count the read changes is published with a fresh ID by the plan itself; on a quiet
        queue one it confirms at the minimum is the idle patch, sent at once (a fresh ID
        there would ask the set for nothing and hold its scale-down for another poll).
        """
        log.info("reading statistics fresh: %s", why)
        read = await self._read_statistics(self._marker_seen, "keeping the last known ones")
        if read is None:
            return
        if read:
            self.handler.statistics_unconfirmed = False

    async def _read_statistics(self, marker: int | None, if_unread: str) -> bool | None:
        """Read the statistics from the service and keep them with ``marker``, the cleanup
        marker known before the read (B3). True when kept; False when the answer had none;
        None when the read failed (logged with ``if_unread``, what happens instead)."""
        try:
            rss = await self._retry(
                "refresh statistics",
                lambda: self.api.get_runner_scale_set_by_id(self.cfg.runner_scale_set_id),
            )
        except Stopped:
            raise
        except Exception as err:
            if is_fatal(err):
                raise
            log.warning("statistics not refreshed (%s); %s", err, if_unread)
            return None
        if rss is None or rss.statistics is None:
            return False
        self.handler.record_statistics(rss.statistics, marker)
        return True

    async def _ack(self, message_id: int) -> Exception | None:
        """Delete a handled message; the error when that failed for another reason than a
        stop, a fatal error (both raised) or the message being gone already (done)."""
        try:
            await self.handler.delete(message_id)
        except (Stopped, FatalError):
            raise
        except Exception as err:
            if is_fatal(err):
                raise
            return err
        return None

    async def _drop(self, message_id: int, err: Exception) -> None:
        """Log, count and delete a message that cannot be handled; polling goes on."""
        log.error(
            "message %d cannot be handled, dropped: %s: %s",
            message_id,
            type(err).__name__,
            err,
            exc_info=not isinstance(err, gherrors.GitHubError),
        )
        self.handler.count_dropped("error")
        self.last_message_id = max(self.last_message_id, message_id)
        try:
            await self.handler.delete(message_id)
        except (Stopped, FatalError):
            raise
        except Exception as delete_err:
            # Not deleted: the service may redeliver it, and it is dropped again then.
            log.warning("dropped message %d not deleted: %s", message_id, delete_err)

    async def _poll(self) -> Any:
        """One long poll, abandoned as soon as a stop is requested (:meth:`request_stop`
        cancels it). Not a race of the poll against the stop event: that cost two more
        tasks and a wait per poll, and a thousand listeners poll 20 times a second."""
        if self.stopping:
            raise Stopped
        poll = self._polling = asyncio.ensure_future(
            self.sessions.get_message(self.last_message_id, self.cfg.max_runners)
        )
        try:
            return await poll
        except asyncio.CancelledError:
            task = asyncio.current_task()
            if self.stopping and poll.cancelled() and (task is None or not task.cancelling()):
                raise Stopped from None
            raise
        finally:
            self._polling = None

    async def publish(self, *, changed_only: bool = False) -> bool:
        """Patch the EphemeralRunnerSet when the plan says so; True if a patch landed.

        ``changed_only`` (after a message): only when the target changed or a job
        completed (:meth:`Scaler.plan`). A patch that keeps failing is left for the next
        cycle: the plan (and the dirty flag) is only committed after the API server
        accepted it.
        """
        async with self._publish_lock:
            return await self._publish(changed_only)

    def _capacity_now(self) -> tuple[int, int]:
        """(minimum, extra runners) of the capacity policy at this moment."""
        mono = asyncio.get_running_loop().time()
        return self.capacity.min_runners(self.wall_clock()), self.capacity.extra(mono)

    async def _follow_capacity(self) -> None:
        """Publish when a scheduled window opens or closes, or the burst buffer decays.

        Without this the change would wait for the next message or long-poll timeout (50 s
        on GitHub). Only a changed target is published: the poll loop handles the rest.
        """
        loop = asyncio.get_running_loop()
        while not self.stopping:
            wait = self.capacity.next_change(self.wall_clock(), loop.time())
            # A minute at most: demand noted meanwhile may start a decay to follow.
            if await self.sleep(min(60.0, wait if wait is not None else 60.0) + 0.01):
                return
            floor, extra = self._capacity_now()
            assigned = self.handler.statistics.total_assigned_jobs
            if self.scaler.target_for(assigned, floor, extra) != self.scaler.target:
                self.scaler.mark_dirty()
                with contextlib.suppress(Stopped):
                    await self.publish()

    async def _publish(self, changed_only: bool = False) -> bool:
        floor, extra = self._capacity_now()
        plan = self.scaler.plan(
            self.handler.statistics.total_assigned_jobs,
            min_runners=floor,
            extra=extra,
            changed_only=changed_only,
        )
        if plan is None:
            return False
        conditional = getattr(self.patcher, "patch_replicas_after", None)
        known, seen = self.handler.statistics_marker, self._marker_seen
        if conditional is not None and known is not None and seen is not None and known != seen:
            # The set has cleaned up since these statistics were read, and this listener
            # knows it already: read them again rather than send a patch bound to be refused.
            self.stale_patches += 1
            if await self._restate(seen):
                plan = self.scaler.plan(
                    self.handler.statistics.total_assigned_jobs, min_runners=floor, extra=extra
                )
                if plan is None:
                    return False
        for attempt in range(STALE_PATCH_ATTEMPTS):
            marker = self.handler.statistics_marker
            send: Callable[[], Awaitable[None]]
            if conditional is None or marker is None or attempt == STALE_PATCH_ATTEMPTS - 1:
                # NB: the last attempt is unconditional, as is a count whose statistics could
                # not be re-read: a set that cleans up without pause, or a service that does
                # not answer, must still get a count (a job behind a refused patch waits).
                send = functools.partial(self.patcher.patch_replicas, plan.replicas, plan.patch_id)
            else:
                send = functools.partial(conditional, plan.replicas, plan.patch_id, marker)
            try:
                await self._retry("patch EphemeralRunnerSet", send)
                break
            except Stopped:
                raise
            except StaleStatistics as stale:
                self.stale_patches += 1
                if not await self._restate(stale.marker):
                    self.handler.statistics_marker = None
                plan = self.scaler.plan(
                    self.handler.statistics.total_assigned_jobs, min_runners=floor, extra=extra
                )
                if plan is None:
                    return False
            except Exception as err:
                if not is_transient(err):
                    raise
                log.error("EphemeralRunnerSet patch failed (%s); will retry next cycle", err)
                return False
        self.scaler.commit(plan)
        if self.metrics is not None:
            self.metrics.record_desired_runners(plan.replicas)
            if self.capacity.overrides:
                self.metrics.record_static(floor, self.cfg.max_runners)
        log.info(
            "EphemeralRunnerSet %s/%s: replicas=%d patchID=%d (assigned jobs %d)",
            self.cfg.ephemeral_runner_set_namespace,
            self.cfg.ephemeral_runner_set_name,
            plan.replicas,
            plan.patch_id,
            self.handler.statistics.total_assigned_jobs,
        )
        return True

    async def _restate(self, marker: int | None) -> bool:
        """Statistics read after cleanup ``marker``, for a patch that was refused because
        its own predate it (B3); False when they cannot be read."""
        self._marker_seen = marker
        log.info("the set cleaned up finished runners (marker %s); re-reading statistics", marker)
        if not await self._read_statistics(marker, "patching the count known"):
            return False
        self.scaler.mark_dirty()
        return True

    async def _close_session(self) -> bool:
        try:
            return await asyncio.wait_for(self.sessions.close(), timeout=10)
        except TimeoutError:
            log.warning("deleting the message session timed out")
            return False


def _hostname() -> str:
    """The session owner: the pod name (its hostname), as ARC uses."""
    try:
        name = socket.gethostname()
    except OSError:
        name = ""
    return name or str(uuid.uuid4())


def build_actions_client(cfg: ListenerConfig, registry: Any = None) -> Any:
    """The real ActionsClient for ``cfg``; a bad URL or credential is a :class:`ConfigError`."""
    from gharc.github.actions import ActionsClient
    from gharc.github.auth import GitHubApp, PersonalAccessToken
    from gharc.github.config import parse_config_url
    from gharc.github.metrics import GitHubMetrics

    try:
        gh_config = parse_config_url(cfg.configure_url)
    except ValueError as err:
        raise ConfigError(f"configure_url: {err}") from None
    credentials: PersonalAccessToken | GitHubApp
    try:
        if cfg.github_token:
            credentials = PersonalAccessToken(cfg.github_token)
        else:
            credentials = GitHubApp(
                cfg.github_app_id, cfg.github_app_installation_id, cfg.github_app_private_key
            )
    except ValueError as err:
        raise ConfigError(f"github credentials: {err}") from None
    metrics = GitHubMetrics(registry) if registry is not None else None
    try:
        return ActionsClient(
            gh_config, credentials, ca_bundle=cfg.server_root_ca or None, metrics=metrics
        )
    except ValueError as err:
        raise ConfigError(f"server_root_ca: {err}") from None


async def run(
    cfg: ListenerConfig,
    *,
    api: ActionsAPI | None = None,
    patcher: RunnerSetPatcher | None = None,
    install_signals: bool = True,
) -> int:
    """Run one listener process to completion and return its exit code."""
    from gharc.github.config import parse_config_url

    try:
        gh = parse_config_url(cfg.configure_url)
    except ValueError as err:
        _fail(f"invalid config: configure_url: {err}")
        return EXIT_CONFIG
    metrics = ListenerMetrics.for_listener(cfg, gh)
    try:
        api = api or build_actions_client(cfg, metrics.registry)
    except ConfigError as err:
        _fail(f"invalid config: {err}")
        return EXIT_CONFIG
    server: MetricsServer | None = None
    listener: Listener | None = None
    try:
        if patcher is None:
            from gharc.listener.runnerset_writes import KubePatcher

            try:
                patcher = await KubePatcher.connect(
                    cfg.ephemeral_runner_set_namespace, cfg.ephemeral_runner_set_name
                )
            except Exception as err:  # no kubeconfig, no service account
                _fail(f"cannot load Kubernetes client configuration: {err}")
                return EXIT_FATAL
        listener = Listener(cfg, api, patcher, metrics=metrics)
        if install_signals:
            loop = asyncio.get_running_loop()
            for sig in (signal.SIGTERM, signal.SIGINT):
                loop.add_signal_handler(sig, listener.request_stop)
        if cfg.metrics_enabled:
            host, port = cfg.metrics_host_port
            server = MetricsServer(metrics, host, port, cfg.metrics_endpoint)
            try:
                await server.start()
            except OSError as err:
                _fail(f"cannot serve metrics on {cfg.metrics_addr}: {err.strerror or err}")
                return EXIT_FATAL
        log.info(
            "listener for scale set %d (%s) -> EphemeralRunnerSet %s/%s, min %d max %d",
            cfg.runner_scale_set_id,
            cfg.configure_url,
            cfg.ephemeral_runner_set_namespace,
            cfg.ephemeral_runner_set_name,
            cfg.min_runners,
            cfg.max_runners,
        )
        try:
            await listener.run()
        except FatalError as err:
            _fail(str(err))
            return EXIT_FATAL
        log.info("listener stopped (session deleted: %s)", listener.session_deleted)
        return EXIT_OK
    finally:
        if install_signals and listener is not None:
            loop = asyncio.get_running_loop()
            for sig in (signal.SIGTERM, signal.SIGINT):
                loop.remove_signal_handler(sig)
        if server is not None:
            await server.stop()
        if patcher is not None:
            with contextlib.suppress(Exception):
                await patcher.aclose()
        with contextlib.suppress(Exception):
            await api.aclose()


def _fail(line: str) -> None:
    """The one line a failed listener leaves: on stderr, no traceback."""
    print(f"gharc listener: {line}", file=sys.stderr, flush=True)
