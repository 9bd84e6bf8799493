//! Whether every pod serves what the objects say it should: every
//! BindCluster has `spec.replicas` ready pods in this run's pod table, and
//! for each Ready primary BindZone (no view), the cluster's primary pod answers its SOA
//! authoritatively, and every ready secondary pod answers the same serial
//! when the zone is in the catalog. A BindZone turns Ready once the primary
//! holds it; the secondaries follow through the catalog and a transfer
//! some time later, so without this check local mode would say
//! "converged" while a secondary still answers nothing.
//!
//! Zones in a view are not checked: an unsigned query from 127.0.0.1
//! reaches one view only. Sends DNS queries to 127.0.0.1 only; never
//! touches the cluster.

use std::net::{Ipv4Addr, SocketAddr};
use std::time::Duration;

use serde_json::Value;
use tokio::net::UdpSocket;

use super::report::{PodEndpoint, PodRole};
use crate::api::Phase;
use crate::api::bindcluster::DEFAULT_REPLICAS;

/// How long one SOA query may take.
const QUERY_TIMEOUT: Duration = Duration::from_millis(500);
/// DNS type SOA.
const TYPE_SOA: u16 = 6;
/// DNS class IN.
const CLASS_IN: u16 = 1;

/// A zone some pods must serve.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ZoneDuty {
    pub namespace: String,
    pub cluster: String,
    /// Without the trailing dot.
    pub zone: String,
    /// In the catalog: the secondaries serve it too.
    pub catalog: bool,
}

/// The duties of the Ready primary zones among `zones` (BindZone objects
/// as stored).
pub fn duties<'a>(zones: impl IntoIterator<Item = &'a Value>) -> Vec<ZoneDuty> {
    let s = |v: &'a Value, p: &str| v.pointer(p).and_then(Value::as_str);
    zones
        .into_iter()
        .filter(|z| s(z, "/status/phase") == Some(Phase::Ready.as_str()))
        .filter(|z| s(z, "/spec/type").is_none_or(|t| t == "primary"))
        .filter(|z| z.pointer("/spec/view").is_none_or(Value::is_null))
        .filter(|z| z.pointer("/metadata/deletionTimestamp").is_none())
        .filter_map(|z| {
            Some(ZoneDuty {
                namespace: s(z, "/metadata/namespace")?.to_owned(),
                cluster: s(z, "/spec/clusterRef")?.to_owned(),
                zone: s(z, "/spec/zoneName")?.trim_end_matches('.').to_owned(),
                catalog: z
                    .pointer("/spec/catalog")
                    .and_then(Value::as_bool)
                    .unwrap_or(true),
            })
        })
        .collect()
}

/// What the pod table lacks for the clusters among `clusters` (BindCluster
/// objects as stored): each must have `spec.replicas` pods ready. A status
/// left Ready by an earlier run (a real API server keeps it) says nothing
/// about the pods this run has started.
pub fn missing_pods<'a>(
    clusters: impl IntoIterator<Item = &'a Value>,
    pods: &[PodEndpoint],
) -> Vec<String> {
    let mut out = Vec::new();
    for c in clusters {
        // An external cluster (spec.external) has no pods of ours.
        if c.pointer("/metadata/deletionTimestamp").is_some()
            || c.pointer("/spec/external").is_some()
        {
            continue;
        }
        let s = |p: &str| c.pointer(p).and_then(Value::as_str).unwrap_or_default();
        let (ns, name) = (s("/metadata/namespace"), s("/metadata/name"));
        let want = c
            .pointer("/spec/replicas")
            .and_then(Value::as_u64)
            .unwrap_or(DEFAULT_REPLICAS.unsigned_abs().into());
        let ready = pods
            .iter()
            .filter(|p| p.namespace == ns && p.cluster == name && p.ready)
            .count() as u64;
        if ready < want {
            out.push(format!(
                "BindCluster {ns}/{name} to run {want} ready pods ({ready} so far)"
            ));
        }
    }
    out
}

/// What a pod answered for a zone's SOA.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SoaAnswer {
    /// Authoritative, with this serial.
    Serial(u32),
    /// Answered, but not authoritatively with an SOA (rcode given).
    NotAuthoritative(u8),
    /// No answer in time.
    Silent,
}

/// What still keeps the pods from serving their duties, one line each;
/// empty when every ready pod serves every zone it should.
pub async fn unserved(duties: &[ZoneDuty], pods: &[PodEndpoint]) -> Vec<String> {
    let checks = duties.iter().map(|d| async move {
        let mine = pods
            .iter()
            .filter(|p| p.namespace == d.namespace && p.cluster == d.cluster && p.ready);
        let primary = mine.clone().find(|p| p.role == PodRole::Primary)?;
        let want = match soa(primary.dns, &d.zone).await {
            SoaAnswer::Serial(serial) => serial,
            other => return Some(vec![missing(primary, d, other)]),
        };
        if !d.catalog {
            return None;
        }
        let mut problems = Vec::new();
        for p in mine.filter(|p| p.role == PodRole::Secondary) {
            match soa(p.dns, &d.zone).await {
                SoaAnswer::Serial(s) if s == want => {}
                SoaAnswer::Serial(s) => problems.push(format!(
                    "pod {} to serve {} at serial {want} (it has {s})",
                    p.name, d.zone
                )),
                other => problems.push(missing(p, d, other)),
            }
        }
        Some(problems)
    });
    futures::future::join_all(checks)
        .await
        .into_iter()
        .flatten()
        .flatten()
        .collect()
}

fn missing(p: &PodEndpoint, d: &ZoneDuty, got: SoaAnswer) -> String {
    let how = match got {
        SoaAnswer::NotAuthoritative(rcode) => format!("{} so far", rcode_name(rcode)),
        _ => "no answer so far".to_owned(),
    };
    format!("pod {} to serve {} ({how})", p.name, d.zone)
}

fn rcode_name(rcode: u8) -> String {
    match rcode {
        0 => "no authoritative answer".into(),
        2 => "SERVFAIL".into(),
        3 => "NXDOMAIN".into(),
        5 => "REFUSED".into(),
        9 => "NOTAUTH".into(),
        other => format!("rcode {other}"),
    }
}

/// Asks `addr` for the SOA of `zone` (no recursion).
pub async fn soa(addr: SocketAddr, zone: &str) -> SoaAnswer {
    let id: u16 = rand::random();
    let attempt = async {
        let sock = UdpSocket::bind(SocketAddr::from((Ipv4Addr::LOCALHOST, 0))).await?;
        sock.connect(addr).await?;
        sock.send(&soa_query(id, zone)).await?;
        let mut buf = [0u8; 4096];
        loop {
            let n = sock.recv(&mut buf).await?;
            if let Some(answer) = parse_soa(&buf[..n], id) {
                return Ok::<SoaAnswer, std::io::Error>(answer);
            }
        }
    };
    match tokio::time::timeout(QUERY_TIMEOUT, attempt).await {
        Ok(Ok(answer)) => answer,
        _ => SoaAnswer::Silent,
    }
}

fn soa_query(id: u16, zone: &str) -> Vec<u8> {
    let mut q = Vec::with_capacity(32 + zone.len());
    q.extend_from_slice(&id.to_be_bytes());
    // A plain query without recursion, one question.
    q.extend_from_slice(&[0, 0, 0, 1, 0, 0, 0, 0, 0, 0]);
    for label in zone.split('.').filter(|l| !l.is_empty()) {
        // Zone names are validated DNS names: labels fit in 63 bytes.
        q.push(label.len().min(63) as u8);
        q.extend_from_slice(&label.as_bytes()[..label.len().min(63)]);
    }
    q.push(0);
    q.extend_from_slice(&TYPE_SOA.to_be_bytes());
    q.extend_from_slice(&CLASS_IN.to_be_bytes());
    q
}

/// The position after the (possibly compressed) name at `pos`.
fn skip_name(buf: &[u8], mut pos: usize) -> Option<usize> {
    loop {
        let len = *buf.get(pos)?;
        match len {
            0 => return Some(pos + 1),
            l if l & 0xc0 == 0xc0 => return Some(pos + 2),
            l => pos += 1 + usize::from(l),
        }
    }
}

fn u16_at(buf: &[u8], pos: usize) -> Option<u16> {
    Some(u16::from_be_bytes(buf.get(pos..pos + 2)?.try_into().ok()?))
}

/// The answer in a response to query `id`; None for anything else.
fn parse_soa(buf: &[u8], id: u16) -> Option<SoaAnswer> {
    if buf.len() < 12 || buf[..2] != id.to_be_bytes() || buf[2] & 0x80 == 0 {
        return None;
    }
    let rcode = buf[3] & 0x0f;
    let authoritative = buf[2] & 0x04 != 0;
    let (questions, answers) = (u16_at(buf, 4)?, u16_at(buf, 6)?);
    if rcode != 0 || !authoritative {
        return Some(SoaAnswer::NotAuthoritative(rcode));
    }
    let mut pos = 12;
    for _ in 0..questions {
        pos = skip_name(buf, pos)? + 4;
    }
    for _ in 0..answers {
        pos = skip_name(buf, pos)?;
        let rtype = u16_at(buf, pos)?;
        let rdlen = usize::from(u16_at(buf, pos + 8)?);
        let rdata = pos + 10;
        if rtype == TYPE_SOA {
            let serial_at = skip_name(buf, skip_name(buf, rdata)?)?;
            let serial = buf.get(serial_at..serial_at + 4)?;
            return Some(SoaAnswer::Serial(u32::from_be_bytes(
                serial.try_into().ok()?,
            )));
        }
        pos = rdata + rdlen;
    }
    Some(SoaAnswer::NotAuthoritative(0))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_external_cluster_waits_for_no_pods() {
        let own = serde_json::json!({"metadata": {"namespace": "d", "name": "own"}, "spec": {"replicas": 1}});
        let ext = serde_json::json!({"metadata": {"namespace": "d", "name": "ext"},
            "spec": {"replicas": 2, "external": {"primary": {"address": "192.0.2.1"}}}});
        let missing = missing_pods([&own, &ext], &[]);
        assert_eq!(missing.len(), 1, "{missing:?}");
        assert!(missing[0].contains("d/own"), "{missing:?}");
    }

    /// A response to `soa_query(7, "example.com")` with a compressed SOA.
    fn response(flags: [u8; 2], serial: u32) -> Vec<u8> {
        let mut r = soa_query(7, "example.com");
        r[2] = flags[0];
        r[3] = flags[1];
        r[7] = 1; // one answer
        r.extend_from_slice(&[0xc0, 12]); // owner: the question's name
        r.extend_from_slice(&[0, 6, 0, 1, 0, 0, 0, 60]);
        let mut rdata = vec![2, b'n', b's', 0xc0, 12, 0xc0, 12];
        rdata.extend_from_slice(&serial.to_be_bytes());
        rdata.extend_from_slice(&[0; 16]);
        r.extend_from_slice(&(rdata.len() as u16).to_be_bytes());
        r.extend_from_slice(&rdata);
        r
    }

    #[test]
    fn reads_the_serial_of_an_authoritative_answer_only() {
        assert_eq!(
            parse_soa(&response([0x84, 0], 2024), 7),
            Some(SoaAnswer::Serial(2024))
        );
        // Not authoritative, or an error rcode: not served.
        assert_eq!(
            parse_soa(&response([0x80, 0], 2024), 7),
            Some(SoaAnswer::NotAuthoritative(0))
        );
        assert_eq!(
            parse_soa(&response([0x84, 9], 2024), 7),
            Some(SoaAnswer::NotAuthoritative(9))
        );
        // Another query's answer, or a query: ignored.
        assert_eq!(parse_soa(&response([0x84, 0], 1), 8), None);
        assert_eq!(parse_soa(&soa_query(7, "example.com"), 7), None);
    }

    #[test]
    fn duties_are_the_ready_primary_zones_outside_views() {
        let zone = |name: &str, phase: &str, extra: Value| {
            let mut z = serde_json::json!({
                "metadata": {"namespace": "default", "name": name},
                "spec": {"clusterRef": "example", "zoneName": format!("{name}.")},
                "status": {"phase": phase},
            });
            for (k, v) in extra.as_object().unwrap() {
                z["spec"][k] = v.clone();
            }
            z
        };
        let zones = [
            zone("a.test", "Ready", serde_json::json!({})),
            zone("b.test", "Pending", serde_json::json!({})),
            zone("c.test", "Ready", serde_json::json!({"view": "internal"})),
            zone("d.test", "Ready", serde_json::json!({"type": "secondary"})),
            zone("e.test", "Ready", serde_json::json!({"catalog": false})),
        ];
        let got = duties(&zones);
        assert_eq!(
            got.iter()
                .map(|d| (d.zone.as_str(), d.catalog))
                .collect::<Vec<_>>(),
            [("a.test", true), ("e.test", false)]
        );
    }
}
