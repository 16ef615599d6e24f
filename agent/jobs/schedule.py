"""When a job fires: schedules, time zones, quiet hours, catch-up and backoff, as pure functions.

Times are epoch seconds (floats); wall-clock rules (a cron expression, quiet hours, "at 9:00")
are read in the owner's `zoneinfo` zone, so a daily job at 09:00 Berlin stays at 09:00 across a
DST change, a run inside the skipped spring hour moves to the first valid minute after it (what
cronsim does), and a run in the repeated autumn hour fires once. Nothing here reads the clock:
every decision takes `now`.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from datetime import datetime, timedelta
from datetime import time as wall_time
from typing import Literal, TypeAlias, assert_never
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from cronsim import CronSim, CronSimError

__all__ = [
    "MAX_ATTEMPTS",
    "MISSED_AFTER_S",
    "CatchUp",
    "Cron",
    "Every",
    "Once",
    "QuietHours",
    "RunPlan",
    "Schedule",
    "describe_schedule",
    "format_local",
    "next_after",
    "parse_duration",
    "parse_quiet_hours",
    "parse_schedule",
    "parse_when",
    "plan_run",
    "quiet_end",
    "retry_delay_s",
    "schedule_text",
    "zone_named",
]

CatchUp: TypeAlias = Literal["once", "all", "skip"]
"""After downtime: fire one missed run (`once`), every missed run one after another (`all`),
or none (`skip`: the next run is the first one still ahead)."""
MISSED_AFTER_S = 60.0
"""A run this late counts as missed (downtime), not as ordinary tick latency."""
MAX_ATTEMPTS = 3
"""Tries of one run (the first and two retries) before the job moves on to its next run."""
FIRST_RETRY_S = 30.0
MAX_RETRY_S = 3600.0
MIN_EVERY_S = 60.0
"""The shortest interval a recurring job may have."""
MAX_CATCH_UP = 1000
"""`all` never queues more than this many missed runs."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Once:
    """One run at `at`."""

    at: float


@dataclass(frozen=True, slots=True, kw_only=True)
class Every:
    """A run every `every_s` seconds, in phase with the first run."""

    every_s: float


@dataclass(frozen=True, slots=True, kw_only=True)
class Cron:
    """A 5-field cron expression (minute hour day-of-month month day-of-week), in the owner's zone."""

    expr: str


Schedule: TypeAlias = Once | Every | Cron


@dataclass(frozen=True, slots=True, kw_only=True)
class QuietHours:
    """A daily wall-clock window (it may wrap midnight) when nothing is sent."""

    start: wall_time
    end: wall_time

    def __str__(self) -> str:
        return f"{self.start:%H:%M}-{self.end:%H:%M}"


@dataclass(frozen=True, slots=True, kw_only=True)
class RunPlan:
    """What to do with a run that is due."""

    fire: bool
    """Run it now (False: a missed run skipped by the catch-up policy, or quiet hours)."""
    next_at: float | None
    """The job's next run once this one is done (None: the job is finished)."""
    missed: int = 0
    """Runs that were due (this one included) while nobody ran them."""
    reason: str = ""
    """Why it does not fire: `missed` or `quiet hours`."""


def zone_named(name: str) -> ZoneInfo:
    """The IANA zone `name` (e.g. `Europe/Berlin`); ValueError naming the problem."""
    try:
        return ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError) as exc:
        raise ValueError(
            f"unknown time zone {name!r} (use an IANA name like Europe/Berlin)"
        ) from exc


_DURATION = re.compile(r"(\d+(?:\.\d+)?)\s*(w|d|h|m|min|s|sec)", re.I)
_UNIT_S = {"w": 604_800, "d": 86_400, "h": 3_600, "m": 60, "min": 60, "s": 1, "sec": 1}


def parse_duration(text: str) -> float:
    """`30m`, `1h30m`, `90s`, `2d`, `1w` as seconds; ValueError for anything else."""
    compact = text.strip().lower().replace(" ", "")
    if not compact or len(compact) > 40:
        raise ValueError(f"not a duration: {text[:40]!r} (use e.g. 30m, 2h, 1d, 1h30m)")
    pos, total = 0, 0.0
    for match in _DURATION.finditer(compact):
        if match.start() != pos:
            break
        total += float(match.group(1)) * _UNIT_S[match.group(2).lower()]
        pos = match.end()
    if pos != len(compact) or total <= 0:
        raise ValueError(f"not a duration: {text[:40]!r} (use e.g. 30m, 2h, 1d, 1h30m)")
    return total


def parse_quiet_hours(text: str) -> QuietHours:
    """`22:00-07:00` (wrapping midnight is fine); ValueError otherwise."""
    match = re.fullmatch(r"\s*(\d{1,2}):(\d{2})\s*-\s*(\d{1,2}):(\d{2})\s*", text)
    if match is None:
        raise ValueError(f"quiet hours must look like 22:00-07:00, not {text[:40]!r}")
    h1, m1, h2, m2 = (int(g) for g in match.groups())
    if h1 > 23 or h2 > 23 or m1 > 59 or m2 > 59 or (h1, m1) == (h2, m2):
        raise ValueError(f"quiet hours must look like 22:00-07:00, not {text[:40]!r}")
    return QuietHours(start=wall_time(h1, m1), end=wall_time(h2, m2))


def schedule_text(schedule: Schedule) -> str:
    """The stored form: `once:<epoch>`, `every:<seconds>`, `cron:<expr>`."""
    match schedule:
        case Once(at=at):
            return f"once:{at:.3f}"
        case Every(every_s=every_s):
            return f"every:{every_s:g}"
        case Cron(expr=expr):
            return f"cron:{expr}"
        case unreachable:
            assert_never(unreachable)


def parse_schedule(text: str) -> Schedule:
    """The stored form back (see `schedule_text`); ValueError for a malformed one. A cron
    expression is checked with cronsim: exactly five fields."""
    kind, _, rest = text.partition(":")
    if kind == "once":
        return Once(at=float(rest))
    if kind == "every":
        every_s = float(rest)
        if not math.isfinite(every_s) or every_s < MIN_EVERY_S:
            raise ValueError(f"an interval must be at least {MIN_EVERY_S:g} s")
        return Every(every_s=every_s)
    if kind == "cron":
        expr = " ".join(rest.split())
        if len(expr.split(" ")) != 5:
            raise ValueError(f"a cron expression has five fields, not {rest[:60]!r}")
        try:
            CronSim(expr, datetime(2026, 1, 1, tzinfo=ZoneInfo("UTC")))
        except CronSimError as exc:
            raise ValueError(f"not a valid cron expression {expr!r}: {exc}") from exc
        return Cron(expr=expr)
    raise ValueError(f"unknown schedule {text[:60]!r}")


def next_after(
    schedule: Schedule, t: float, zone: ZoneInfo, *, phase: float | None = None
) -> float | None:
    """The first run strictly after `t` (None: there is none). An interval keeps the phase of
    `phase` (a run it already had), else it starts `every_s` after `t`."""
    match schedule:
        case Once(at=at):
            return at if at > t else None
        case Every(every_s=every_s):
            if phase is None:
                return t + every_s
            steps = math.floor((t - phase) / every_s) + 1
            return phase + max(steps, 1) * every_s if phase <= t else phase
        case Cron(expr=expr):
            start = datetime.fromtimestamp(t, zone)
            it = CronSim(expr, start)
            for candidate in it:  # cronsim yields times >= start at minute precision
                if candidate.timestamp() > t:
                    return candidate.timestamp()
            return None
        case unreachable:
            assert_never(unreachable)


def in_quiet_hours(t: float, zone: ZoneInfo, quiet: QuietHours) -> bool:
    """Whether the wall clock in `zone` at `t` is inside the window."""
    now = datetime.fromtimestamp(t, zone).time()
    if quiet.start < quiet.end:
        return quiet.start <= now < quiet.end
    return now >= quiet.start or now < quiet.end


def quiet_end(t: float, zone: ZoneInfo, quiet: QuietHours) -> float:
    """The first moment at or after `t` outside the quiet window (`t` itself when outside)."""
    if not in_quiet_hours(t, zone, quiet):
        return t
    local = datetime.fromtimestamp(t, zone)
    end = datetime.combine(local.date(), quiet.end, tzinfo=zone)
    if end.timestamp() <= t:
        end = datetime.combine(local.date() + timedelta(days=1), quiet.end, tzinfo=zone)
    return end.timestamp()


def plan_run(
    schedule: Schedule,
    *,
    due: float,
    now: float,
    zone: ZoneInfo,
    catch_up: CatchUp = "once",
    quiet: QuietHours | None = None,
) -> RunPlan:
    """What to do with the run that was due at `due`, now.

    A run less than `MISSED_AFTER_S` late is on time. A later one was missed (the gateway was
    down): `once` fires it and goes on with the first run after now; `all` fires it and goes on
    with the next missed one (one per tick, bounded by `MAX_CATCH_UP`); `skip` fires none.
    Inside quiet hours a recurring job skips to its first run after them and a one-shot waits
    for their end."""
    missed = _count_missed(schedule, due, now, zone)
    ahead = next_after(schedule, now, zone, phase=due)
    if quiet is not None and in_quiet_hours(now, zone, quiet):
        if isinstance(schedule, Once):
            return RunPlan(fire=False, next_at=quiet_end(now, zone, quiet), reason="quiet hours")
        after = quiet_end(now, zone, quiet)
        later = next_after(schedule, after - 0.001, zone, phase=due)
        return RunPlan(fire=False, next_at=later, missed=missed, reason="quiet hours")
    if now - due <= MISSED_AFTER_S:
        return RunPlan(fire=True, next_at=ahead, missed=0)
    match catch_up:
        case "once":
            return RunPlan(fire=True, next_at=ahead, missed=missed)
        case "skip":
            return RunPlan(fire=False, next_at=ahead, missed=missed, reason="missed")
        case "all":
            following = next_after(schedule, due, zone, phase=due)
            if following is not None and following <= now and missed <= MAX_CATCH_UP:
                return RunPlan(fire=True, next_at=following, missed=missed)
            return RunPlan(fire=True, next_at=ahead, missed=missed)
        case unreachable:
            assert_never(unreachable)


def retry_delay_s(failures: int) -> float:
    """How long after its `failures`-th failure in a row a run is tried again: 30 s doubling,
    at most an hour."""
    return float(min(FIRST_RETRY_S * 2 ** max(failures - 1, 0), MAX_RETRY_S))


def parse_when(text: str, *, now: float, zone: ZoneInfo) -> float:
    """A moment people write: `in 20m` / `20m`, `9:00` (the next 9:00), `tomorrow 9:00`,
    `2026-12-24 18:00` (in `zone`), or ISO 8601 with an offset. ValueError otherwise; a moment
    already past is refused."""
    raw = " ".join(text.strip().split())
    lowered = raw.lower()
    if lowered.startswith("in "):
        return now + parse_duration(lowered[3:])
    try:
        return now + parse_duration(lowered)
    except ValueError:
        pass
    local_now = datetime.fromtimestamp(now, zone)
    day_offset, named_day = 0, False
    for word, offset in (("today ", 0), ("tomorrow ", 1)):
        if lowered.startswith(word):
            lowered, day_offset, named_day = lowered[len(word) :], offset, True
            break
    clock = re.fullmatch(r"(\d{1,2})(?::(\d{2}))?\s*(am|pm)?", lowered)
    if clock is not None:
        hour, minute = int(clock.group(1)), int(clock.group(2) or 0)
        if clock.group(3) == "pm" and hour < 12:
            hour += 12
        if clock.group(3) == "am" and hour == 12:
            hour = 0
        if hour > 23 or minute > 59:
            raise ValueError(f"not a time of day: {raw[:40]!r}")
        day = local_now.date() + timedelta(days=day_offset)
        at = datetime.combine(day, wall_time(hour, minute), tzinfo=zone).timestamp()
        if at <= now and not named_day:  # a bare time already past today: tomorrow's
            day += timedelta(days=1)
            at = datetime.combine(day, wall_time(hour, minute), tzinfo=zone).timestamp()
        return _not_past(at, now, raw)
    try:
        parsed = datetime.fromisoformat(raw)
    except ValueError:
        raise ValueError(
            f"not a time: {raw[:40]!r} (use e.g. 'in 20m', '9:00', 'tomorrow 9:00', "
            "'2026-12-24 18:00')"
        ) from None
    if parsed.tzinfo is None:
        parsed = parsed.replace(tzinfo=zone)
    return _not_past(parsed.timestamp(), now, raw)


def format_local(t: float, zone: ZoneInfo) -> str:
    """`2026-12-01 09:00 CET`: a moment as the owner reads it."""
    return datetime.fromtimestamp(t, zone).strftime("%Y-%m-%d %H:%M %Z")


def describe_schedule(schedule: Schedule, zone: ZoneInfo) -> str:
    """`once at 2026-12-01 09:00 CET`, `every 30m`, `cron 0 8 * * 1-5 (Europe/Berlin)`."""
    match schedule:
        case Once(at=at):
            return f"once at {format_local(at, zone)}"
        case Every(every_s=every_s):
            return f"every {_short_duration(every_s)}"
        case Cron(expr=expr):
            return f"cron {expr} ({zone.key})"
        case unreachable:
            assert_never(unreachable)


def _short_duration(seconds: float) -> str:
    for unit, size in (("d", 86_400), ("h", 3_600), ("m", 60)):
        if seconds >= size and seconds % size == 0:
            return f"{int(seconds // size)}{unit}"
    return f"{seconds:g}s"


def _not_past(at: float, now: float, raw: str) -> float:
    if at <= now:
        raise ValueError(f"{raw[:40]!r} is already past")
    return at


def _count_missed(schedule: Schedule, due: float, now: float, zone: ZoneInfo) -> int:
    """Runs due in [due, now], `due` included, counted up to `MAX_CATCH_UP + 1`."""
    if due > now:
        return 0
    count, t = 1, due
    while count <= MAX_CATCH_UP:
        following = next_after(schedule, t, zone, phase=due)
        if following is None or following > now:
            break
        count, t = count + 1, following
    return count
