//! The plan step: the zone's owned RRsets (its apex NS, `spec.records`,
//! every valid DNSRecord naming it), the applied annotation they want, the
//! catalog the zone belongs to, and whether the plan can be written at all
//! (in-zone nameservers need glue). Pure: no client, no exec.

use std::hash::{Hash, Hasher};
use std::sync::Arc;

use kube::ResourceExt as _;

use crate::api::{BindZone, DNSRecord, REASON_MISSING_GLUE};
use crate::bind::ZoneName;
use crate::bind::zone::catalog_zone_for;
use crate::controller::zonesync::plan::{Desired, ZoneInputs, plan as plan_zone, valid_records};
use crate::render::validate::PrimaryZoneConfig;

use super::super::applied::{Applied, clause_hash};
use super::super::read::Inputs;
use super::{Failure, Planned, TYPE_PRIMARY};

/// Plans the zone against the last applied annotation.
pub(super) fn plan(
    zone: &BindZone,
    inputs: &Inputs,
    cfg: &PrimaryZoneConfig,
    records: &[Arc<DNSRecord>],
    applied: &Applied,
) -> Planned {
    let zname = &cfg.clause.zone;
    let view = cfg.clause.view.as_ref();
    let catalog = match ZoneName::parse(&inputs.cluster.catalog_zone_name()) {
        Ok(base) if cfg.catalog => catalog_zone_for(&base, view).ok(),
        _ => None,
    };
    let object_name = zone.name_any();
    let desired = plan_zone(
        &ZoneInputs {
            zone: zname,
            object_name: &object_name,
            created: zone.metadata.creation_timestamp.as_ref(),
            default_ttl: cfg.default_ttl,
            nameservers: &cfg.nameservers,
            soa_mname: &cfg.soa.mname,
            inline: &cfg.records,
            applied_inline: &applied.inline_keys(),
        },
        &valid_records(records, zname, cfg.default_ttl),
    );
    let mut want = Applied {
        type_: Some(TYPE_PRIMARY.into()),
        view: view.map(|v| v.as_str().to_string()),
        clause: Some(clause_hash(&cfg.clause.clause())),
        catalog: catalog.as_ref().map(ZoneName::fqdn),
        inline: Default::default(),
    };
    want.set_inline(&desired.inline_owned);
    let fingerprint = {
        let mut h = std::collections::hash_map::DefaultHasher::new();
        (desired.fingerprint(), format!("{:?}", cfg.soa)).hash(&mut h);
        h.finish()
    };
    Planned {
        desired,
        want,
        catalog,
        fingerprint,
    }
}

/// Why the plan cannot be written, if it cannot: a nameserver inside the
/// zone without an address (BIND will not load the zone without its glue).
pub(super) fn unwritable(desired: &Desired) -> Option<Failure> {
    if desired.missing_glue.is_empty() {
        return None;
    }
    let names: Vec<String> = desired.missing_glue.iter().map(|n| n.fqdn()).collect();
    Some(Failure::Invalid {
        reason: REASON_MISSING_GLUE,
        message: format!(
            "nameserver {} is inside the zone but has no A or AAAA record; add one (spec.records or a DNSRecord)",
            names.join(", ")
        ),
    })
}
