//! Parsing `--to-datetime` values into epoch milliseconds, without a
//! calendar library: RFC 3339 (`2024-05-01T12:00:00Z`, `...+02:00`,
//! fractional seconds; a missing zone means UTC, as Kafka's tool documents
//! its format) or a plain number of epoch milliseconds; and the time now.

use crate::error::ToolError;

/// The time now, in milliseconds since the Unix epoch.
pub fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |elapsed| {
            i64::try_from(elapsed.as_millis()).unwrap_or(i64::MAX)
        })
}

/// Parses a datetime into milliseconds since the Unix epoch.
pub fn parse_epoch_ms(text: &str) -> Result<i64, ToolError> {
    if let Ok(epoch_ms) = text.parse::<i64>() {
        return Ok(epoch_ms);
    }
    parse_rfc3339(text.trim()).ok_or_else(|| ToolError::InvalidArgument {
        what: "--to-datetime",
        text: text.to_owned(),
        expected: "YYYY-MM-DDTHH:MM:SS[.fff][Z|+HH:MM] or epoch milliseconds",
    })
}

fn parse_rfc3339(text: &str) -> Option<i64> {
    let (date, rest) = text
        .split_once(['T', 't', ' '])
        .unwrap_or((text, "00:00:00"));
    let days = parse_date(date)?;
    let (time, zone_offset_s) = split_zone(rest)?;
    let seconds_of_day_ms = parse_time_ms(time)?;
    days.checked_mul(86_400_000)?
        .checked_add(seconds_of_day_ms)?
        .checked_sub(zone_offset_s.checked_mul(1000)?)
}

fn parse_date(date: &str) -> Option<i64> {
    let mut parts = date.split('-');
    let year: i64 = number(parts.next()?, 4)?;
    let month: i64 = number(parts.next()?, 2)?;
    let day: i64 = number(parts.next()?, 2)?;
    if parts.next().is_some()
        || !(1..=12).contains(&month)
        || day < 1
        || day > days_in_month(year, month)
    {
        return None;
    }
    Some(days_from_civil(year, month, day))
}

/// Splits `HH:MM:SS[.fff]` from its zone; returns the zone offset in seconds.
fn split_zone(rest: &str) -> Option<(&str, i64)> {
    if let Some(time) = rest.strip_suffix(['Z', 'z']) {
        return Some((time, 0));
    }
    match rest.rfind(['+', '-']) {
        Some(at) => {
            let (time, zone) = rest.split_at(at);
            let sign = if zone.starts_with('-') { -1 } else { 1 };
            let (hours, minutes) = zone.get(1..)?.split_once(':')?;
            let hours: i64 = number(hours, 2)?;
            let minutes: i64 = number(minutes, 2)?;
            if hours > 23 || minutes > 59 {
                return None;
            }
            Some((time, sign * (hours * 3600 + minutes * 60)))
        }
        None => Some((rest, 0)),
    }
}

fn parse_time_ms(time: &str) -> Option<i64> {
    let (whole, fraction) = time.split_once('.').unwrap_or((time, ""));
    let mut parts = whole.split(':');
    let hours: i64 = number(parts.next()?, 2)?;
    let minutes: i64 = number(parts.next()?, 2)?;
    let seconds: i64 = match parts.next() {
        Some(seconds) => number(seconds, 2)?,
        None => 0,
    };
    if parts.next().is_some() || hours > 23 || minutes > 59 || seconds > 60 {
        return None;
    }
    let millis = if fraction.is_empty() {
        0
    } else {
        if !fraction.bytes().all(|byte| byte.is_ascii_digit()) {
            return None;
        }
        let digits: String = fraction.chars().chain("000".chars()).take(3).collect();
        digits.parse::<i64>().ok()?
    };
    Some(((hours * 60 + minutes) * 60 + seconds) * 1000 + millis)
}

fn number(text: &str, digits: usize) -> Option<i64> {
    if text.len() != digits || !text.bytes().all(|byte| byte.is_ascii_digit()) {
        return None;
    }
    text.parse().ok()
}

fn is_leap(year: i64) -> bool {
    (year % 4 == 0 && year % 100 != 0) || year % 400 == 0
}

fn days_in_month(year: i64, month: i64) -> i64 {
    match month {
        2 if is_leap(year) => 29,
        2 => 28,
        4 | 6 | 9 | 11 => 30,
        _ => 31,
    }
}

/// Days since 1970-01-01 of a proleptic Gregorian date (Howard Hinnant's
/// `days_from_civil` algorithm).
fn days_from_civil(year: i64, month: i64, day: i64) -> i64 {
    let year = if month <= 2 { year - 1 } else { year };
    let era = year.div_euclid(400);
    let year_of_era = year - era * 400;
    let shifted_month = (month + 9) % 12;
    let day_of_year = (153 * shifted_month + 2) / 5 + day - 1;
    let day_of_era = year_of_era * 365 + year_of_era / 4 - year_of_era / 100 + day_of_year;
    era * 146_097 + day_of_era - 719_468
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rfc3339_with_zones_and_fractions() {
        assert_eq!(parse_epoch_ms("1970-01-01T00:00:00Z").expect("valid"), 0);
        assert_eq!(
            parse_epoch_ms("2024-05-01T12:30:15.250Z").expect("valid"),
            1_714_566_615_250
        );
        assert_eq!(
            parse_epoch_ms("2024-05-01T14:30:15.250+02:00").expect("valid"),
            1_714_566_615_250
        );
        assert_eq!(
            parse_epoch_ms("2024-05-01T12:30:15.25").expect("valid"),
            1_714_566_615_250
        );
        assert_eq!(
            parse_epoch_ms("2000-02-29").expect("valid"),
            951_782_400_000
        );
        assert_eq!(
            parse_epoch_ms("1969-12-31T23:59:59Z").expect("valid"),
            -1000
        );
    }

    #[test]
    fn epoch_milliseconds_pass_through() {
        assert_eq!(
            parse_epoch_ms("1714566615250").expect("valid"),
            1_714_566_615_250
        );
    }

    #[test]
    fn invalid_dates_are_errors() {
        for text in [
            "2023-02-29T00:00:00Z",
            "2024-13-01T00:00:00Z",
            "2024-05-01T25:00:00Z",
            "yesterday",
            "2024-5-1",
            "2024-05-01T12:00:00+2",
        ] {
            assert!(parse_epoch_ms(text).is_err(), "{text}");
        }
    }
}
