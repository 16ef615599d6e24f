"""Schedule maths with an injected clock: one-shot, interval, cron across DST, quiet hours,
catch-up policies, backoff, and the times people write.

Contract for the DST cases: Europe/Berlin moves from CET (UTC+1) to CEST (UTC+2) at 02:00 local
on 2026-03-29 (the hour 02:00-03:00 does not exist) and back at 03:00 local on 2026-10-25 (the
hour 02:00-03:00 happens twice) — IANA tzdata, Europe/Berlin rule "EU". A daily cron job keeps
its wall-clock time across both changes; a run inside the missing hour moves to the first
minute after it (cronsim's documented behaviour); a run in the doubled hour fires once.
"""

from __future__ import annotations

from datetime import UTC, datetime
from zoneinfo import ZoneInfo

import pytest

from agent.jobs.manage import SILENCE_MARKER, is_silent
from agent.jobs.schedule import (
    MISSED_AFTER_S,
    Cron,
    Every,
    Once,
    describe_schedule,
    in_quiet_hours,
    next_after,
    parse_duration,
    parse_quiet_hours,
    parse_schedule,
    parse_when,
    plan_run,
    retry_delay_s,
    schedule_text,
)

BERLIN = ZoneInfo("Europe/Berlin")
UTC_ZONE = ZoneInfo("UTC")


def at(text: str, zone: ZoneInfo = BERLIN) -> float:
    """A wall-clock time in `zone` as epoch seconds."""
    return datetime.fromisoformat(text).replace(tzinfo=zone).timestamp()


def local(t: float, zone: ZoneInfo = BERLIN) -> str:
    return datetime.fromtimestamp(t, zone).strftime("%Y-%m-%d %H:%M %Z")


def fire_times(
    schedule: Once | Every | Cron, start: float, count: int, zone: ZoneInfo
) -> list[str]:
    """The first `count` runs after `start`, each computed from the one before (as the
    scheduler does when a run finishes on time)."""
    out: list[str] = []
    due = next_after(schedule, start, zone)
    while due is not None and len(out) < count:
        out.append(local(due, zone))
        plan = plan_run(schedule, due=due, now=due + 1, zone=zone)
        assert plan.fire
        due = plan.next_at
    return out


class TestWhenJobsFire:
    def test_a_one_shot_fires_once_at_its_time(self) -> None:
        """A one-shot is due at its moment, fires, and has no next run."""
        when = at("2026-12-01 09:00")
        schedule = Once(at=when)
        assert next_after(schedule, when - 60, BERLIN) == when
        assert next_after(schedule, when, BERLIN) is None
        plan = plan_run(schedule, due=when, now=when + 2, zone=BERLIN)
        assert plan.fire and plan.next_at is None

    def test_an_interval_keeps_its_phase(self) -> None:
        """Every 30 minutes: runs stay on the first run's phase even when fired late."""
        first = at("2026-12-01 09:00")
        schedule = Every(every_s=1800)
        plan = plan_run(schedule, due=first, now=first + 40, zone=BERLIN)
        assert plan.fire and plan.next_at == first + 1800
        assert fire_times(schedule, first - 1800, 3, BERLIN) == [
            "2026-12-01 09:00 CET",
            "2026-12-01 09:30 CET",
            "2026-12-01 10:00 CET",
        ]

    def test_a_daily_cron_keeps_its_wall_clock_time_into_summer_time(self) -> None:
        """08:30 every day stays 08:30 local across the spring change (UTC moves by an hour)."""
        schedule = Cron(expr="30 8 * * *")
        runs = fire_times(schedule, at("2026-03-27 12:00"), 4, BERLIN)
        assert runs == [
            "2026-03-28 08:30 CET",
            "2026-03-29 08:30 CEST",
            "2026-03-30 08:30 CEST",
            "2026-03-31 08:30 CEST",
        ]
        utc_hours = [datetime.fromtimestamp(at(r[:16]), UTC).hour for r in runs[:2]]
        assert utc_hours == [7, 6]

    def test_a_run_in_the_missing_spring_hour_moves_after_it(self) -> None:
        """02:30 does not exist on 2026-03-29 in Berlin: that day's run is at 03:00 CEST."""
        schedule = Cron(expr="30 2 * * *")
        runs = fire_times(schedule, at("2026-03-28 12:00"), 3, BERLIN)
        assert runs == ["2026-03-29 03:00 CEST", "2026-03-30 02:30 CEST", "2026-03-31 02:30 CEST"]

    def test_a_run_in_the_doubled_autumn_hour_fires_once(self) -> None:
        """02:30 happens twice on 2026-10-25 in Berlin; the job runs once that day."""
        schedule = Cron(expr="30 2 * * *")
        runs = fire_times(schedule, at("2026-10-24 12:00"), 3, BERLIN)
        days = [r[:10] for r in runs]
        assert days == ["2026-10-25", "2026-10-26", "2026-10-27"]
        assert runs[1:] == ["2026-10-26 02:30 CET", "2026-10-27 02:30 CET"]

    def test_weekday_cron_skips_the_weekend(self) -> None:
        """`0 8 * * 1-5` from a Friday evening: Monday 08:00."""
        schedule = Cron(expr="0 8 * * 1-5")
        assert local(next_after(schedule, at("2026-12-04 18:00"), BERLIN) or 0) == (
            "2026-12-07 08:00 CET"
        )


class TestCatchUp:
    """The gateway was down from 09:00 to 12:10; the job runs every hour on the hour."""

    due = at("2026-12-01 09:00")
    now = at("2026-12-01 12:10")
    schedule = Every(every_s=3600)

    def test_once_fires_one_missed_run_then_goes_on_from_now(self) -> None:
        plan = plan_run(self.schedule, due=self.due, now=self.now, zone=BERLIN, catch_up="once")
        assert plan.fire and plan.missed == 4
        assert local(plan.next_at or 0) == "2026-12-01 13:00 CET"

    def test_all_fires_every_missed_run_one_after_another(self) -> None:
        fired, due, now = [], self.due, self.now
        while due is not None and due <= now:
            plan = plan_run(self.schedule, due=due, now=now, zone=BERLIN, catch_up="all")
            assert plan.fire
            fired.append(local(due))
            due = plan.next_at
            now += 5  # one tick later
        assert fired == [f"2026-12-01 {h}:00 CET" for h in ("09", "10", "11", "12")]
        assert local(due or 0) == "2026-12-01 13:00 CET"

    def test_skip_fires_none_of_the_missed_runs(self) -> None:
        plan = plan_run(self.schedule, due=self.due, now=self.now, zone=BERLIN, catch_up="skip")
        assert not plan.fire and plan.reason == "missed"
        assert local(plan.next_at or 0) == "2026-12-01 13:00 CET"

    def test_a_slightly_late_tick_is_not_a_missed_run(self) -> None:
        """Tick latency under `MISSED_AFTER_S` fires even with `skip`."""
        plan = plan_run(
            self.schedule, due=self.due, now=self.due + MISSED_AFTER_S - 1, zone=BERLIN,
            catch_up="skip",
        )  # fmt: skip
        assert plan.fire and plan.missed == 0

    def test_a_missed_one_shot_with_skip_is_done(self) -> None:
        plan = plan_run(Once(at=self.due), due=self.due, now=self.now, zone=BERLIN, catch_up="skip")
        assert not plan.fire and plan.next_at is None


class TestQuietHours:
    def test_a_recurring_run_in_quiet_hours_skips_to_the_first_run_after_them(self) -> None:
        """Hourly, quiet 22:00-07:00: the 23:00 run does not fire; the next is 07:00."""
        quiet = parse_quiet_hours("22:00-07:00")
        due = at("2026-12-01 23:00")
        plan = plan_run(Every(every_s=3600), due=due, now=due + 1, zone=BERLIN, quiet=quiet)
        assert not plan.fire and plan.reason == "quiet hours"
        assert local(plan.next_at or 0) == "2026-12-02 07:00 CET"

    def test_a_reminder_in_quiet_hours_waits_for_their_end(self) -> None:
        quiet = parse_quiet_hours("22:00-07:00")
        due = at("2026-12-01 23:15")
        plan = plan_run(Once(at=due), due=due, now=due + 1, zone=BERLIN, quiet=quiet)
        assert not plan.fire and local(plan.next_at or 0) == "2026-12-02 07:00 CET"

    @pytest.mark.parametrize(
        ("clock", "inside"),
        [("21:59", False), ("22:00", True), ("03:00", True), ("06:59", True), ("07:00", False)],
    )
    def test_a_window_across_midnight(self, clock: str, inside: bool) -> None:
        quiet = parse_quiet_hours("22:00-07:00")
        assert in_quiet_hours(at(f"2026-12-01 {clock}"), BERLIN, quiet) is inside

    @pytest.mark.parametrize("bad", ["22-07", "25:00-07:00", "07:00-07:00", "", "x"])
    def test_malformed_windows_are_refused(self, bad: str) -> None:
        with pytest.raises(ValueError, match="quiet hours"):
            parse_quiet_hours(bad)


class TestParsing:
    @pytest.mark.parametrize(
        ("text", "seconds"),
        [("30m", 1800), ("1h30m", 5400), ("90s", 90), ("2d", 172_800), ("1w", 604_800)],
    )
    def test_durations(self, text: str, seconds: float) -> None:
        assert parse_duration(text) == seconds

    @pytest.mark.parametrize("bad", ["", "0m", "soon", "5", "m5", "1h 3x", "9" * 60 + "m"])
    def test_bad_durations_are_refused(self, bad: str) -> None:
        with pytest.raises(ValueError, match="duration"):
            parse_duration(bad)

    @pytest.mark.parametrize(
        ("text", "expected"),
        [
            ("in 20m", "2026-12-01 10:20 CET"),
            ("20m", "2026-12-01 10:20 CET"),
            ("11:00", "2026-12-01 11:00 CET"),
            ("9:00", "2026-12-02 09:00 CET"),  # already past today: tomorrow
            ("tomorrow 9:00", "2026-12-02 09:00 CET"),
            ("7pm", "2026-12-01 19:00 CET"),
            ("2026-12-24 18:00", "2026-12-24 18:00 CET"),
            ("2026-12-24T18:00:00+00:00", "2026-12-24 19:00 CET"),
        ],
    )
    def test_times_people_write_are_read_in_their_zone(self, text: str, expected: str) -> None:
        now = at("2026-12-01 10:00")
        assert local(parse_when(text, now=now, zone=BERLIN)) == expected

    @pytest.mark.parametrize("bad", ["yesterday", "today 9:00", "2020-01-01 10:00", "25:00"])
    def test_past_or_unreadable_times_are_refused(self, bad: str) -> None:
        with pytest.raises(ValueError):
            parse_when(bad, now=at("2026-12-01 10:00"), zone=BERLIN)

    @pytest.mark.parametrize(
        "schedule", [Once(at=1_800_000_000.5), Every(every_s=1800), Cron(expr="0 8 * * 1-5")]
    )
    def test_the_stored_form_round_trips(self, schedule: Once | Every | Cron) -> None:
        assert parse_schedule(schedule_text(schedule)) == schedule

    @pytest.mark.parametrize(
        "bad", ["cron:61 * * * *", "cron:* * * *", "cron:* * * * * *", "every:5", "weekly:1"]
    )
    def test_bad_schedules_are_refused(self, bad: str) -> None:
        with pytest.raises(ValueError):
            parse_schedule(bad)

    def test_descriptions_name_the_zone(self) -> None:
        assert describe_schedule(Cron(expr="0 8 * * *"), BERLIN) == "cron 0 8 * * * (Europe/Berlin)"


def test_backoff_doubles_up_to_an_hour() -> None:
    """30 s, 60 s, 120 s, ... capped at 3600 s."""
    assert [retry_delay_s(n) for n in (1, 2, 3, 10)] == [30.0, 60.0, 120.0, 3600.0]


@pytest.mark.parametrize(
    ("reply", "silent"),
    [
        (SILENCE_MARKER, True),
        (f"  {SILENCE_MARKER}.\n", True),
        (f"`{SILENCE_MARKER}`", True),
        ("nothing_to_report", True),
        (f"{SILENCE_MARKER} but the build failed", False),
        ("All quiet.", False),
        ("", False),
    ],
)
def test_only_a_reply_that_is_just_the_marker_is_silent(reply: str, silent: bool) -> None:
    assert is_silent(reply) is silent
