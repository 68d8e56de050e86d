//! ISO-8601 durations and instants as the seed service (Java's `Duration` and `Instant`) wrote them:
//! `PT2M1.354449272S`, `2023-01-30T16:35:15.659539692Z`.

use std::time::{Duration, SystemTime};

/// Parse `PnDTnHnMn.nS` (weeks `PnW` too). Years and months are refused: their length varies.
pub fn parse_duration(s: &str) -> Result<Duration, String> {
    let bad =
        |why: &str| format!("{s:?} is not an ISO-8601 duration such as PT10S or PT1M30S ({why})");
    let rest = s
        .trim()
        .strip_prefix(['P', 'p'])
        .ok_or_else(|| bad("it must start with P"))?;
    if rest.is_empty() {
        return Err(bad("nothing after P"));
    }
    let (date, time) = match rest.split_once(['T', 't']) {
        Some((d, t)) => {
            if t.is_empty() {
                return Err(bad("nothing after T"));
            }
            (d, Some(t))
        }
        None => (rest, None),
    };
    let mut total = 0f64;
    let mut parse_part = |part: &str, units: &[(char, f64)]| -> Result<(), String> {
        let mut number = String::new();
        let mut last_unit = None::<usize>;
        for c in part.chars() {
            if c.is_ascii_digit() || c == '.' || c == ',' {
                number.push(if c == ',' { '.' } else { c });
                continue;
            }
            let upper = c.to_ascii_uppercase();
            let Some(pos) = units.iter().position(|(u, _)| *u == upper) else {
                return Err(bad(&format!("unexpected {c:?}")));
            };
            if last_unit.is_some_and(|l| pos <= l) {
                return Err(bad("units out of order"));
            }
            last_unit = Some(pos);
            let v: f64 = number
                .parse()
                .map_err(|_| bad(&format!("no number before {c:?}")))?;
            total += v * units[pos].1;
            number.clear();
        }
        if !number.is_empty() {
            return Err(bad("a number without a unit"));
        }
        Ok(())
    };
    if date.contains(['Y', 'y']) || (date.contains(['M', 'm'])) {
        return Err(bad("years and months have no fixed length"));
    }
    parse_part(date, &[('W', 604_800.0), ('D', 86_400.0)])?;
    if let Some(t) = time {
        parse_part(t, &[('H', 3600.0), ('M', 60.0), ('S', 1.0)])?;
    }
    if !total.is_finite() || total > 1e12 {
        return Err(bad("too long"));
    }
    Ok(Duration::from_secs_f64(total))
}

/// Java's `Duration.toString()`: hours, minutes, seconds with the fraction's trailing zeros removed.
pub fn format_duration(d: Duration) -> String {
    let secs = d.as_secs();
    let nanos = d.subsec_nanos();
    if secs == 0 && nanos == 0 {
        return "PT0S".into();
    }
    let (h, m, s) = (secs / 3600, (secs % 3600) / 60, secs % 60);
    let mut out = String::from("PT");
    if h > 0 {
        out.push_str(&format!("{h}H"));
    }
    if m > 0 {
        out.push_str(&format!("{m}M"));
    }
    if s > 0 || nanos > 0 {
        out.push_str(&s.to_string());
        if nanos > 0 {
            let frac = format!("{nanos:09}");
            out.push('.');
            out.push_str(frac.trim_end_matches('0'));
        }
        out.push('S');
    }
    out
}

/// An instant in UTC with nanoseconds, as Java's `Instant.toString()` writes it.
pub fn format_instant(t: SystemTime) -> String {
    humantime::format_rfc3339_nanos(t).to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_round_trip() {
        assert_eq!(parse_duration("PT10S").unwrap(), Duration::from_secs(10));
        assert_eq!(parse_duration("PT1M").unwrap(), Duration::from_secs(60));
        assert_eq!(
            parse_duration("PT1H2M3.5S").unwrap(),
            Duration::from_secs_f64(3723.5)
        );
        assert_eq!(parse_duration("P1D").unwrap(), Duration::from_secs(86_400));
        assert_eq!(
            parse_duration("PT0.25S").unwrap(),
            Duration::from_millis(250)
        );
        for bad in ["10s", "P", "PT", "P1M", "PT5", "PTS", "PT1S2M", "P1Y"] {
            assert!(parse_duration(bad).is_err(), "{bad}");
        }
        assert_eq!(
            format_duration(Duration::from_nanos(121_354_449_272)),
            "PT2M1.354449272S"
        );
        assert_eq!(format_duration(Duration::ZERO), "PT0S");
        assert_eq!(format_duration(Duration::from_secs(3600)), "PT1H");
        assert_eq!(format_duration(Duration::from_millis(1500)), "PT1.5S");
        for d in [
            Duration::from_millis(1500),
            Duration::from_secs(3723),
            Duration::from_nanos(7),
        ] {
            assert_eq!(
                parse_duration(&format_duration(d)).unwrap().as_micros(),
                d.as_micros()
            );
        }
    }

    #[test]
    fn instants_are_utc_with_nanoseconds() {
        let t = std::time::UNIX_EPOCH + Duration::from_nanos(1_675_096_515_659_539_692);
        assert_eq!(format_instant(t), "2023-01-30T16:35:15.659539692Z");
    }
}
