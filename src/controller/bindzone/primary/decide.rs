//! The decide step: what the primary needs ([`Need`]), from the applied
//! annotation, the catalog epoch and the remembered snapshot. Pure: no
//! client, no exec.

use std::time::Duration;

use crate::controller::zonesync::state::Snapshot;

use super::super::applied::Applied;
use super::{Job, Need, TYPE_PRIMARY};

/// Names what this pass must do on the primary.
pub(super) fn need<'j>(job: &'j Job<'_>) -> Need<'j> {
    let member_current = job.plan.catalog.is_none()
        || job.ctx.state.member_epoch(&job.zkey) >= job.memory.catalog_epoch();
    let settings = &job.ctx.settings;
    decide(
        job.applied,
        &Wanted {
            applied: &job.plan.want,
            fingerprint: job.plan.fingerprint,
            member_current,
        },
        job.snap.as_ref(),
        settings.verify_interval,
        settings.snapshot_trust,
    )
}

/// What this pass wants, against what was applied.
struct Wanted<'a> {
    /// The annotation once the plan is written.
    applied: &'a Applied,
    /// The plan's fingerprint (as a snapshot records it).
    fingerprint: u64,
    /// The zone joined the catalog at its current epoch (or has none).
    member_current: bool,
}

/// The decision itself: `applied` is the annotation, `snap` the snapshot
/// taken on this primary, if any.
fn decide<'s>(
    applied: &Applied,
    want: &Wanted<'_>,
    snap: Option<&'s Snapshot>,
    verify_interval: Duration,
    snapshot_trust: Duration,
) -> Need<'s> {
    let moved = applied.type_.is_some()
        && (applied.type_.as_deref() != Some(TYPE_PRIMARY) || applied.view != want.applied.view);
    if moved {
        return Need::Move;
    }
    // The annotation and the catalog membership are what this plan wants.
    let settled = applied == want.applied && want.member_current;
    // The snapshot was written for this very plan.
    let same_plan = snap.is_some_and(|s| s.applied == Some(want.fingerprint));
    match snap {
        _ if !settled => Need::Converge,
        Some(s) if same_plan => {
            let age = s.verified_at.elapsed();
            if age < verify_interval {
                Need::Nothing { snap: s, age }
            } else {
                Need::Check
            }
        }
        None => Need::Check,
        Some(s) if s.verified_at.elapsed() < snapshot_trust => Need::Records(s),
        Some(_) => Need::Converge,
    }
}

#[cfg(test)]
mod tests {
    use std::time::Instant;

    use super::*;
    use crate::controller::zonesync::diff::Served;

    const INTERVAL: Duration = Duration::from_secs(60);
    const TRUST: Duration = Duration::from_secs(5);
    const PLAN: u64 = 7;

    fn primary(view: Option<&str>) -> Applied {
        Applied {
            type_: Some(TYPE_PRIMARY.into()),
            view: view.map(str::to_string),
            clause: Some("c1".into()),
            ..Applied::default()
        }
    }

    fn snapshot(plan: u64, age: Duration) -> Snapshot {
        Snapshot {
            served: Served::default().into(),
            applied: Some(plan),
            verified_at: Instant::now().checked_sub(age).expect("uptime"),
            written_at: None,
            primary: 1,
        }
    }

    fn run(applied: &Applied, member_current: bool, snap: Option<&Snapshot>) -> String {
        let want = primary(None);
        let wanted = Wanted {
            applied: &want,
            fingerprint: PLAN,
            member_current,
        };
        match decide(applied, &wanted, snap, INTERVAL, TRUST) {
            Need::Nothing { .. } => "nothing",
            Need::Check => "check",
            Need::Records(_) => "records",
            Need::Converge => "converge",
            Need::Move => "move",
        }
        .into()
    }

    #[test]
    fn a_zone_applied_elsewhere_moves() {
        let secondary = Applied {
            type_: Some("secondary".into()),
            ..Applied::default()
        };
        assert_eq!(run(&secondary, true, None), "move");
        assert_eq!(run(&primary(Some("internal")), true, None), "move");
    }

    #[test]
    fn a_new_or_changed_zone_converges() {
        // Never applied: not a move, a full pass.
        assert_eq!(run(&Applied::default(), true, None), "converge");
        let other_clause = Applied {
            clause: Some("c2".into()),
            ..primary(None)
        };
        let fresh = snapshot(PLAN, Duration::ZERO);
        assert_eq!(run(&other_clause, true, Some(&fresh)), "converge");
        // The catalog was re-created since the zone joined it.
        assert_eq!(run(&primary(None), false, Some(&fresh)), "converge");
    }

    #[test]
    fn a_settled_zone_is_left_alone_until_its_check_is_due() {
        let recent = snapshot(PLAN, Duration::from_secs(10));
        match decide(
            &primary(None),
            &Wanted {
                applied: &primary(None),
                fingerprint: PLAN,
                member_current: true,
            },
            Some(&recent),
            INTERVAL,
            TRUST,
        ) {
            Need::Nothing { age, .. } => assert!(age >= Duration::from_secs(10)),
            other => panic!("expected nothing to do, got {other:?}"),
        }
        let due = snapshot(PLAN, INTERVAL + Duration::from_secs(1));
        assert_eq!(run(&primary(None), true, Some(&due)), "check");
        // Nothing remembered (an operator restart): the periodic check.
        assert_eq!(run(&primary(None), true, None), "check");
    }

    #[test]
    fn only_changed_records_write_on_a_fresh_snapshot() {
        let fresh = snapshot(PLAN + 1, Duration::from_secs(1));
        assert_eq!(run(&primary(None), true, Some(&fresh)), "records");
        let stale = snapshot(PLAN + 1, TRUST + Duration::from_secs(1));
        assert_eq!(run(&primary(None), true, Some(&stale)), "converge");
    }
}
