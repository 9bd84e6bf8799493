//! Which BindTSIGKeys may not be loaded because of their name: a keyName
//! the operator uses itself (the rndc key, the generated transfer key), or
//! one another key loaded by the same cluster also has. BIND refuses a
//! config with two keys of one name, so without this rule one such key
//! would stop every later change of its cluster from rendering.
//!
//! Duplicates follow the conflict rule of zones and records: the key that
//! was in use (Ready at its current generation) keeps its name; keys new
//! together are all refused, each naming the others; names never decide.
//! Every caller (the key's own status, the cluster's keys.conf, a zone's
//! updateKeyRef) asks [`name_problem`], so they agree.
//!
//! Pure: reads the objects it is handed.

use std::sync::Arc;

use kube::ResourceExt as _;

use crate::api::{
    BindTSIGKey, CONDITION_READY, REASON_DUPLICATE_KEY_NAME, REASON_RESERVED_KEY_NAME,
};
use crate::bind::entrypoint::RNDC_KEY_NAME;
use crate::controller::names::GENERATED_TRANSFER_KEY_NAME;

/// Key names the operator renders itself.
pub const RESERVED_KEY_NAMES: &[&str] = &[RNDC_KEY_NAME, GENERATED_TRANSFER_KEY_NAME];

/// The key's name inside BIND, compared case-insensitively without a
/// trailing dot (BIND compares key names as domain names).
pub fn bind_name(key: &BindTSIGKey) -> String {
    key.spec
        .key_name
        .clone()
        .unwrap_or_else(|| key.name_any())
        .trim_end_matches('.')
        .to_ascii_lowercase()
}

/// Whether two keys can be loaded by one cluster.
fn overlap(a: &BindTSIGKey, b: &BindTSIGKey) -> bool {
    a.namespace() == b.namespace()
        && match (&a.spec.cluster_ref, &b.spec.cluster_ref) {
            (Some(x), Some(y)) => x == y,
            _ => true,
        }
}

/// Ready at its current generation: the cluster loads it under this name.
fn in_use(key: &BindTSIGKey) -> bool {
    key.status.as_ref().is_some_and(|s| {
        s.observed_generation == key.metadata.generation
            && s.conditions
                .iter()
                .any(|c| c.type_ == CONDITION_READY && c.status == "True")
    })
}

/// Why `key` may not be loaded because of its name (`reason`, message), or
/// None. `all` is every BindTSIGKey known (the key itself may be in it).
pub fn name_problem(key: &BindTSIGKey, all: &[Arc<BindTSIGKey>]) -> Option<(&'static str, String)> {
    let name = bind_name(key);
    if RESERVED_KEY_NAMES.contains(&name.as_str()) {
        return Some((
            REASON_RESERVED_KEY_NAME,
            format!(
                "failed to load tsig key {}: key name {name} is reserved for the operator's own key; set another spec.keyName",
                key.name_any()
            ),
        ));
    }
    let others: Vec<&Arc<BindTSIGKey>> = all
        .iter()
        .filter(|o| o.name_any() != key.name_any() || o.namespace() != key.namespace())
        .filter(|o| o.metadata.deletion_timestamp.is_none())
        .filter(|o| overlap(key, o) && bind_name(o) == name)
        .collect();
    if others.is_empty() {
        return None;
    }
    let age = |k: &BindTSIGKey| (k.metadata.creation_timestamp.clone(), k.name_any());
    let mine = in_use(key);
    let holder = others
        .iter()
        .filter(|o| in_use(o))
        .filter(|o| !mine || age(o) < age(key))
        .min_by_key(|o| age(o));
    let message = match holder {
        Some(o) => format!(
            "failed to load tsig key {}: BindTSIGKey {} already uses key name {name}",
            key.name_any(),
            o.name_any()
        ),
        None if mine => return None,
        None => format!(
            "failed to load tsig key {}: BindTSIGKey {} also has key name {name} and none of them was in use; none is loaded until all but one are removed or renamed",
            key.name_any(),
            others
                .iter()
                .map(|o| o.name_any())
                .collect::<Vec<_>>()
                .join(", ")
        ),
    };
    Some((REASON_DUPLICATE_KEY_NAME, message))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::{BindTSIGKeySpec, BindTSIGKeyStatus, new_condition};

    fn key(name: &str, key_name: Option<&str>, cluster: Option<&str>) -> Arc<BindTSIGKey> {
        let mut k = BindTSIGKey::new(
            name,
            BindTSIGKeySpec {
                cluster_ref: cluster.map(str::to_string),
                key_name: key_name.map(str::to_string),
                ..serde_json::from_value(serde_json::json!({})).unwrap()
            },
        );
        k.metadata.namespace = Some("ns".into());
        k.metadata.generation = Some(1);
        Arc::new(k)
    }

    fn ready(k: &Arc<BindTSIGKey>) -> Arc<BindTSIGKey> {
        let mut k = (**k).clone();
        k.status = Some(BindTSIGKeyStatus {
            observed_generation: Some(1),
            conditions: vec![new_condition(
                CONDITION_READY,
                true,
                "KeyAvailable",
                "",
                Some(1),
                crate::controller::apply::now(),
            )],
            ..Default::default()
        });
        Arc::new(k)
    }

    #[test]
    fn reserved_names_are_refused() {
        let k = key("k", Some("RNDC-KEY."), None);
        let (reason, message) = name_problem(&k, std::slice::from_ref(&k)).unwrap();
        assert_eq!(reason, REASON_RESERVED_KEY_NAME);
        assert!(message.contains("rndc-key"), "{message}");
        let t = key("bind-operator-transfer", None, Some("c"));
        assert!(name_problem(&t, &[]).is_some());
    }

    #[test]
    fn new_duplicates_are_all_refused_and_the_one_in_use_keeps_its_name() {
        let a = key("a", Some("update"), None);
        let b = key("b", Some("update"), Some("c"));
        let all = vec![a.clone(), b.clone()];
        let (ra, ma) = name_problem(&a, &all).unwrap();
        let (rb, mb) = name_problem(&b, &all).unwrap();
        assert_eq!(
            (ra, rb),
            (REASON_DUPLICATE_KEY_NAME, REASON_DUPLICATE_KEY_NAME)
        );
        assert!(
            ma.contains("BindTSIGKey b") && mb.contains("BindTSIGKey a"),
            "{ma} / {mb}"
        );
        // "b" in use: it keeps the name, "a" is refused naming it.
        let b = ready(&b);
        let all = vec![a.clone(), b.clone()];
        assert!(name_problem(&b, &all).is_none());
        assert!(name_problem(&a, &all).unwrap().1.contains("already uses"));
        // Different clusters never meet.
        let x = key("x", Some("update"), Some("other"));
        assert!(name_problem(&x, &[x.clone(), b]).is_none());
    }
}
