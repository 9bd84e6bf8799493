//! A strict parser of the Prometheus text exposition format (0.0.4), the
//! way a scraper reads `/metrics`: `# HELP` / `# TYPE` lines, samples with
//! optional labels, families not interleaved, histogram series consistent.
//! Stricter than Prometheus in one way: every family must declare a TYPE.

use std::collections::BTreeMap;

#[derive(Clone, Debug, PartialEq)]
pub struct Sample {
    /// Full series name (`x_bucket`, `x_sum`, ...).
    pub name: String,
    pub labels: BTreeMap<String, String>,
    pub value: f64,
}

#[derive(Clone, Debug, PartialEq)]
pub struct Family {
    pub name: String,
    pub kind: String,
    pub help: Option<String>,
    pub samples: Vec<Sample>,
}

impl Family {
    /// The value of the series `name` with exactly `labels`.
    pub fn value(&self, name: &str, labels: &[(&str, &str)]) -> Option<f64> {
        let want: BTreeMap<String, String> = labels
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect();
        self.samples
            .iter()
            .find(|s| s.name == name && s.labels == want)
            .map(|s| s.value)
    }
}

/// Families in order of appearance, keyed by name.
pub fn parse(text: &str) -> Result<BTreeMap<String, Family>, String> {
    let mut families: BTreeMap<String, Family> = BTreeMap::new();
    let mut order: Vec<String> = Vec::new();
    let mut closed: Vec<String> = Vec::new();
    let mut current: Option<String> = None;
    if !text.is_empty() && !text.ends_with('\n') {
        return Err("exposition must end with a newline".into());
    }
    for (n, line) in text.lines().enumerate() {
        let at = |e: String| format!("line {}: {e}: {line:?}", n + 1);
        if line.is_empty() {
            continue;
        }
        if let Some(rest) = line.strip_prefix('#') {
            let rest = rest.strip_prefix(' ').unwrap_or(rest);
            let mut parts = rest.splitn(3, ' ');
            let keyword = parts.next().unwrap_or_default();
            if keyword != "HELP" && keyword != "TYPE" {
                continue; // a comment
            }
            let name = parts
                .next()
                .ok_or_else(|| at("missing metric name".into()))?;
            check_metric_name(name).map_err(at)?;
            let arg = parts
                .next()
                .ok_or_else(|| at(format!("{keyword} without text")))?;
            if current.as_deref() != Some(name) {
                if closed.iter().any(|c| c == name) {
                    return Err(at(format!("family {name} appears twice")));
                }
                if let Some(prev) = current.take() {
                    closed.push(prev);
                }
                current = Some(name.to_owned());
            }
            let fam = families.entry(name.to_owned()).or_insert_with(|| {
                order.push(name.to_owned());
                Family {
                    name: name.to_owned(),
                    kind: String::new(),
                    help: None,
                    samples: Vec::new(),
                }
            });
            if keyword == "HELP" {
                if fam.help.is_some() {
                    return Err(at("second HELP".into()));
                }
                fam.help = Some(unescape(arg, false).map_err(at)?);
            } else {
                if !fam.kind.is_empty() {
                    return Err(at("second TYPE".into()));
                }
                if !fam.samples.is_empty() {
                    return Err(at("TYPE after samples".into()));
                }
                if !["counter", "gauge", "histogram", "summary", "untyped"].contains(&arg) {
                    return Err(at(format!("unknown type {arg}")));
                }
                fam.kind = arg.to_owned();
            }
            continue;
        }
        let sample = parse_sample(line).map_err(at)?;
        let family = current
            .clone()
            .filter(|f| belongs(&sample.name, f, &families[f].kind))
            .ok_or_else(|| at("sample outside its family's TYPE block".into()))?;
        families
            .get_mut(&family)
            .expect("current family exists")
            .samples
            .push(sample);
    }
    for fam in families.values() {
        if fam.kind.is_empty() {
            return Err(format!("family {} has no TYPE", fam.name));
        }
        if fam.kind == "histogram" {
            check_histogram(fam)?;
        }
    }
    Ok(families)
}

fn belongs(series: &str, family: &str, kind: &str) -> bool {
    if series == family {
        return kind != "histogram";
    }
    let suffixes: &[&str] = match kind {
        "histogram" => &["_bucket", "_sum", "_count"],
        "summary" => &["_sum", "_count"],
        _ => &[],
    };
    suffixes
        .iter()
        .any(|s| series.strip_prefix(family) == Some(s))
}

fn check_histogram(fam: &Family) -> Result<(), String> {
    // Group buckets by their labels without `le`.
    let mut series: BTreeMap<BTreeMap<String, String>, Vec<(f64, f64)>> = BTreeMap::new();
    for s in fam.samples.iter().filter(|s| s.name.ends_with("_bucket")) {
        let mut labels = s.labels.clone();
        let le = labels
            .remove("le")
            .ok_or_else(|| format!("{}: bucket without le", fam.name))?;
        series
            .entry(labels)
            .or_default()
            .push((parse_value(&le)?, s.value));
    }
    for (labels, buckets) in series {
        for pair in buckets.windows(2) {
            if pair[1].0 <= pair[0].0 || pair[1].1 < pair[0].1 {
                return Err(format!("{}: buckets not cumulative: {pair:?}", fam.name));
            }
        }
        let last = buckets.last().expect("grouped from at least one bucket");
        if last.0 != f64::INFINITY {
            return Err(format!("{}: no +Inf bucket", fam.name));
        }
        let count = fam
            .samples
            .iter()
            .find(|s| s.name == format!("{}_count", fam.name) && s.labels == labels)
            .ok_or_else(|| format!("{}: no _count for {labels:?}", fam.name))?;
        if count.value != last.1 {
            return Err(format!("{}: _count differs from +Inf bucket", fam.name));
        }
    }
    Ok(())
}

fn check_metric_name(name: &str) -> Result<(), String> {
    let mut chars = name.chars();
    let ok = chars
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_' || c == ':')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_' || c == ':');
    if ok {
        Ok(())
    } else {
        Err(format!("invalid metric name {name:?}"))
    }
}

fn check_label_name(name: &str) -> Result<(), String> {
    let mut chars = name.chars();
    let ok = chars
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_');
    if ok {
        Ok(())
    } else {
        Err(format!("invalid label name {name:?}"))
    }
}

fn parse_sample(line: &str) -> Result<Sample, String> {
    let name_end = line
        .find(['{', ' '])
        .ok_or_else(|| "sample without value".to_owned())?;
    let name = &line[..name_end];
    check_metric_name(name)?;
    let mut labels = BTreeMap::new();
    let mut rest = &line[name_end..];
    if let Some(inner) = rest.strip_prefix('{') {
        let mut s = inner;
        loop {
            if let Some(after) = s.strip_prefix('}') {
                rest = after;
                break;
            }
            let eq = s.find('=').ok_or("label without =")?;
            let lname = &s[..eq];
            check_label_name(lname)?;
            let value_start = s[eq + 1..]
                .strip_prefix('"')
                .ok_or("label value not quoted")?;
            let (value, after) = quoted(value_start)?;
            if labels.insert(lname.to_owned(), value).is_some() {
                return Err(format!("duplicate label {lname}"));
            }
            s = match after.strip_prefix(',') {
                Some(a) => a,
                None if after.starts_with('}') => after,
                None => return Err("expected , or } after a label".into()),
            };
        }
    }
    let rest = rest
        .strip_prefix(' ')
        .ok_or("expected a space before the value")?;
    let mut fields = rest.split(' ');
    let value = parse_value(fields.next().unwrap_or_default())?;
    if let Some(ts) = fields.next() {
        ts.parse::<i64>()
            .map_err(|_| format!("invalid timestamp {ts:?}"))?;
    }
    if fields.next().is_some() {
        return Err("trailing fields".into());
    }
    Ok(Sample {
        name: name.to_owned(),
        labels,
        value,
    })
}

/// Reads a label value up to its closing quote.
fn quoted(s: &str) -> Result<(String, &str), String> {
    let mut out = String::new();
    let mut chars = s.char_indices();
    while let Some((i, c)) = chars.next() {
        match c {
            '"' => return Ok((out, &s[i + 1..])),
            '\\' => match chars.next() {
                Some((_, '\\')) => out.push('\\'),
                Some((_, '"')) => out.push('"'),
                Some((_, 'n')) => out.push('\n'),
                other => return Err(format!("invalid escape {other:?}")),
            },
            '\n' => return Err("newline in label value".into()),
            c => out.push(c),
        }
    }
    Err("unterminated label value".into())
}

fn unescape(s: &str, quotes: bool) -> Result<String, String> {
    let mut out = String::new();
    let mut chars = s.chars();
    while let Some(c) = chars.next() {
        if c != '\\' {
            out.push(c);
            continue;
        }
        match chars.next() {
            Some('\\') => out.push('\\'),
            Some('n') => out.push('\n'),
            Some('"') if quotes => out.push('"'),
            other => return Err(format!("invalid escape {other:?}")),
        }
    }
    Ok(out)
}

fn parse_value(s: &str) -> Result<f64, String> {
    match s {
        "+Inf" | "Inf" => Ok(f64::INFINITY),
        "-Inf" => Ok(f64::NEG_INFINITY),
        "NaN" => Ok(f64::NAN),
        _ => s.parse::<f64>().map_err(|_| format!("invalid value {s:?}")),
    }
}
