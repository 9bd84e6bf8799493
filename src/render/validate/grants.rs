//! `spec.updatePolicy` entries into typed [`Grant`]s: the key must be one
//! the zone's cluster loads, the name must lie inside the zone (required
//! unless `zonesub`), the types must be known. Pure, no I/O; errors name
//! the field and never carry key material.

use super::ConfigError;
use crate::api;
use crate::bind::grant::{Grant, GrantMatch};
use crate::bind::{DomainName, RecordType, TsigKey, ValidationError, ZoneName};

/// Why one `spec.updatePolicy` entry failed: its key is not loaded, or a
/// value does not validate.
pub(super) enum GrantError {
    Key(ConfigError),
    Invalid(ValidationError),
}

impl GrantError {
    pub(super) fn into_config(self, err: &dyn Fn(ValidationError) -> ConfigError) -> ConfigError {
        match self {
            GrantError::Key(e) => e,
            GrantError::Invalid(e) => err(e),
        }
    }
}

/// One `spec.updatePolicy` entry into a typed grant: its key must be one
/// the cluster loads, its name must lie inside the zone (required unless
/// `zonesub`), its types must be known.
pub(super) fn update_grant(
    zone: &ZoneName,
    i: usize,
    g: &api::UpdateGrant,
    zone_key: &dyn Fn(&'static str, &str) -> Result<TsigKey, ConfigError>,
) -> Result<Grant, GrantError> {
    let at = |f: &str| format!("spec.updatePolicy[{i}].{f}");
    let key = zone_key("updatePolicy", &g.key_ref)
        .map_err(GrantError::Key)?
        .name;
    let name = || -> Result<DomainName, ValidationError> {
        let raw = g.name.as_deref().ok_or_else(|| {
            ValidationError::new(
                "grant name",
                "",
                "is required for match name, subdomain and wildcard",
            )
            .at(&at("name"))
        })?;
        DomainName::resolve(raw, zone).map_err(|e| e.at(&at("name")))
    };
    let rule = match g.match_ {
        api::GrantMatch::Name => GrantMatch::Name(name().map_err(GrantError::Invalid)?),
        api::GrantMatch::Subdomain => GrantMatch::Subdomain(name().map_err(GrantError::Invalid)?),
        api::GrantMatch::Wildcard => GrantMatch::Wildcard(name().map_err(GrantError::Invalid)?),
        api::GrantMatch::Zonesub => {
            if let Some(n) = &g.name {
                return Err(GrantError::Invalid(
                    ValidationError::new("grant name", n, "is not allowed for match zonesub")
                        .at(&at("name")),
                ));
            }
            GrantMatch::Zonesub
        }
    };
    let types = g
        .types
        .iter()
        .enumerate()
        .map(|(j, t)| {
            t.as_str()
                .parse::<RecordType>()
                .map_err(|e| GrantError::Invalid(e.at(&at(&format!("types[{j}]")))))
        })
        .collect::<Result<Vec<_>, _>>()?;
    Grant::new(zone, key, rule, types).map_err(|e| GrantError::Invalid(e.at(&at("name"))))
}
