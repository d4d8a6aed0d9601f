//! UTC timestamps in the RFC 3339 form ClawOS writes in its JSON files and
//! logs (`2024-02-24T12:34:56Z`: whole seconds, `Z`), without a calendar
//! crate for one format. Parsing and time zones are not its business.

use std::time::{SystemTime, UNIX_EPOCH};

/// Now, as `YYYY-MM-DDTHH:MM:SSZ` (a clock before 1970 reads as the epoch).
pub fn now_rfc3339() -> String {
    let seconds = SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |elapsed| elapsed.as_secs());
    rfc3339(seconds)
}

/// Today's UTC date as `YYYY-MM-DD`.
pub fn today() -> String {
    now_rfc3339()[..10].to_owned()
}

/// The date (year, month 1-12, day 1-31) of `days` since 1970-01-01:
/// Howard Hinnant's days-to-civil algorithm (proleptic Gregorian).
pub fn civil_from_days(days: i64) -> (i64, i64, i64) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let day_of_era = z - era * 146_097;
    let year_of_era = (day_of_era - day_of_era / 1460 + day_of_era / 36_524 - day_of_era / 146_096) / 365;
    let day_of_year = day_of_era - (365 * year_of_era + year_of_era / 4 - year_of_era / 100);
    let month_index = (5 * day_of_year + 2) / 153;
    let day = day_of_year - (153 * month_index + 2) / 5 + 1;
    let month = if month_index < 10 { month_index + 3 } else { month_index - 9 };
    (year_of_era + era * 400 + i64::from(month <= 2), month, day)
}

/// Days since 1970-01-01 of `YYYY-MM-DD` (the inverse of
/// [`civil_from_days`]); `None` when it is not such a date.
pub fn days_from_date(date: &str) -> Option<i64> {
    let bytes = date.as_bytes();
    if bytes.len() != 10
        || bytes[4] != b'-'
        || bytes[7] != b'-'
        || !date.bytes().enumerate().all(|(i, b)| i == 4 || i == 7 || b.is_ascii_digit())
    {
        return None;
    }
    let (year, month, day): (i64, i64, i64) =
        (date[..4].parse().ok()?, date[5..7].parse().ok()?, date[8..].parse().ok()?);
    if !(1..=12).contains(&month) || !(1..=31).contains(&day) {
        return None;
    }
    let year_of_march = if month <= 2 { year - 1 } else { year };
    let era = year_of_march.div_euclid(400);
    let year_of_era = year_of_march - era * 400;
    let day_of_year = (153 * (if month > 2 { month - 3 } else { month + 9 }) + 2) / 5 + day - 1;
    let day_of_era = year_of_era * 365 + year_of_era / 4 - year_of_era / 100 + day_of_year;
    let days = era * 146_097 + day_of_era - 719_468;
    // 2026-02-31 is no date: it would come back as March.
    (civil_from_days(days) == (year, month, day)).then_some(days)
}

/// `seconds` since the Unix epoch as `YYYY-MM-DDTHH:MM:SSZ`.
pub fn rfc3339(seconds: u64) -> String {
    let second_of_day = seconds % 86_400;
    let (year, month, day) = civil_from_days((seconds / 86_400) as i64);
    format!(
        "{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}Z",
        second_of_day / 3600,
        second_of_day / 60 % 60,
        second_of_day % 60
    )
}

#[cfg(test)]
mod tests {
    #[test]
    fn formats_known_instants() {
        assert_eq!(super::rfc3339(0), "1970-01-01T00:00:00Z");
        assert_eq!(super::rfc3339(1_708_778_096), "2024-02-24T12:34:56Z");
        assert_eq!(super::rfc3339(951_782_400), "2000-02-29T00:00:00Z");
    }

    #[test]
    fn dates_round_trip_and_non_dates_are_refused() {
        for days in [0, 11_016, 19_777, 20_416, -1] {
            let (y, m, d) = super::civil_from_days(days);
            assert_eq!(super::days_from_date(&format!("{y:04}-{m:02}-{d:02}")), Some(days));
        }
        for bad in ["2026-02-31", "2026-13-01", "2026-1-01", "20260101xx", "abcd-ef-gh"] {
            assert_eq!(super::days_from_date(bad), None, "{bad}");
        }
    }

    #[test]
    fn now_has_the_shape() {
        let now = super::now_rfc3339();
        assert_eq!((now.len(), &now[4..5], &now[10..11], &now[19..]), (20, "-", "T", "Z"));
        assert_eq!(super::today().len(), 10);
    }
}
