//! The zone's applied annotation: what the operator last made true on the
//! servers for this BindZone (where the zone lives, the hash of its clause,
//! its catalog, the RRsets its `spec.records` own). It is how a removed
//! inline record, a changed view or a dropped catalog membership is undone
//! after an operator restart, when nothing is left in memory.
//!
//! Pure (parse and render); written by [`crate::controller::zonesync::writes`].

use std::collections::BTreeSet;

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use crate::api::BindZone;
use crate::controller::zonesync::ANNOTATION_APPLIED;
use crate::controller::zonesync::plan::{RrKey, key_text, parse_key_text};

/// Contents of [`ANNOTATION_APPLIED`].
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Applied {
    /// `primary` or `secondary`; unset before the first successful apply.
    #[serde(default, rename = "type", skip_serializing_if = "Option::is_none")]
    pub type_: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub view: Option<String>,
    /// sha256 of the zone clause last given to addzone/modzone.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub clause: Option<String>,
    /// The catalog zone (FQDN) the zone is a member of.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub catalog: Option<String>,
    /// RRsets owned by `spec.records` (`name. TYPE`).
    #[serde(default, skip_serializing_if = "BTreeSet::is_empty")]
    pub inline: BTreeSet<String>,
}

impl Applied {
    /// Reads the annotation; a missing or unreadable one is empty (nothing
    /// known to be applied).
    pub fn of(zone: &BindZone) -> Applied {
        zone.metadata
            .annotations
            .as_ref()
            .and_then(|a| a.get(ANNOTATION_APPLIED))
            .and_then(|v| Self::parse(v))
            .unwrap_or_default()
    }

    /// Parses an annotation value.
    pub fn parse(text: &str) -> Option<Applied> {
        serde_json::from_str(text).ok()
    }

    /// The annotation value.
    pub fn render(&self) -> String {
        serde_json::to_string(self).expect("plain data serializes")
    }

    /// The inline RRsets as keys.
    pub fn inline_keys(&self) -> BTreeSet<RrKey> {
        self.inline
            .iter()
            .filter_map(|t| parse_key_text(t))
            .collect()
    }

    /// Sets the inline RRsets.
    pub fn set_inline(&mut self, keys: &BTreeSet<RrKey>) {
        self.inline = keys.iter().map(key_text).collect();
    }
}

/// sha256 hex of a zone clause.
pub fn clause_hash(clause: &str) -> String {
    hex::encode(Sha256::digest(clause.as_bytes()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bind::{DomainName, RecordType};

    #[test]
    fn round_trips_and_tolerates_garbage() {
        let mut a = Applied {
            type_: Some("primary".into()),
            view: None,
            clause: Some(clause_hash("{ type primary; };")),
            catalog: Some("cat.example.".into()),
            inline: BTreeSet::new(),
        };
        let k = (
            DomainName::parse_absolute("www.example.com").unwrap(),
            RecordType::A,
        );
        a.set_inline(&BTreeSet::from([k.clone()]));
        let mut z = BindZone::new(
            "z",
            serde_json::from_value(
                serde_json::json!({"clusterRef": "c", "zoneName": "example.com"}),
            )
            .unwrap(),
        );
        z.metadata.annotations = Some([(ANNOTATION_APPLIED.to_string(), a.render())].into());
        assert_eq!(Applied::of(&z), a);
        assert_eq!(Applied::of(&z).inline_keys(), BTreeSet::from([k]));
        z.metadata.annotations = Some([(ANNOTATION_APPLIED.to_string(), "{".into())].into());
        assert_eq!(Applied::of(&z), Applied::default());
    }
}
