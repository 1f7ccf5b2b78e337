//! When an agent's cron fires (SPEC §15): every N seconds (`cron`), or at wall-clock times in a
//! time zone (`cron_at`), daylight-saving transitions included.

use jiff::civil::{Date, DateTime, Time};
use jiff::tz::{AmbiguousOffset, TimeZone};
use jiff::Timestamp;
use serde::{Deserialize, Serialize};

use crate::ids::Millis;

/// An agent's cron: after each completed turn the job waits for the next firing, until the
/// agent cancels it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "camelCase")]
#[non_exhaustive]
pub enum Schedule {
    /// `cron(seconds, reason)`: `seconds` after each turn ends.
    Every {
        /// Seconds between the end of a turn and the next firing (at least 1).
        seconds: u64,
    },
    /// `cron_at(minute, hour?, day_of_week?, day_of_month?, tz, reason)`.
    At(WallClock),
}

/// Wall-clock firings in a time zone, as a cron line with one value per field (an absent
/// field matches every value).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct WallClock {
    /// Minute of the hour, 0–59.
    pub minute: u8,
    /// Hour of the day, 0–23; absent: every hour.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hour: Option<u8>,
    /// Day of the week, 0 (Sunday) – 6 (Saturday); absent: every day.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub day_of_week: Option<u8>,
    /// Day of the month, 1–31; absent: every day.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub day_of_month: Option<u8>,
    /// IANA time zone name (`Europe/Berlin`, `UTC`).
    pub tz: String,
}

/// A schedule argument out of range, or a time zone that does not exist: names the argument.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{argument}: {message}")]
pub struct ScheduleError {
    /// The tool argument at fault (`seconds`, `minute`, `hour`, `day_of_week`, `day_of_month`,
    /// `tz`).
    pub argument: &'static str,
    /// What is wrong with it.
    pub message: String,
}

/// How far ahead [`WallClock::next_after`] looks for a matching day before it gives up: four
/// years and a day or two covers every leap-year cycle, so any valid line matches well within it
/// (a 31st comes every two months at most); the bound only keeps a bad line from looping.
const SEARCH_DAYS: u32 = 4 * 366 + 2;

impl Schedule {
    /// `cron(seconds)`: fire `seconds` after each turn ends; `seconds` must be at least 1.
    ///
    /// ```
    /// use orchestrator_core::schedule::Schedule;
    ///
    /// let every_minute = Schedule::every(60)?;
    /// assert_eq!(every_minute, Schedule::Every { seconds: 60 });
    /// assert_eq!(Schedule::every(0).err().map(|e| e.argument), Some("seconds"));
    /// # Ok::<(), orchestrator_core::schedule::ScheduleError>(())
    /// ```
    pub fn every(seconds: i64) -> Result<Schedule, ScheduleError> {
        match u64::try_from(seconds) {
            Ok(seconds) if seconds >= 1 => Ok(Schedule::Every { seconds }),
            _ => Err(seconds_error(seconds)),
        }
    }

    /// The first firing strictly after `after` (a turn's end, in milliseconds since the Unix
    /// epoch): `after` plus the interval for [`Schedule::Every`] (saturating rather than
    /// wrapping, so a huge interval means "practically never", not "in the past"), the wall
    /// clock's next time for [`Schedule::At`].
    ///
    /// ```
    /// use orchestrator_core::schedule::{Schedule, WallClock};
    ///
    /// assert_eq!(Schedule::every(60)?.next_after(1_000)?, 61_000);
    ///
    /// // 2026-01-15T12:00:00Z; the next 09:30 in Berlin (CET, +01:00) is 2026-01-16T08:30:00Z.
    /// let daily = Schedule::At(WallClock::new(30, Some(9), None, None, "Europe/Berlin")?);
    /// assert_eq!(daily.next_after(1_768_478_400_000)?, 1_768_552_200_000);
    /// # Ok::<(), orchestrator_core::schedule::ScheduleError>(())
    /// ```
    pub fn next_after(&self, after: Millis) -> Result<Millis, ScheduleError> {
        match self {
            // A zero interval can only come from a hand-edited or foreign record (`every`
            // refuses it); answering `after` itself would make the caller fire in a busy loop.
            Schedule::Every { seconds: 0 } => Err(seconds_error(0)),
            Schedule::Every { seconds } => Ok(after.saturating_add(seconds.saturating_mul(1000))),
            Schedule::At(wall_clock) => wall_clock.next_after(after),
        }
    }
}

impl WallClock {
    /// `cron_at(minute, hour?, day_of_week?, day_of_month?, tz)`: checks each field's range
    /// (minute 0–59, hour 0–23, day_of_week 0 = Sunday – 6, day_of_month 1–31) and that `tz`
    /// names a known IANA time zone; the error names the argument at fault.
    ///
    /// ```
    /// use orchestrator_core::schedule::WallClock;
    ///
    /// // Every day at 09:30 Berlin time.
    /// let daily = WallClock::new(30, Some(9), None, None, "Europe/Berlin")?;
    /// assert_eq!(daily.hour, Some(9));
    ///
    /// let late = WallClock::new(60, None, None, None, "UTC");
    /// assert_eq!(late.err().map(|e| e.argument), Some("minute"));
    /// let nowhere = WallClock::new(0, None, None, None, "Mars/Olympus");
    /// assert_eq!(nowhere.err().map(|e| e.argument), Some("tz"));
    /// # Ok::<(), orchestrator_core::schedule::ScheduleError>(())
    /// ```
    pub fn new(
        minute: i64,
        hour: Option<i64>,
        day_of_week: Option<i64>,
        day_of_month: Option<i64>,
        tz: &str,
    ) -> Result<WallClock, ScheduleError> {
        let wall_clock = WallClock {
            minute: field("minute", minute, 0, 59)?,
            hour: hour.map(|h| field("hour", h, 0, 23)).transpose()?,
            day_of_week: day_of_week
                .map(|d| field("day_of_week", d, 0, 6))
                .transpose()?,
            day_of_month: day_of_month
                .map(|d| field("day_of_month", d, 1, 31))
                .transpose()?,
            tz: tz.to_owned(),
        };
        time_zone(tz)?;
        Ok(wall_clock)
    }

    /// The first firing strictly after `after` (milliseconds since the Unix epoch).
    ///
    /// A day matches when every set day field matches, except that with both `day_of_week`
    /// and `day_of_month` set either one is enough (as in cron(8)). Daylight saving:
    /// - a local time that does not exist (spring forward) fires at the instant the gap ends
    ///   (02:30 on a night that jumps from 02:00 to 03:00 fires at 03:00), as cron(8) runs
    ///   jobs of skipped time right after the change;
    /// - a local time that occurs twice (fall back) fires once, at the earlier occurrence,
    ///   when `hour` is set; an hourly line (no `hour`) fires at each real instant whose local
    ///   minute matches, so both 01:15s of the repeated hour.
    ///
    /// Firings are strictly increasing and never the same instant twice (the gap's end may
    /// coincide with the next hour's firing: it fires once). Errors: `tz` when the zone is no
    /// longer known, `day_of_month` "never occurs" when nothing matches within about four years
    /// (or before the end of supported time, late on 9999-12-30 UTC), a field's name when a
    /// stored value is out of range.
    ///
    /// ```
    /// use orchestrator_core::schedule::WallClock;
    ///
    /// let daily = WallClock::new(30, Some(9), None, None, "Europe/Berlin")?;
    /// // 2026-07-15T12:00:00Z; the next 09:30 in Berlin (CEST, +02:00) is 2026-07-16T07:30:00Z.
    /// assert_eq!(daily.next_after(1_784_116_800_000)?, 1_784_187_000_000);
    /// # Ok::<(), orchestrator_core::schedule::ScheduleError>(())
    /// ```
    pub fn next_after(&self, after: Millis) -> Result<Millis, ScheduleError> {
        // A stored schedule may come from an older or hand-edited record: check it again
        // rather than trust it, so a bad value is reported by name instead of misfiring.
        self.check_ranges()?;
        let tz = time_zone(&self.tz)?;
        let after_ts = i64::try_from(after)
            .ok()
            .and_then(|ms| Timestamp::from_millisecond(ms).ok())
            .ok_or_else(|| self.never_occurs())?;
        // Start a day early: in a zone that skipped a whole day (Samoa, 2011-12-30) the times
        // of the previous civil date resolve to the end of the gap, which may lie after `after`.
        let local_date = tz.to_datetime(after_ts).date();
        let mut day = local_date.yesterday().unwrap_or(local_date);
        // Civil times resolve to instants monotonically (gap → its end, fold → in order), so
        // the first candidate after `after`, taken in civil order, is the earliest firing.
        for _ in 0..SEARCH_DAYS {
            if self.day_matches(day) {
                if let Some(next) = self.first_on(&tz, day, after_ts)? {
                    return u64::try_from(next.as_millisecond()).map_err(|_| self.never_occurs());
                }
            }
            match day.tomorrow() {
                Ok(tomorrow) => day = tomorrow,
                Err(_) => break,
            }
        }
        Err(self.never_occurs())
    }

    /// The range checks of [`WallClock::new`], for a value that did not come through it.
    fn check_ranges(&self) -> Result<(), ScheduleError> {
        field("minute", self.minute.into(), 0, 59)?;
        if let Some(hour) = self.hour {
            field("hour", hour.into(), 0, 23)?;
        }
        if let Some(day) = self.day_of_week {
            field("day_of_week", day.into(), 0, 6)?;
        }
        if let Some(day) = self.day_of_month {
            field("day_of_month", day.into(), 1, 31)?;
        }
        Ok(())
    }

    /// Whether the line fires on civil date `day`: cron(8)'s rule, where two restricted day
    /// fields widen the match (either) instead of narrowing it.
    fn day_matches(&self, day: Date) -> bool {
        let weekday = i64::from(day.weekday().to_sunday_zero_offset());
        let day_of_month = i64::from(day.day());
        let week_ok = self.day_of_week.map(|d| i64::from(d) == weekday);
        let month_ok = self.day_of_month.map(|d| i64::from(d) == day_of_month);
        match (week_ok, month_ok) {
            (None, None) => true,
            (Some(ok), None) | (None, Some(ok)) => ok,
            (Some(week), Some(month)) => week || month,
        }
    }

    /// The earliest firing on civil date `day` strictly after `after`, if any.
    fn first_on(
        &self,
        tz: &TimeZone,
        day: Date,
        after: Timestamp,
    ) -> Result<Option<Timestamp>, ScheduleError> {
        let hours = match self.hour {
            Some(hour) => hour..=hour,
            None => 0..=23,
        };
        for hour in hours {
            let time = Time::new(to_i8(hour), to_i8(self.minute), 0, 0)
                .map_err(|_| self.never_occurs())?;
            for candidate in self.instants(tz, day.to_datetime(time))? {
                if candidate > after {
                    return Ok(Some(candidate));
                }
            }
        }
        Ok(None)
    }

    /// The real instants at which local time `dt` fires, earliest first (one or two).
    fn instants(&self, tz: &TimeZone, dt: DateTime) -> Result<Vec<Timestamp>, ScheduleError> {
        let ambiguous = tz.to_ambiguous_timestamp(dt);
        let beyond = |_| self.never_occurs();
        Ok(match ambiguous.offset() {
            AmbiguousOffset::Unambiguous { .. } => vec![ambiguous.compatible().map_err(beyond)?],
            AmbiguousOffset::Gap { .. } => {
                // Both disambiguations of a skipped time straddle the transition; the first
                // transition after the earlier one is the instant the gap ends.
                let earlier = ambiguous.earlier().map_err(beyond)?;
                let later = ambiguous.later().map_err(beyond)?;
                let (low, high) = (earlier.min(later), earlier.max(later));
                let end = tz
                    .following(low)
                    .next()
                    .map(|transition| transition.timestamp())
                    .filter(|end| *end <= high)
                    .unwrap_or(high);
                vec![end]
            }
            AmbiguousOffset::Fold { .. } => {
                let earlier = ambiguous.earlier().map_err(beyond)?;
                if self.hour.is_some() {
                    // A daily (or weekly, monthly) time fires once a night, not twice.
                    vec![earlier]
                } else {
                    // Hourly: the repeated hour is a real hour, and it fires like any other.
                    vec![earlier, ambiguous.later().map_err(beyond)?]
                }
            }
        })
    }

    /// The search guard's error: no matching day within reach.
    fn never_occurs(&self) -> ScheduleError {
        let days = match (self.day_of_week, self.day_of_month) {
            (Some(week), Some(month)) => format!("day_of_week {week} or day_of_month {month}"),
            (Some(week), None) => format!("day_of_week {week}"),
            (None, Some(month)) => format!("day_of_month {month}"),
            (None, None) => "every day".to_owned(),
        };
        ScheduleError {
            argument: "day_of_month",
            message: format!(
                "never occurs: {days} at minute {} has no firing within {} years or before \
                 the end of supported time (9999-12-30)",
                self.minute,
                SEARCH_DAYS / 366
            ),
        }
    }
}

/// Checks that `value` of tool argument `argument` lies in `low..=high`.
fn field(argument: &'static str, value: i64, low: u8, high: u8) -> Result<u8, ScheduleError> {
    match u8::try_from(value) {
        Ok(v) if (low..=high).contains(&v) => Ok(v),
        _ => Err(ScheduleError {
            argument,
            message: format!("must be between {low} and {high}, got {value}"),
        }),
    }
}

/// Looks up an IANA time zone, naming the `tz` argument when it is unknown.
fn time_zone(name: &str) -> Result<TimeZone, ScheduleError> {
    TimeZone::get(name).map_err(|_| ScheduleError {
        argument: "tz",
        message: format!("unknown IANA time zone \"{name}\" (e.g. \"Europe/Berlin\", \"UTC\")"),
    })
}

/// The `seconds` argument's error.
fn seconds_error(seconds: i64) -> ScheduleError {
    ScheduleError {
        argument: "seconds",
        message: format!("must be a positive number of seconds (at least 1), got {seconds}"),
    }
}

/// A checked field (at most 59) as jiff's civil-time component type. It always fits; the
/// fallback is a component `Time::new` rejects, so a bad value errors instead of wrapping.
fn to_i8(value: u8) -> i8 {
    i8::try_from(value).unwrap_or(i8::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Milliseconds of a UTC instant written as `2026-01-15T12:00:00Z`.
    fn ms(instant: &str) -> Millis {
        let ts: Timestamp = instant.parse().expect("a valid instant");
        u64::try_from(ts.as_millisecond()).expect("after the epoch")
    }

    /// The UTC instant of `millis`, for readable comparisons.
    fn utc(millis: Millis) -> String {
        let ms = i64::try_from(millis).expect("in range");
        Timestamp::from_millisecond(ms)
            .expect("in range")
            .to_string()
    }

    fn at(
        minute: i64,
        hour: Option<i64>,
        day_of_week: Option<i64>,
        day_of_month: Option<i64>,
        tz: &str,
    ) -> WallClock {
        WallClock::new(minute, hour, day_of_week, day_of_month, tz).expect("a valid wall clock")
    }

    /// The next `n` firings after `from`, each one after the previous.
    fn firings(wall_clock: &WallClock, from: &str, n: usize) -> Vec<String> {
        let mut after = ms(from);
        let mut out = Vec::new();
        for _ in 0..n {
            let next = wall_clock.next_after(after).expect("a firing");
            assert!(next > after, "{} is not after {}", utc(next), utc(after));
            out.push(utc(next));
            after = next;
        }
        out
    }

    #[test]
    fn daily_in_berlin_winter_and_summer() {
        let daily = at(30, Some(9), None, None, "Europe/Berlin");
        // CET, +01:00.
        assert_eq!(
            firings(&daily, "2026-01-15T06:00:00Z", 2),
            ["2026-01-15T08:30:00Z", "2026-01-16T08:30:00Z"]
        );
        assert_eq!(
            utc(daily.next_after(ms("2026-01-15T12:00:00Z")).expect("next")),
            "2026-01-16T08:30:00Z"
        );
        // CEST, +02:00.
        assert_eq!(
            utc(daily.next_after(ms("2026-07-15T12:00:00Z")).expect("next")),
            "2026-07-16T07:30:00Z"
        );
    }

    #[test]
    fn strictly_after_the_given_instant() {
        let daily = at(30, Some(9), None, None, "Europe/Berlin");
        assert_eq!(
            utc(daily.next_after(ms("2026-01-15T08:30:00Z")).expect("next")),
            "2026-01-16T08:30:00Z"
        );
        // One millisecond before still fires the same day.
        assert_eq!(
            utc(daily
                .next_after(ms("2026-01-15T08:30:00Z") - 1)
                .expect("next")),
            "2026-01-15T08:30:00Z"
        );
    }

    #[test]
    fn berlin_spring_forward_fires_when_the_gap_ends() {
        // 2026-03-29: 02:00 CET jumps to 03:00 CEST at 01:00Z; 02:30 does not exist.
        let nightly = at(30, Some(2), None, None, "Europe/Berlin");
        assert_eq!(
            firings(&nightly, "2026-03-27T12:00:00Z", 3),
            [
                "2026-03-28T01:30:00Z", // 02:30 CET
                "2026-03-29T01:00:00Z", // the gap's end, 03:00 CEST
                "2026-03-30T00:30:00Z", // 02:30 CEST
            ]
        );
    }

    #[test]
    fn berlin_fall_back_fires_once_at_the_first_occurrence() {
        // 2026-10-25: 03:00 CEST falls back to 02:00 CET at 01:00Z; 02:30 occurs at 00:30Z
        // and again at 01:30Z.
        let nightly = at(30, Some(2), None, None, "Europe/Berlin");
        assert_eq!(
            firings(&nightly, "2026-10-24T12:00:00Z", 2),
            ["2026-10-25T00:30:00Z", "2026-10-26T01:30:00Z"]
        );
        // Between the two 02:30s: the second one does not fire.
        assert_eq!(
            utc(nightly
                .next_after(ms("2026-10-25T01:00:00Z"))
                .expect("next")),
            "2026-10-26T01:30:00Z"
        );
    }

    #[test]
    fn new_york_spring_forward_fires_when_the_gap_ends() {
        // 2026-03-08: 02:00 EST jumps to 03:00 EDT at 07:00Z.
        let nightly = at(30, Some(2), None, None, "America/New_York");
        assert_eq!(
            firings(&nightly, "2026-03-07T12:00:00Z", 2),
            [
                "2026-03-08T07:00:00Z", // the gap's end, 03:00 EDT
                "2026-03-09T06:30:00Z", // 02:30 EDT
            ]
        );
    }

    #[test]
    fn new_york_fall_back_fires_once_at_the_first_occurrence() {
        // 2026-11-01: 02:00 EDT falls back to 01:00 EST at 06:00Z; 01:30 occurs at 05:30Z
        // (EDT) and again at 06:30Z (EST).
        let nightly = at(30, Some(1), None, None, "America/New_York");
        assert_eq!(
            firings(&nightly, "2026-10-31T12:00:00Z", 2),
            ["2026-11-01T05:30:00Z", "2026-11-02T06:30:00Z"]
        );
        assert_eq!(
            utc(nightly
                .next_after(ms("2026-11-01T06:00:00Z"))
                .expect("next")),
            "2026-11-02T06:30:00Z"
        );
    }

    #[test]
    fn hourly_fires_at_both_real_hours_of_a_fall_back() {
        let hourly = at(15, None, None, None, "America/New_York");
        assert_eq!(
            firings(&hourly, "2026-11-01T04:00:00Z", 4),
            [
                "2026-11-01T04:15:00Z", // 00:15 EDT
                "2026-11-01T05:15:00Z", // 01:15 EDT
                "2026-11-01T06:15:00Z", // 01:15 EST
                "2026-11-01T07:15:00Z", // 02:15 EST
            ]
        );
        // Over a whole day around the transition: strictly increasing (checked by `firings`),
        // an hour apart, 25 firings on the 25-hour local day.
        let day = firings(&hourly, "2026-11-01T04:00:00Z", 25);
        let mut unique = day.clone();
        unique.dedup();
        assert_eq!(unique.len(), 25);
        assert_eq!(day.last().map(String::as_str), Some("2026-11-02T04:15:00Z"));
    }

    #[test]
    fn hourly_across_a_spring_forward_never_fires_one_instant_twice() {
        // 2026-03-08 in New York: 02:00 does not exist, and the gap's end is 03:00 EDT, which
        // is also the next hour's firing: it fires once.
        let hourly = at(0, None, None, None, "America/New_York");
        assert_eq!(
            firings(&hourly, "2026-03-08T05:30:00Z", 3),
            [
                "2026-03-08T06:00:00Z", // 01:00 EST
                "2026-03-08T07:00:00Z", // 03:00 EDT (02:00's gap end and 03:00 itself)
                "2026-03-08T08:00:00Z", // 04:00 EDT
            ]
        );
        // Berlin, minute 30: 02:30 fires at the gap's end, then 03:30 as usual.
        let half_past = at(30, None, None, None, "Europe/Berlin");
        assert_eq!(
            firings(&half_past, "2026-03-29T00:00:00Z", 3),
            [
                "2026-03-29T00:30:00Z", // 01:30 CET
                "2026-03-29T01:00:00Z", // 03:00 CEST, the end of the gap
                "2026-03-29T01:30:00Z", // 03:30 CEST
            ]
        );
    }

    #[test]
    fn day_of_week_alone_fires_on_the_next_monday() {
        // 2026-01-15 is a Thursday; the next Monday is 2026-01-19.
        let mondays = at(0, Some(9), Some(1), None, "UTC");
        assert_eq!(
            firings(&mondays, "2026-01-15T12:00:00Z", 2),
            ["2026-01-19T09:00:00Z", "2026-01-26T09:00:00Z"]
        );
    }

    #[test]
    fn day_of_month_31_skips_months_without_one() {
        let thirty_first = at(0, Some(0), None, Some(31), "UTC");
        // April has 30 days: the next 31st is in May; June has none either.
        assert_eq!(
            firings(&thirty_first, "2026-04-10T00:00:00Z", 3),
            [
                "2026-05-31T00:00:00Z",
                "2026-07-31T00:00:00Z",
                "2026-08-31T00:00:00Z",
            ]
        );
        // February, leap year or not, has no 31st.
        assert_eq!(
            utc(thirty_first
                .next_after(ms("2028-02-01T00:00:00Z"))
                .expect("next")),
            "2028-03-31T00:00:00Z"
        );
    }

    #[test]
    fn day_of_week_and_day_of_month_fire_when_either_matches() {
        // Mondays or the 15th: 2026-02-15 is a Sunday, between Mondays the 9th and the 16th.
        let either = at(0, Some(12), Some(1), Some(15), "UTC");
        assert_eq!(
            firings(&either, "2026-02-01T00:00:00Z", 4),
            [
                "2026-02-02T12:00:00Z",
                "2026-02-09T12:00:00Z",
                "2026-02-15T12:00:00Z",
                "2026-02-16T12:00:00Z",
            ]
        );
    }

    #[test]
    fn utc_hourly_and_across_a_year_end() {
        let hourly = at(45, None, None, None, "UTC");
        assert_eq!(
            firings(&hourly, "2026-06-01T10:50:00Z", 2),
            ["2026-06-01T11:45:00Z", "2026-06-01T12:45:00Z"]
        );
        let late = at(59, Some(23), None, None, "UTC");
        assert_eq!(
            utc(late.next_after(ms("2026-12-31T23:59:30Z")).expect("next")),
            "2027-01-01T23:59:00Z"
        );
    }

    #[test]
    fn every_invalid_argument_is_named() {
        let cases: [(&str, Result<WallClock, ScheduleError>); 9] = [
            ("minute", WallClock::new(-1, None, None, None, "UTC")),
            ("minute", WallClock::new(60, None, None, None, "UTC")),
            ("hour", WallClock::new(0, Some(24), None, None, "UTC")),
            ("hour", WallClock::new(0, Some(-1), None, None, "UTC")),
            ("day_of_week", WallClock::new(0, None, Some(7), None, "UTC")),
            (
                "day_of_week",
                WallClock::new(0, None, Some(-1), None, "UTC"),
            ),
            (
                "day_of_month",
                WallClock::new(0, None, None, Some(0), "UTC"),
            ),
            (
                "day_of_month",
                WallClock::new(0, None, None, Some(32), "UTC"),
            ),
            ("tz", WallClock::new(0, None, None, None, "Mars/Olympus")),
        ];
        for (argument, result) in cases {
            let error = result.expect_err(argument);
            assert_eq!(error.argument, argument, "{error}");
        }
        let error = WallClock::new(60, None, None, None, "UTC").expect_err("minute");
        assert_eq!(
            error.to_string(),
            "minute: must be between 0 and 59, got 60"
        );
        let error = WallClock::new(0, None, None, Some(32), "UTC").expect_err("day");
        assert_eq!(error.message, "must be between 1 and 31, got 32");
        let error = WallClock::new(0, None, None, None, "Mars/Olympus").expect_err("tz");
        assert!(error.message.contains("\"Mars/Olympus\""), "{error}");
        assert!(error.message.contains("unknown"), "{error}");
    }

    #[test]
    fn every_refuses_zero_and_negative_seconds() {
        for seconds in [0, -5] {
            let error = Schedule::every(seconds).expect_err("invalid");
            assert_eq!(error.argument, "seconds");
            assert!(error.message.contains(&seconds.to_string()), "{error}");
        }
        assert_eq!(
            Schedule::every(1).expect("valid"),
            Schedule::Every { seconds: 1 }
        );
    }

    #[test]
    fn every_adds_the_interval_saturating() {
        let every = Schedule::every(60).expect("valid");
        assert_eq!(every.next_after(1_000).expect("next"), 61_000);
        let huge = Schedule::every(i64::MAX).expect("valid");
        assert_eq!(huge.next_after(5).expect("next"), u64::MAX);
        // A zero interval from a foreign record is refused, not a busy loop.
        let zero = Schedule::Every { seconds: 0 };
        assert_eq!(zero.next_after(5).expect_err("zero").argument, "seconds");
    }

    #[test]
    fn schedule_at_delegates_to_the_wall_clock() {
        let daily = Schedule::At(at(30, Some(9), None, None, "Europe/Berlin"));
        assert_eq!(
            utc(daily.next_after(ms("2026-07-15T12:00:00Z")).expect("next")),
            "2026-07-16T07:30:00Z"
        );
    }

    #[test]
    fn stored_values_are_checked_again() {
        let mut bad_tz = at(0, None, None, None, "UTC");
        bad_tz.tz = "Nowhere/Atlantis".to_owned();
        assert_eq!(bad_tz.next_after(0).expect_err("tz").argument, "tz");
        let mut bad_minute = at(0, None, None, None, "UTC");
        bad_minute.minute = 99;
        assert_eq!(
            bad_minute.next_after(0).expect_err("minute").argument,
            "minute"
        );
    }

    #[test]
    fn the_end_of_the_calendar_is_an_error_not_a_panic() {
        // Jiff's instants end at 9999-12-30T22:00:00Z: the next midnight is out of reach.
        let midnight = at(0, Some(0), None, None, "UTC");
        let error = midnight
            .next_after(ms("9999-12-30T12:00:00Z"))
            .expect_err("never");
        assert_eq!(error.argument, "day_of_month");
        assert!(error.message.contains("never occurs"), "{error}");
        let error = midnight.next_after(u64::MAX).expect_err("never");
        assert_eq!(error.argument, "day_of_month");
    }

    #[test]
    fn serde_shapes_round_trip() {
        let every = Schedule::every(60).expect("valid");
        let json = serde_json::to_value(&every).expect("serializes");
        assert_eq!(json, serde_json::json!({"kind": "every", "seconds": 60}));
        assert_eq!(
            serde_json::from_value::<Schedule>(json).expect("parses"),
            every
        );

        let daily = Schedule::At(at(30, Some(9), None, None, "Europe/Berlin"));
        let json = serde_json::to_value(&daily).expect("serializes");
        assert_eq!(
            json,
            serde_json::json!({"kind": "at", "minute": 30, "hour": 9, "tz": "Europe/Berlin"})
        );
        assert_eq!(
            serde_json::from_value::<Schedule>(json).expect("parses"),
            daily
        );

        let both = Schedule::At(at(0, Some(12), Some(1), Some(15), "UTC"));
        let json = serde_json::to_string(&both).expect("serializes");
        assert_eq!(
            serde_json::from_str::<Schedule>(&json).expect("parses"),
            both
        );
    }
}
