//! LOC rdata (RFC 1876), typed as its wire fields and printed the way BIND
//! prints it: every field present (size, horizontal and vertical precision
//! default to 1m, 10000m, 10m), seconds with three decimals, altitude with
//! two, sizes as BIND's one-digit mantissa and power of ten (so `1234m` is
//! served as `1000m`, and written that way here too). Pure.

use std::fmt;

/// Latitude and longitude are stored as 2^31 plus thousandths of an arc
/// second; altitude as centimetres above 100,000 m below the reference.
const EQUATOR: i64 = 1 << 31;
const ALTITUDE_BASE_CM: i64 = 10_000_000;
const MAX_ALTITUDE_CM: i64 = u32::MAX as i64 - ALTITUDE_BASE_CM;
/// 90,000,000 m: the largest size a mantissa of 9 and exponent of 9 holds.
const MAX_SIZE_CM: u64 = 9_000_000_000;
/// RFC 1876's defaults: 1m size, 10km horizontal, 10m vertical precision.
const DEFAULT_SIZE: u8 = 0x12;
const DEFAULT_HORIZ: u8 = 0x16;
const DEFAULT_VERT: u8 = 0x13;

/// LOC rdata in wire form (version 0).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Loc {
    pub latitude: u32,
    pub longitude: u32,
    pub altitude: u32,
    pub size: u8,
    pub horiz_pre: u8,
    pub vert_pre: u8,
}

/// A decimal with at most `places` fraction digits, scaled to an integer
/// (`"23.5"`, 3 -> 23500). No sign.
fn fixed(text: &str, places: u32) -> Option<u64> {
    let (int, frac) = text.split_once('.').unwrap_or((text, ""));
    if int.is_empty()
        || !int.bytes().all(|b| b.is_ascii_digit())
        || frac.len() > places as usize
        || !frac.bytes().all(|b| b.is_ascii_digit())
        || (text.contains('.') && frac.is_empty())
        || int.len() > 12
    {
        return None;
    }
    let scale = 10u64.pow(places);
    let frac_val = if frac.is_empty() {
        0
    } else {
        frac.parse::<u64>().ok()? * 10u64.pow(places - frac.len() as u32)
    };
    Some(int.parse::<u64>().ok()? * scale + frac_val)
}

fn meters(text: &str) -> Option<&str> {
    Some(text.strip_suffix('m').unwrap_or(text))
}

/// A size or precision in metres -> BIND's mantissa/exponent byte
/// (truncating, like BIND).
fn size_byte(text: &str) -> Result<u8, String> {
    let cm = meters(text)
        .and_then(|t| fixed(t, 2))
        .filter(|cm| *cm <= MAX_SIZE_CM)
        .ok_or_else(|| format!("has a bad size or precision {text:?} (0 to 90000000m)"))?;
    let mut exp = 0u8;
    let mut man = cm;
    while man >= 10 {
        man /= 10;
        exp += 1;
    }
    Ok(((man as u8) << 4) | exp)
}

fn size_text(b: u8) -> String {
    let (man, exp) = (u64::from((b >> 4) % 10), u32::from((b & 0x0f) % 10));
    if exp >= 2 {
        format!("{}m", man * 10u64.pow(exp - 2))
    } else {
        format!("0.{:02}m", man * 10u64.pow(exp))
    }
}

/// `d [m [s]] H` from the front of `fields`; returns thousandths of an arc
/// second, signed by the hemisphere.
fn angle(
    fields: &mut std::slice::Iter<'_, &str>,
    pos: u8,
    neg: u8,
    max_deg: u64,
) -> Result<i64, String> {
    let hemi = |f: &str| match f.as_bytes() {
        [h] if h.eq_ignore_ascii_case(&pos) => Some(1),
        [h] if h.eq_ignore_ascii_case(&neg) => Some(-1),
        _ => None,
    };
    let what = format!("{}/{}", pos as char, neg as char);
    let bad = || format!("has a bad {what} coordinate");
    let mut parts: Vec<&str> = Vec::new();
    let sign = loop {
        let f = fields.next().ok_or_else(bad)?;
        if let Some(s) = hemi(f) {
            break s;
        }
        parts.push(f);
        if parts.len() > 3 {
            return Err(bad());
        }
    };
    let deg = parts.first().and_then(|d| fixed(d, 0)).ok_or_else(bad)?;
    let min = match parts.get(1) {
        Some(m) => fixed(m, 0).filter(|m| *m < 60).ok_or_else(bad)?,
        None => 0,
    };
    let sec = match parts.get(2) {
        Some(s) => fixed(s, 3).filter(|s| *s < 60_000).ok_or_else(bad)?,
        None => 0,
    };
    let total = ((deg * 60 + min) * 60) * 1000 + sec;
    if total > max_deg * 3_600_000 {
        return Err(bad());
    }
    Ok(sign * total as i64)
}

fn angle_text(f: &mut fmt::Formatter<'_>, wire: u32, pos: char, neg: char) -> fmt::Result {
    let v = i64::from(wire) - EQUATOR;
    let (hemi, v) = if v >= 0 { (pos, v) } else { (neg, -v) };
    let (ms, v) = (v % 1000, v / 1000);
    let (s, v) = (v % 60, v / 60);
    let (m, d) = (v % 60, v / 60);
    write!(f, "{d} {m} {s}.{ms:03} {hemi}")
}

impl Loc {
    /// Parses `d [m [s]] N|S d [m [s]] E|W alt[m] [size[m] [hp[m] [vp[m]]]]`.
    pub fn parse(fields: &[&str]) -> Result<Loc, String> {
        let mut it = fields.iter();
        let lat = angle(&mut it, b'N', b'S', 90)?;
        let lon = angle(&mut it, b'E', b'W', 180)?;
        let alt_text = it.next().ok_or("has no altitude")?;
        let (neg, digits) = match alt_text.strip_prefix('-') {
            Some(d) => (true, d),
            None => (false, *alt_text),
        };
        let alt_cm = meters(digits)
            .and_then(|t| fixed(t, 2))
            .map(|cm| if neg { -(cm as i64) } else { cm as i64 })
            .filter(|cm| (-ALTITUDE_BASE_CM..=MAX_ALTITUDE_CM).contains(cm))
            .ok_or_else(|| format!("has a bad altitude {alt_text:?} (-100000m to 42849672.95m)"))?;
        let mut sizes = [DEFAULT_SIZE, DEFAULT_HORIZ, DEFAULT_VERT];
        for s in &mut sizes {
            match it.next() {
                Some(t) => *s = size_byte(t)?,
                None => break,
            }
        }
        if it.next().is_some() {
            return Err("has extra fields after the vertical precision".into());
        }
        Ok(Loc {
            latitude: (EQUATOR + lat) as u32,
            longitude: (EQUATOR + lon) as u32,
            altitude: (ALTITUDE_BASE_CM + alt_cm) as u32,
            size: sizes[0],
            horiz_pre: sizes[1],
            vert_pre: sizes[2],
        })
    }
}

impl fmt::Display for Loc {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        angle_text(f, self.latitude, 'N', 'S')?;
        f.write_str(" ")?;
        angle_text(f, self.longitude, 'E', 'W')?;
        let alt = i64::from(self.altitude) - ALTITUDE_BASE_CM;
        let sign = if alt < 0 { "-" } else { "" };
        let alt = alt.abs();
        write!(
            f,
            " {sign}{}.{:02}m {} {} {}",
            alt / 100,
            alt % 100,
            size_text(self.size),
            size_text(self.horiz_pre),
            size_text(self.vert_pre)
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p(s: &str) -> Result<String, String> {
        let f: Vec<&str> = s.split_whitespace().collect();
        Loc::parse(&f).map(|l| l.to_string())
    }

    /// Inputs and what `dig` printed for them (BIND 9.18.49 and 9.20.30).
    #[test]
    fn prints_what_dig_prints() {
        for (input, dig) in [
            (
                "52 22 23.000 N 4 53 32.000 E -2.00m",
                "52 22 23.000 N 4 53 32.000 E -2.00m 1m 10000m 10m",
            ),
            (
                "52 22 23 N 4 53 32 E -2m 1234m 0.5m 0.01m",
                "52 22 23.000 N 4 53 32.000 E -2.00m 1000m 0.50m 0.01m",
            ),
            (
                "52 22 23 N 4 53 32 E 42849672.95m 90000000m 0m 15m",
                "52 22 23.000 N 4 53 32.000 E 42849672.95m 90000000m 0.00m 10m",
            ),
            (
                "0 0 0 N 0 0 0 E -100000m 0.99m 1.5m 99m",
                "0 0 0.000 N 0 0 0.000 E -100000.00m 0.90m 1m 90m",
            ),
            (
                "90 S 180 W 0.5m",
                "90 0 0.000 S 180 0 0.000 W 0.50m 1m 10000m 10m",
            ),
            (
                "1 2 3.001 N 1 2 3.999 E 0.05m",
                "1 2 3.001 N 1 2 3.999 E 0.05m 1m 10000m 10m",
            ),
            (
                "52 N 4 E 0m",
                "52 0 0.000 N 4 0 0.000 E 0.00m 1m 10000m 10m",
            ),
            (
                "0 S 0 W -0.5",
                "0 0 0.000 N 0 0 0.000 E -0.50m 1m 10000m 10m",
            ),
        ] {
            assert_eq!(p(input).unwrap(), dig, "{input}");
            assert_eq!(p(dig).unwrap(), dig, "{dig} must print as itself");
        }
    }

    #[test]
    fn refuses_what_bind_refuses() {
        for bad in [
            "91 N 0 E 0m",
            "90 0 1 N 0 E 0m",
            "0 N 181 E 0m",
            "0 60 N 0 E 0m",
            "0 0 60 N 0 E 0m",
            "1 2 3.0004 N 1 E 0m",
            "1 N 1 E 0.005m",
            "1 N 1 E -100000.01m",
            "1 N 1 E 42849672.96m",
            "1 N 1 E 0m 90000001m",
            "1 N 1 E 0m 1m 1m 1m 1m",
            "1 N 1 E",
            "1 X 1 E 0m",
            "1 N 1 E 1.m",
            "1 N 1 E +1m",
        ] {
            assert!(p(bad).is_err(), "{bad} must be refused");
        }
    }
}
