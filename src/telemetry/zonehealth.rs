//! Zone health from the operator's own knowledge: for every zone and pod of
//! a cluster, the serial the pod serves, the serial it should serve (the
//! primary's) and since when it has been behind. Fed by the cluster survey
//! (`crate::controller::zonesync::survey`, one SOA read per pod for every
//! zone outside views), rendered as:
//!
//! - `bind_operator_zone_serial{namespace,cluster,zone,pod}`: the served
//!   serial (absent while the pod does not answer for the zone);
//! - `bind_operator_zone_wanted_serial{namespace,cluster,zone}`: the
//!   primary's serial;
//! - `bind_operator_zone_behind_seconds{namespace,cluster,zone,pod}`: 0 in
//!   sync, else seconds since the pod was first seen behind (below the
//!   wanted serial in serial arithmetic, or not answering).
//!
//! Label values are the operator's objects and zone names, never record
//! names. Series count: two per zone and pod, one per zone.
//!
//! Pure bookkeeping: no I/O; the caller hands in what it read.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex};
use std::time::Instant;

use prometheus_client::collector::Collector;
use prometheus_client::encoding::DescriptorEncoder;
use prometheus_client::metrics::gauge::ConstGauge;

use super::bindstats::family;

/// One cluster's survey, as [`ZoneHealth::record`] takes it.
#[derive(Debug, Clone, Default)]
pub struct SurveyReading {
    pub namespace: String,
    pub cluster: String,
    /// The pod whose serial is wanted (ordinal 0).
    pub primary: String,
    /// Every pod of the cluster, answering or not.
    pub pods: Vec<String>,
    /// The zones asked.
    pub zones: BTreeSet<String>,
    /// Pod -> zone -> served serial; a pod or zone missing did not answer.
    pub served: BTreeMap<String, BTreeMap<String, u32>>,
}

#[derive(Debug, Clone, Default)]
struct ZoneEntry {
    wanted: Option<u32>,
    /// pod -> (served, behind since)
    pods: BTreeMap<String, (Option<u32>, Option<Instant>)>,
}

type ClusterKey = (String, String);

/// Per cluster, per zone. Cheap to clone; clones share it.
#[derive(Debug, Clone, Default)]
pub struct ZoneHealth {
    clusters: Arc<Mutex<BTreeMap<ClusterKey, BTreeMap<String, ZoneEntry>>>>,
}

/// Whether `served` is older than `wanted` in RFC 1982 serial arithmetic.
pub fn serial_behind(served: u32, wanted: u32) -> bool {
    served != wanted && wanted.wrapping_sub(served) < (1 << 31)
}

impl ZoneHealth {
    fn lock(&self) -> std::sync::MutexGuard<'_, BTreeMap<ClusterKey, BTreeMap<String, ZoneEntry>>> {
        self.clusters.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Takes one survey of a cluster at `now`: zones and pods it does not
    /// name drop out; a zone's wanted serial is the primary's (kept from
    /// before while the primary does not answer).
    pub fn record(&self, r: &SurveyReading, now: Instant) {
        let mut clusters = self.lock();
        let key = (r.namespace.clone(), r.cluster.clone());
        let old = clusters.remove(&key).unwrap_or_default();
        let mut zones = BTreeMap::new();
        for zone in &r.zones {
            let before = old.get(zone);
            let wanted = r
                .served
                .get(&r.primary)
                .and_then(|z| z.get(zone))
                .copied()
                .or_else(|| before.and_then(|b| b.wanted));
            let mut entry = ZoneEntry {
                wanted,
                pods: BTreeMap::new(),
            };
            for pod in &r.pods {
                let served = r.served.get(pod).and_then(|z| z.get(zone)).copied();
                let behind = match (served, wanted) {
                    (_, None) => false,
                    (None, Some(_)) => true,
                    (Some(s), Some(w)) => serial_behind(s, w),
                };
                let since = behind.then(|| {
                    before
                        .and_then(|b| b.pods.get(pod))
                        .and_then(|(_, since)| *since)
                        .unwrap_or(now)
                });
                entry.pods.insert(pod.clone(), (served, since));
            }
            zones.insert(zone.clone(), entry);
        }
        clusters.insert(key, zones);
    }

    /// Forgets a cluster (deleted).
    pub fn forget(&self, namespace: &str, cluster: &str) {
        self.lock()
            .remove(&(namespace.to_string(), cluster.to_string()));
    }

    /// Keeps only the clusters in `live` (`(namespace, name)`).
    pub fn retain_clusters(&self, live: &BTreeSet<(String, String)>) {
        self.lock().retain(|k, _| live.contains(k));
    }

    /// `(zone, pod) -> seconds behind` of one cluster at `now` (tests,
    /// diagnostics).
    pub fn behind(
        &self,
        namespace: &str,
        cluster: &str,
        now: Instant,
    ) -> BTreeMap<(String, String), f64> {
        let clusters = self.lock();
        let mut out = BTreeMap::new();
        if let Some(zones) = clusters.get(&(namespace.to_string(), cluster.to_string())) {
            for (zone, e) in zones {
                for (pod, (_, since)) in &e.pods {
                    let secs =
                        since.map_or(0.0, |s| now.saturating_duration_since(s).as_secs_f64());
                    out.insert((zone.clone(), pod.clone()), secs);
                }
            }
        }
        out
    }
}

impl Collector for ZoneHealth {
    fn encode(&self, mut encoder: DescriptorEncoder) -> Result<(), std::fmt::Error> {
        let now = Instant::now();
        let clusters = self.lock().clone();
        let mut serial = Vec::new();
        let mut wanted = Vec::new();
        let mut behind = Vec::new();
        for ((ns, cluster), zones) in &clusters {
            for (zone, e) in zones {
                let base = vec![
                    ("namespace", ns.as_str()),
                    ("cluster", cluster.as_str()),
                    ("zone", zone.as_str()),
                ];
                if let Some(w) = e.wanted {
                    wanted.push((base.clone(), ConstGauge::new(i64::from(w))));
                }
                for (pod, (served, since)) in &e.pods {
                    let mut l = base.clone();
                    l.push(("pod", pod.as_str()));
                    if let Some(s) = served {
                        serial.push((l.clone(), ConstGauge::new(i64::from(*s))));
                    }
                    let secs =
                        since.map_or(0.0, |s| now.saturating_duration_since(s).as_secs_f64());
                    behind.push((l, ConstGauge::new(secs)));
                }
            }
        }
        family(
            &mut encoder,
            "zone_serial",
            "SOA serial a pod serves for a zone (from the operator's survey)",
            serial,
        )?;
        family(
            &mut encoder,
            "zone_wanted_serial",
            "SOA serial every pod should serve for a zone (the primary's)",
            wanted,
        )?;
        family(
            &mut encoder,
            "zone_behind_seconds",
            "Seconds a pod has been behind the wanted serial of a zone (0: in sync)",
            behind,
        )?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    fn reading(primary: u32, secondary: Option<u32>) -> SurveyReading {
        let mut served = BTreeMap::new();
        served.insert(
            "c-0".to_string(),
            BTreeMap::from([("z.test".to_string(), primary)]),
        );
        if let Some(s) = secondary {
            served.insert(
                "c-1".to_string(),
                BTreeMap::from([("z.test".to_string(), s)]),
            );
        }
        SurveyReading {
            namespace: "ns".into(),
            cluster: "c".into(),
            primary: "c-0".into(),
            pods: vec!["c-0".into(), "c-1".into()],
            zones: BTreeSet::from(["z.test".to_string()]),
            served,
        }
    }

    #[test]
    fn behind_counts_from_first_sight_and_clears_in_sync() {
        let h = ZoneHealth::default();
        let t0 = Instant::now();
        h.record(&reading(5, Some(5)), t0);
        let key = ("z.test".to_string(), "c-1".to_string());
        assert_eq!(h.behind("ns", "c", t0)[&key], 0.0);
        h.record(&reading(6, Some(5)), t0 + Duration::from_secs(1));
        h.record(&reading(7, None), t0 + Duration::from_secs(5));
        assert_eq!(
            h.behind("ns", "c", t0 + Duration::from_secs(11))[&key],
            10.0
        );
        h.record(&reading(7, Some(7)), t0 + Duration::from_secs(12));
        assert_eq!(h.behind("ns", "c", t0 + Duration::from_secs(13))[&key], 0.0);
        // Serial arithmetic: 1 is after u32::MAX.
        assert!(serial_behind(u32::MAX, 1));
        assert!(!serial_behind(1, u32::MAX));
        h.forget("ns", "c");
        assert!(h.behind("ns", "c", t0).is_empty());
    }
}
