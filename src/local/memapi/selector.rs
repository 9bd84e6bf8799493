//! Label selectors (`a=b`, `a==b`, `a!=b`, `a in (x,y)`, `a notin (x,y)`,
//! `a`, `!a`) and field selectors (`path=value`, `path!=value`, on any dotted
//! JSON path such as `metadata.name`), parsed from the query string and
//! matched against stored objects. Pure functions.

use serde_json::Value;

#[derive(Clone, Debug, PartialEq, Eq)]
enum Op {
    Eq(String),
    NotEq(String),
    In(Vec<String>),
    NotIn(Vec<String>),
    Exists,
    NotExists,
}

#[derive(Clone, Debug, PartialEq, Eq)]
struct Requirement {
    key: String,
    op: Op,
}

/// A parsed label selector; the empty selector matches everything.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct LabelSelector(Vec<Requirement>);

impl LabelSelector {
    pub(crate) fn parse(s: &str) -> Result<Self, String> {
        let mut reqs = Vec::new();
        for term in split_top_level(s) {
            let term = term.trim();
            if term.is_empty() {
                continue;
            }
            reqs.push(parse_requirement(term)?);
        }
        Ok(Self(reqs))
    }

    pub(crate) fn matches(&self, obj: &Value) -> bool {
        let labels = super::meta::at(obj, "/metadata/labels");
        let get = |k: &str| labels.and_then(|l| l.get(k)).and_then(Value::as_str);
        self.0.iter().all(|r| {
            let v = get(&r.key);
            match &r.op {
                Op::Eq(x) => v == Some(x.as_str()),
                // Like the real server, `!=` and `notin` also match objects
                // that lack the label entirely.
                Op::NotEq(x) => v != Some(x.as_str()),
                Op::In(xs) => v.is_some_and(|v| xs.iter().any(|x| x == v)),
                Op::NotIn(xs) => !v.is_some_and(|v| xs.iter().any(|x| x == v)),
                Op::Exists => v.is_some(),
                Op::NotExists => v.is_none(),
            }
        })
    }
}

/// Splits on commas that are not inside a `( ... )` value set.
fn split_top_level(s: &str) -> Vec<&str> {
    let mut out = Vec::new();
    let (mut depth, mut start) = (0i32, 0);
    for (i, c) in s.char_indices() {
        match c {
            '(' => depth += 1,
            ')' => depth -= 1,
            ',' if depth == 0 => {
                out.push(&s[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    out.push(&s[start..]);
    out
}

fn parse_requirement(term: &str) -> Result<Requirement, String> {
    let bad = || format!("unable to parse requirement: {term:?}");
    let req = |key: &str, op| -> Result<Requirement, String> {
        let key = key.trim();
        if key.is_empty() || key.contains(char::is_whitespace) {
            return Err(bad());
        }
        Ok(Requirement {
            key: key.to_owned(),
            op,
        })
    };
    if let Some(key) = term.strip_prefix('!') {
        return req(key, Op::NotExists);
    }
    for (sep, ctor) in [
        ("!=", Op::NotEq as fn(String) -> Op),
        ("==", Op::Eq),
        ("=", Op::Eq),
    ] {
        if let Some((k, v)) = term.split_once(sep) {
            return req(k, ctor(v.trim().to_owned()));
        }
    }
    for (word, notin) in [(" notin ", true), (" in ", false)] {
        if let Some((k, set)) = term.split_once(word) {
            let set = set
                .trim()
                .strip_prefix('(')
                .and_then(|s| s.strip_suffix(')'))
                .ok_or_else(bad)?;
            let values: Vec<String> = set.split(',').map(|v| v.trim().to_owned()).collect();
            return req(
                k,
                if notin {
                    Op::NotIn(values)
                } else {
                    Op::In(values)
                },
            );
        }
    }
    req(term, Op::Exists)
}

/// A parsed field selector: every term must hold.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct FieldSelector(Vec<(Vec<String>, bool, String)>);

impl FieldSelector {
    pub(crate) fn parse(s: &str) -> Result<Self, String> {
        let mut terms = Vec::new();
        for term in s.split(',').map(str::trim).filter(|t| !t.is_empty()) {
            let (path, equal, value) = if let Some((p, v)) = term.split_once("!=") {
                (p, false, v)
            } else if let Some((p, v)) = term.split_once("==") {
                (p, true, v)
            } else if let Some((p, v)) = term.split_once('=') {
                (p, true, v)
            } else {
                return Err(format!("invalid field selector: {term:?}"));
            };
            let path = path.trim().split('.').map(str::to_owned).collect();
            terms.push((path, equal, value.trim().to_owned()));
        }
        Ok(Self(terms))
    }

    pub(crate) fn matches(&self, obj: &Value) -> bool {
        self.0.iter().all(|(path, equal, want)| {
            let got = path
                .iter()
                .try_fold(obj, |v, k| v.get(k))
                .map(|v| match v {
                    Value::String(s) => s.clone(),
                    Value::Null => String::new(),
                    other => other.to_string(),
                })
                .unwrap_or_default();
            (got == *want) == *equal
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn obj(labels: Value) -> Value {
        json!({"metadata": {"name": "n1", "namespace": "ns", "labels": labels}})
    }

    #[test]
    fn every_label_operator() {
        let o = obj(json!({"app": "web", "tier": "fe"}));
        let cases = [
            ("app=web", true),
            ("app==web", true),
            ("app=db", false),
            ("app!=db", true),
            ("app!=web", false),
            ("missing!=x", true),
            ("tier in (fe, be)", true),
            ("tier in (be)", false),
            ("tier notin (be)", true),
            ("tier notin (fe,be)", false),
            ("missing notin (x)", true),
            ("app", true),
            ("missing", false),
            ("!missing", true),
            ("!app", false),
            ("app=web,tier in (fe,be),!missing", true),
            ("app=web,tier=be", false),
            ("", true),
        ];
        for (sel, want) in cases {
            assert_eq!(
                LabelSelector::parse(sel).unwrap().matches(&o),
                want,
                "{sel}"
            );
        }
    }

    #[test]
    fn bad_label_selector_is_an_error() {
        assert!(LabelSelector::parse("a b").is_err());
        assert!(LabelSelector::parse("a in x").is_err());
    }

    #[test]
    fn field_selector_on_name_and_namespace() {
        let o = obj(json!({}));
        for (sel, want) in [
            ("metadata.name=n1", true),
            ("metadata.name==n2", false),
            ("metadata.name!=n2,metadata.namespace=ns", true),
            ("status.phase=Running", false),
            ("status.phase!=Running", true),
        ] {
            assert_eq!(
                FieldSelector::parse(sel).unwrap().matches(&o),
                want,
                "{sel}"
            );
        }
    }
}
