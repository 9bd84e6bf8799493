//! DNSSEC of a primary zone: which `dnssec-policy` its clause carries (the
//! spec's, or `insecure` while the keys of a removed policy are withdrawn),
//! making that policy take effect on the primary, and what the primary
//! then serves (signed or not, key tags, DS records for the parent).
//!
//! Measured on BIND 9.18 and 9.20 (Debian 9.18.49, 9.20.30):
//! - 9.18 signs a zone at once after a `modzone` that adds a policy; 9.20
//!   records it (`showzone`) but neither signs nor shows it in `rndc
//!   zonestatus` until a reconfig. Deleting the zone without `-clean` and
//!   adding it back with the same clause signs it on 9.20 and keeps every
//!   record (file and journal stay). So: after the clause changed, when
//!   zonestatus does not show the wanted policy, the zone is configured
//!   again — no version check needed. A listed zone (the operator's
//!   primary zones, see `zonesync::server`) gets its new stanza and a
//!   `rndc reconfig` in the round that changed its clause, so on both
//!   versions it is signed after that round; should zonestatus still
//!   miss the policy, the zone's round runs one more reconfig.
//! - Removing the policy outright leaves a 9.20 zone signed (until a
//!   reconfig), then unsigned at once; `insecure` withdraws keys and
//!   signatures in order on both versions, so a removed policy goes
//!   through `insecure` until the primary serves no DNSKEY.
//! - A policy named.conf does not define: rndc says only `configure_zone
//!   failed: not found` (named logs `dnssec-policy 'X' not found`); for a
//!   listed zone named-checkconf refuses its stanza (`option
//!   'dnssec-policy X' has no matching dnssec-policy config`). Either is
//!   reported as the policy's failure, not a missing zone.
//!
//! Touches the primary pod (exec) only; statuses are written by the caller.

use crate::api::{
    BindZone, Phase, REASON_DNSSEC_POLICY_REFUSED, REASON_SERVED, REASON_SIGNING, REASON_UNSIGNING,
    ZoneDnssecStatus,
};
use crate::bind::TsigKey;
use crate::bind::dnssec::{POLICY_INSECURE, policy_signs};
use crate::bind::parse::RndcError;
use crate::bind::zone::{PolicyName, PrimaryZone};
use crate::controller::zonesync::server::{ServerError, Target};
use crate::render::validate::PrimaryZoneConfig;

/// The zone's config with the policy its clause must carry: the spec's;
/// `insecure` when the spec has none but the status still reports DNSSEC
/// (a removed policy whose keys are not withdrawn yet); else none.
pub fn effective(zone: &BindZone, cfg: &PrimaryZoneConfig) -> PrimaryZoneConfig {
    let mut cfg = cfg.clone();
    if cfg.clause.dnssec_policy.is_none()
        && zone.status.as_ref().is_some_and(|s| s.dnssec.is_some())
    {
        cfg.clause.dnssec_policy = PolicyName::parse(POLICY_INSECURE).ok();
    }
    cfg
}

/// Makes the clause's policy take effect (re-adding the zone when named
/// does not show it applied; see the module doc) and reads what the
/// primary serves. `key` signs the DNSKEY query (the zone's view).
pub async fn settle(
    target: &Target<'_>,
    clause: &PrimaryZone,
    policy: &PolicyName,
    key: &TsigKey,
) -> Result<ZoneDnssecStatus, ServerError> {
    let (zone, view) = (&clause.zone, clause.view.as_ref());
    let mut st = target.zone_status(zone, view).await?;
    if st
        .as_ref()
        .is_some_and(|s| s.dnssec_policy.as_deref() != Some(policy.as_str()))
    {
        tracing::info!(pod = %target.pod, zone = %zone, policy = policy.as_str(), "named has not applied the zone's dnssec-policy; re-adding the zone");
        target.readd(clause).await?;
        st = target.zone_status(zone, view).await?;
    }
    let keys = target.dnskeys(zone, key).await?;
    let mut key_tags: Vec<u16> = keys.iter().map(|k| k.key_tag()).collect();
    key_tags.sort_unstable();
    key_tags.dedup();
    let mut ds: Vec<String> = keys
        .iter()
        .filter(|k| k.is_ksk())
        .map(|k| k.ds(zone))
        .collect();
    ds.sort();
    Ok(ZoneDnssecStatus {
        policy: policy.as_str().to_string(),
        signed: st.is_some_and(|s| s.secure),
        key_tags,
        ds,
    })
}

/// Whether the zone is where its policy wants it, and if not, why.
pub fn verdict(d: &ZoneDnssecStatus) -> (Phase, &'static str, String) {
    if policy_signs(&d.policy) {
        if d.signed && !d.ds.is_empty() {
            (Phase::Ready, REASON_SERVED, String::new())
        } else {
            (
                Phase::Pending,
                REASON_SIGNING,
                format!(
                    "the primary does not serve the zone signed yet (dnssec-policy {})",
                    d.policy
                ),
            )
        }
    } else if d.key_tags.is_empty() {
        (Phase::Ready, REASON_SERVED, String::new())
    } else {
        (
            Phase::Pending,
            REASON_UNSIGNING,
            format!(
                "named is withdrawing the zone's DNSKEYs (dnssec-policy {}); {} still served",
                d.policy,
                d.key_tags.len()
            ),
        )
    }
}

/// A server failure that is the policy's fault: named could not configure
/// the zone with its `dnssec-policy`. Returns the reason and a message
/// carrying named's words.
pub fn refused(e: &ServerError, cfg: &PrimaryZoneConfig) -> Option<(&'static str, String)> {
    let policy = cfg.clause.dnssec_policy.as_ref()?;
    match e {
        ServerError::Rndc {
            source: RndcError::ClauseRefused(why),
            zone,
            pod,
            ..
        } => Some((
            REASON_DNSSEC_POLICY_REFUSED,
            format!(
                "named in pod {pod} refused zone {zone} with dnssec-policy {:?}: {why} (named.conf defines no policy of that name, so it is not found; BIND's built-in ones are default and insecure)",
                policy.as_str()
            ),
        )),
        _ => None,
    }
}
