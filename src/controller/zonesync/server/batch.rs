//! Group commit of zone writes, per pod: the zone operations every zone
//! reconcile of a cluster asks of one pod at about the same time are run
//! together, one exchange per kind, through the servers' port
//! ([`ZoneServers`]):
//!
//! - primary zone writes (create, change clause, delete; see
//!   [`ZoneServers::apply_zones`]) for all zones of the round in one run,
//!   with one `named-checkconf` and one `rndc reconfig`;
//! - every zone's record updates sent by the operator itself as TSIG-signed
//!   UPDATE messages to the pod's DNS port ([`crate::bind::wire`], through
//!   [`ZoneServers::update`]; no exec): one or more messages per zone,
//!   each RRset replace atomic inside its message, a zone's messages in
//!   order on one connection, [`UPDATES_AT_ONCE`] zones at once; the SOA
//!   serials of the zones that want them read back over DNS, pipelined on
//!   one connection per signing key, off the round (the pod's next round
//!   does not wait for it);
//! - catalog membership changes (joins and leaves of every zone of the
//!   round) merged into one UPDATE message per catalog and key (split only
//!   past the 64 KiB message cap, ~600 members), sent with them:
//!   the catalog's serial moves once and secondaries fetch one catalog
//!   version instead of one per zone;
//! - SOA serial reads of all zones asked, over DNS from the operator
//!   ([`ZoneServers::serials`]): pipelined queries on one connection
//!   per signing key.
//!
//! What a first sync (zones and their DNSRecords applied at once) costs:
//! the new zones wait until the first sync's DNSRecords stop arriving and
//! carry their finalizers (see `bindzone::primary`), then reach the pod
//! together, as one wave (or a few). Per wave: on the primary, one SOA
//! read of the wave's serials (and the catalog's); on each secondary
//! nothing, unless the catalog is missing (one SOA read there); then one
//! round on the primary: one `apply_zones` run creating every zone of the
//! wave with all its records in its file (and the missing catalog beside
//! them), and one UPDATE with the joins of the zones it created in
//! one message per catalog. No UPDATE of records follows a creation that
//! carried them.
//!
//! How (group commit, no timer for records): the first request for an idle
//! pod starts a drain task; it lets the tasks already runnable queue
//! theirs (a few scheduler yields while the queue still grows, at most
//! [`GATHER_YIELDS`]; no sleep; only a round holding a zone list change
//! waits [`ZONE_GATHER`] for the rest of its wave), takes every queued request, runs the
//! round, hands each request its own result, and goes on while requests
//! queued during the round (they join the next one). A zone created in the
//! round carries its catalog join into the same round's membership
//! message. So a lone change on an idle pod runs at once, and what
//! arrives while a round is in flight (a first sync of 1,000 zones, a
//! burst of records) waits for exactly that round and goes as one: a
//! handful of execs per step instead of one per zone.
//!
//! Failure isolation: a zone whose write or update fails gets its own
//! error (named-checkconf's message for its stanza, rndc's stderr, or its
//! message's response code); the rest of the round lands. A stanza
//! named-checkconf refuses is dropped and the round's zone run again
//! without it (at most `CHECKCONF_RUNS` runs). Only a failure of the
//! exec itself (the pod gone) fails the whole round, as it would fail each
//! request alone.
//!
//! Why primary zones are listed in an included file with one `rndc
//! reconfig` per round and not added by `rndc addzone` per zone: named
//! serialises adds and commits its new-zone database once per add
//! (~10-18 ms each even sixteen at a time), so the 1,000 new zones of a
//! first sync spent ~18 s in addzone alone; a reconfig with 1,000 zones
//! in config takes ~55 ms (BIND_FACTS). A listed zone is known by its
//! stanza file, so finding which zones exist costs no rndc call either.
//! Secondary-type BindZones still use `addzone` (see [`super`]).
//!
//! Operations that are not batched (AXFR, rndc on views, DNSSEC reads) still
//! go through [`Batcher::unbatched`], which bounds how many run at once, so
//! many concurrent zone reconciles never open hundreds of exec streams.
//!
//! Touches BIND pods through the port only; nothing here sees a command or
//! logs key material.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::sync::{Semaphore, oneshot};

use futures::StreamExt as _;

use crate::bind::ZoneName;
use crate::bind::commands::{WriteKind, ZoneApplied, ZoneWrite};
use crate::bind::nsupdate::{RrsetChange, UpdateBatch};
use crate::bind::parse::{NsupdateError, RndcError};
use crate::bind::wire::{self, UpdateMessage};
use crate::bind::zone::PrimaryZone;
use crate::bind::{DomainName, RecordType, TsigKey, ViewName};
use crate::controller::exec::{ExecError, PodRef};

use super::port::ZoneServers;
use super::{CatalogJoin, Created, ServerError};

/// Unbatched commands running at once through one [`Batcher`] (what the
/// zone controller's concurrency used to bound).
pub const UNBATCHED_AT_ONCE: usize = 8;

/// Zones of one round whose UPDATEs are in flight to a pod at once (one
/// TCP connection each).
pub const UPDATES_AT_ONCE: usize = 16;

/// Most scheduler yields before a round runs whatever it has (see
/// `Batcher::gathered`). A yield costs microseconds, not a timer.
pub const GATHER_YIELDS: usize = 16;

/// How long a round holding a zone list change waits for more of its wave
/// (again while more arrived, at most [`ZONE_GATHER_ROUNDS`] times; see
/// `Batcher::gathered`). Only zone creation, clause changes and removal
/// pay it, never a record change.
pub const ZONE_GATHER: Duration = Duration::from_millis(25);
pub const ZONE_GATHER_ROUNDS: usize = 10;

type Reply<T> = oneshot::Sender<Result<T, ServerError>>;

/// Zones whose serials one request wants, the key signing the queries,
/// and where to send them.
type SerialRead = (
    Vec<ZoneName>,
    Option<TsigKey>,
    Reply<BTreeMap<ZoneName, u32>>,
);

/// One queued request.
enum Request {
    Serials {
        zones: Vec<ZoneName>,
        key: Option<TsigKey>,
        reply: Reply<BTreeMap<ZoneName, u32>>,
    },
    /// A primary zone to list, change or unlist; with a catalog join to
    /// send in the same round if this creates it.
    Zone {
        write: ZoneWrite,
        reply: Reply<ZoneApplied>,
        join: Option<PendingJoin>,
    },
    Update {
        zone: ZoneName,
        messages: Vec<UpdateMessage>,
        key: TsigKey,
        /// Read the zone's serial back after the run.
        read_serial: bool,
        reply: Reply<Option<u32>>,
    },
    /// One zone joining or leaving a catalog (merged per catalog and key).
    Member {
        catalog: ZoneName,
        change: RrsetChange,
        key: TsigKey,
        reply: Reply<Option<u32>>,
    },
}

/// A catalog join waiting for its zone's creation in the same round.
struct PendingJoin {
    join: CatalogJoin,
    reply: Reply<Option<u32>>,
}

#[derive(Default)]
struct Queue {
    requests: Vec<Request>,
}

/// Per-pod request queues and the bound on unbatched commands. Shared by
/// every zone reconcile of the process.
pub struct Batcher {
    queues: Mutex<HashMap<PodRef, Queue>>,
    unbatched: Semaphore,
    /// Per pod, the clause each zone was last seen listed with by a run of
    /// this process: a zone asked to be listed as it is costs no exec.
    listed: Mutex<HashMap<PodRef, HashMap<ZoneKey, String>>>,
}

/// A zone on a pod: its name and view.
type ZoneKey = (ZoneName, Option<ViewName>);

impl std::fmt::Debug for Batcher {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Batcher").finish_non_exhaustive()
    }
}

impl Default for Batcher {
    fn default() -> Self {
        Self::new()
    }
}

impl Batcher {
    pub fn new() -> Self {
        Batcher {
            queues: Mutex::new(HashMap::new()),
            unbatched: Semaphore::new(UNBATCHED_AT_ONCE),
            listed: Mutex::new(HashMap::new()),
        }
    }

    /// Waits for a slot to run one unbatched command.
    pub async fn unbatched(&self) -> tokio::sync::SemaphorePermit<'_> {
        self.unbatched
            .acquire()
            .await
            .expect("the semaphore is never closed")
    }

    fn submit(self: &Arc<Self>, servers: &Arc<dyn ZoneServers>, pod: &PodRef, request: Request) {
        let start = {
            let mut queues = self.queues.lock().unwrap_or_else(|e| e.into_inner());
            match queues.get_mut(pod) {
                Some(q) => {
                    q.requests.push(request);
                    false
                }
                None => {
                    queues.insert(
                        pod.clone(),
                        Queue {
                            requests: vec![request],
                        },
                    );
                    true
                }
            }
        };
        if start {
            let (this, servers, pod) = (self.clone(), servers.clone(), pod.clone());
            tokio::spawn(async move { this.drain(servers, pod).await });
        }
    }

    /// Runs rounds for `pod` until its queue is empty, then forgets it (the
    /// next request starts a new drain).
    async fn drain(self: Arc<Self>, servers: Arc<dyn ZoneServers>, pod: PodRef) {
        loop {
            self.gathered(&pod).await;
            let requests = {
                let mut queues = self.queues.lock().unwrap_or_else(|e| e.into_inner());
                let taken = queues
                    .get_mut(&pod)
                    .map(|q| std::mem::take(&mut q.requests))
                    .unwrap_or_default();
                if taken.is_empty() {
                    queues.remove(&pod);
                    return;
                }
                taken
            };
            round(&servers, &pod, requests).await;
        }
    }

    /// Lets the requests of tasks already runnable join the round: yields
    /// to the scheduler while the queue still grew since the last yield,
    /// at most [`GATHER_YIELDS`] times. Never sleeps: an idle pod runs a
    /// lone request at once; a wave (many zone reconciles woken by one
    /// event) lands in this round or, if it comes later, in the next.
    async fn gathered(&self, pod: &PodRef) {
        let queued = || {
            let queues = self.queues.lock().unwrap_or_else(|e| e.into_inner());
            queues.get(pod).map_or(0, |q| q.requests.len())
        };
        let mut seen = queued();
        for _ in 0..GATHER_YIELDS {
            tokio::task::yield_now().await;
            let now = queued();
            if now == seen {
                break;
            }
            seen = now;
        }
        // A zone list change costs the pod a named-checkconf and an rndc
        // reconfig of every zone: such a round waits for the rest of its
        // wave (new zones of a first sync reach this step over a few
        // hundred ms), as long as more still arrive. Record updates and
        // serial reads never wait here.
        let listing = || {
            let queues = self.queues.lock().unwrap_or_else(|e| e.into_inner());
            queues
                .get(pod)
                .is_some_and(|q| q.requests.iter().any(|r| matches!(r, Request::Zone { .. })))
        };
        if !listing() {
            return;
        }
        for _ in 0..ZONE_GATHER_ROUNDS {
            tokio::time::sleep(ZONE_GATHER).await;
            let now = queued();
            if now == seen {
                return;
            }
            seen = now;
        }
    }

    /// SOA serials of `zones` on the pod (see [`super::Target::serials`]).
    pub async fn serials(
        self: &Arc<Self>,
        servers: &Arc<dyn ZoneServers>,
        pod: &PodRef,
        zones: &[ZoneName],
        key: Option<&TsigKey>,
    ) -> Result<BTreeMap<ZoneName, u32>, ServerError> {
        let (reply, rx) = oneshot::channel();
        let zones = zones.to_vec();
        let key = key.cloned();
        self.submit(servers, pod, Request::Serials { zones, key, reply });
        received(rx, pod).await
    }

    /// Creates a primary zone unless it is listed or has files (see
    /// [`super::Target::create_primary`]).
    pub async fn create_primary(
        self: &Arc<Self>,
        servers: &Arc<dyn ZoneServers>,
        pod: &PodRef,
        zone: &PrimaryZone,
        text: &str,
        bare: Option<&str>,
    ) -> Result<Created, ServerError> {
        self.create_primary_joining(servers, pod, zone, text, bare, None)
            .await
            .map(|(created, _)| created)
    }

    /// [`Self::create_primary`], with the zone's catalog `join` (when
    /// given) sent in the same round right after the creation, only if the
    /// zone was created (see [`super::Target::create_primary_joining`]).
    pub async fn create_primary_joining(
        self: &Arc<Self>,
        servers: &Arc<dyn ZoneServers>,
        pod: &PodRef,
        zone: &PrimaryZone,
        text: &str,
        bare: Option<&str>,
        join: Option<CatalogJoin>,
    ) -> Result<(Created, Option<Result<(), ServerError>>), ServerError> {
        let (join, joined) = match join {
            Some(join) => {
                let (reply, rx) = oneshot::channel();
                (Some(PendingJoin { join, reply }), Some(rx))
            }
            None => (None, None),
        };
        // Never answered from memory: a zone asked to be created is not
        // served (a primary restarted empty lost what this process saw).
        let applied = self
            .put(servers, pod, zone, text, bare, false, false, join)
            .await?;
        let created = match applied {
            ZoneApplied::New => Created::New,
            ZoneApplied::NewBare(why) => Created::Bare(why),
            _ => Created::Existing,
        };
        // Sent (and answered in the same round) only for a creation.
        let joined = match (&created, joined) {
            (Created::New | Created::Bare(_), Some(rx)) => {
                Some(received(rx, pod).await.map(|_| ()))
            }
            _ => None,
        };
        Ok((created, joined))
    }

    /// Lists a primary zone with its current clause (see
    /// [`crate::bind::commands::WriteKind::Put`]). A zone this process saw
    /// listed with the same clause on the pod is not asked again, unless
    /// `reconfig`; a zone the pod serves with another clause (or from the
    /// new-zone database) is changed in the pod's next round.
    pub async fn put_primary(
        self: &Arc<Self>,
        servers: &Arc<dyn ZoneServers>,
        pod: &PodRef,
        zone: &PrimaryZone,
        skeleton: &str,
        reconfig: bool,
    ) -> Result<ZoneApplied, ServerError> {
        self.put(servers, pod, zone, skeleton, None, reconfig, true, None)
            .await
    }

    #[allow(clippy::too_many_arguments)]
    async fn put(
        self: &Arc<Self>,
        servers: &Arc<dyn ZoneServers>,
        pod: &PodRef,
        zone: &PrimaryZone,
        text: &str,
        bare: Option<&str>,
        reconfig: bool,
        remembered: bool,
        join: Option<PendingJoin>,
    ) -> Result<ZoneApplied, ServerError> {
        let clause = zone.clause();
        let key = (zone.zone.clone(), zone.view.clone());
        if remembered && !reconfig && self.listed_as(pod, &key).as_deref() == Some(clause.as_str())
        {
            return Ok(ZoneApplied::Listed);
        }
        let write = ZoneWrite {
            zone: zone.zone.clone(),
            view: zone.view.clone(),
            kind: WriteKind::Put {
                clause: clause.clone(),
                text: text.to_string(),
                bare: bare.map(str::to_string),
                reconfig,
            },
        };
        let applied = self.zone_write(servers, pod, write, join).await;
        let mut listed = self.listed.lock().unwrap_or_else(|e| e.into_inner());
        let on_pod = listed.entry(pod.clone()).or_default();
        match &applied {
            Ok(_) => on_pod.insert(key, clause),
            Err(_) => on_pod.remove(&key),
        };
        applied
    }

    /// Unlists a primary zone and removes its files (see
    /// [`crate::bind::commands::WriteKind::Remove`]); a zone already gone
    /// is success.
    pub async fn remove_primary(
        self: &Arc<Self>,
        servers: &Arc<dyn ZoneServers>,
        pod: &PodRef,
        zone: &ZoneName,
        view: Option<&ViewName>,
    ) -> Result<(), ServerError> {
        let key = (zone.clone(), view.cloned());
        self.listed
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .entry(pod.clone())
            .or_default()
            .remove(&key);
        let write = ZoneWrite {
            zone: zone.clone(),
            view: view.cloned(),
            kind: WriteKind::Remove,
        };
        self.zone_write(servers, pod, write, None).await.map(|_| ())
    }

    fn listed_as(&self, pod: &PodRef, key: &ZoneKey) -> Option<String> {
        let listed = self.listed.lock().unwrap_or_else(|e| e.into_inner());
        listed.get(pod)?.get(key).cloned()
    }

    async fn zone_write(
        self: &Arc<Self>,
        servers: &Arc<dyn ZoneServers>,
        pod: &PodRef,
        write: ZoneWrite,
        join: Option<PendingJoin>,
    ) -> Result<ZoneApplied, ServerError> {
        let (reply, rx) = oneshot::channel();
        self.submit(servers, pod, Request::Zone { write, reply, join });
        received(rx, pod).await
    }

    /// Sends one zone's UPDATE messages signed with `key`; with
    /// `read_serial`, the zone's serial after them (`None`: not served
    /// after).
    pub async fn update(
        self: &Arc<Self>,
        servers: &Arc<dyn ZoneServers>,
        pod: &PodRef,
        zone: &ZoneName,
        messages: Vec<UpdateMessage>,
        key: &TsigKey,
        read_serial: bool,
    ) -> Result<Option<u32>, ServerError> {
        let (reply, rx) = oneshot::channel();
        let request = Request::Update {
            zone: zone.clone(),
            messages,
            key: key.clone(),
            read_serial,
            reply,
        };
        self.submit(servers, pod, request);
        received(rx, pod).await
    }

    /// Sends one catalog membership change (see
    /// [`crate::bind::nsupdate::catalog_add_member`]) signed with `key`,
    /// in one message with every other change of the round to the same
    /// catalog with the same key.
    pub async fn catalog_change(
        self: &Arc<Self>,
        servers: &Arc<dyn ZoneServers>,
        pod: &PodRef,
        catalog: &ZoneName,
        change: RrsetChange,
        key: &TsigKey,
    ) -> Result<(), ServerError> {
        let (reply, rx) = oneshot::channel();
        let request = Request::Member {
            catalog: catalog.clone(),
            change,
            key: key.clone(),
            reply,
        };
        self.submit(servers, pod, request);
        received(rx, pod).await.map(|_| ())
    }
}

/// The reply, or "unreachable" when the round was dropped (the runtime
/// shutting down).
fn received<T>(
    rx: oneshot::Receiver<Result<T, ServerError>>,
    pod: &PodRef,
) -> impl Future<Output = Result<T, ServerError>> + use<T> {
    let pod = pod.to_string();
    async move {
        rx.await.unwrap_or_else(|_| {
            Err(ServerError::Unreachable {
                pod: pod.clone(),
                source: Box::new(ExecError::Transport {
                    pod,
                    program: "batch".into(),
                    reason: "the batched command was dropped".into(),
                }),
            })
        })
    }
}

/// One round on one pod: zone writes, then updates, then serial reads.
async fn round(servers: &Arc<dyn ZoneServers>, pod: &PodRef, requests: Vec<Request>) {
    let mut zones = Vec::new();
    let mut updates = Vec::new();
    let mut reads = Vec::new();
    let mut members: Vec<MemberGroup> = Vec::new();
    for r in requests {
        match r {
            Request::Zone { write, reply, join } => zones.push((write, reply, join)),
            Request::Update {
                zone,
                messages,
                key,
                read_serial,
                reply,
            } => updates.push(UpdateRequest {
                zone,
                messages,
                key,
                read_serial,
                replies: vec![reply],
                retry_servfail: false,
            }),
            Request::Serials { zones, key, reply } => reads.push((zones, key, reply)),
            Request::Member {
                catalog,
                change,
                key,
                reply,
            } => {
                let join = CatalogJoin {
                    catalog,
                    change,
                    key,
                };
                add_member(&mut members, PendingJoin { join, reply });
            }
        }
    }
    if !zones.is_empty() {
        // The joins of the zones this round created go with the round's
        // other membership changes.
        for join in zone_round(servers.as_ref(), pod, zones).await {
            add_member(&mut members, join);
        }
    }
    for g in members {
        if let Some(u) = g.into_update() {
            updates.push(u);
        }
    }
    if !updates.is_empty() {
        update_round(servers, pod, updates).await;
    }
    if !reads.is_empty() {
        serials_round(servers.as_ref(), pod, reads).await;
    }
}

/// Adds one membership change to its catalog's and key's group.
fn add_member(members: &mut Vec<MemberGroup>, pending: PendingJoin) {
    let PendingJoin {
        join: CatalogJoin {
            catalog,
            change,
            key,
        },
        reply,
    } = pending;
    match members
        .iter_mut()
        .find(|g| g.catalog == catalog && g.key == key)
    {
        Some(g) => {
            g.changes.push(change);
            g.replies.push(reply);
        }
        None => members.push(MemberGroup {
            catalog,
            key,
            changes: vec![change],
            replies: vec![reply],
        }),
    }
}

/// A zone write that did not get its own result.
fn not_reached(pod: &PodRef, write: &ZoneWrite, why: String) -> ServerError {
    ServerError::Rndc {
        action: write.action(),
        zone: write.zone.to_string(),
        pod: pod.to_string(),
        source: RndcError::Other(why),
    }
}

/// Runs of one round's zone writes when named-checkconf refuses some
/// stanzas: each run drops the zones it named; checkconf stops at the
/// first syntax error, so this bounds how many bad zones one round sorts
/// out (the rest fail and are retried by their reconciles).
const CHECKCONF_RUNS: usize = 4;

/// Runs the round's zone writes and answers each; returns the catalog
/// joins of the zones it created.
async fn zone_round(
    servers: &dyn ZoneServers,
    pod: &PodRef,
    asks: Vec<(ZoneWrite, Reply<ZoneApplied>, Option<PendingJoin>)>,
) -> Vec<PendingJoin> {
    // One write per zone and view: the last one asked wins, and every
    // request for that zone (two BindZones racing) gets its result.
    let mut last: HashMap<ZoneKey, usize> = HashMap::new();
    for (i, (w, _, _)) in asks.iter().enumerate() {
        last.insert((w.zone.clone(), w.view.clone()), i);
    }
    let mut pending: Vec<usize> = (0..asks.len())
        .filter(|i| last[&(asks[*i].0.zone.clone(), asks[*i].0.view.clone())] == *i)
        .collect();
    let mut results: HashMap<usize, Result<ZoneApplied, ServerError>> = HashMap::new();
    for run in 1..=CHECKCONF_RUNS {
        if pending.is_empty() {
            break;
        }
        let writes: Vec<ZoneWrite> = pending.iter().map(|i| asks[*i].0.clone()).collect();
        let started = std::time::Instant::now();
        let mut applied = servers.apply_zones(pod, &writes).await;
        tracing::debug!(
            pod = %pod,
            zones = writes.len(),
            ms = started.elapsed().as_millis() as u64,
            refused = applied.refused.is_some(),
            "applied zone writes in one run"
        );
        if let Some(refusal) = &applied.refused {
            let mut dropped = BTreeSet::new();
            for (k, message) in &refusal.writes {
                let Some(&i) = pending.get(*k) else { continue };
                dropped.insert(i);
                results.insert(
                    i,
                    Err(ServerError::Rndc {
                        action: asks[i].0.action(),
                        zone: asks[i].0.zone.to_string(),
                        pod: pod.to_string(),
                        source: RndcError::ClauseRefused(message.clone()),
                    }),
                );
            }
            if dropped.is_empty() || run == CHECKCONF_RUNS {
                // Not a zone of this round (or too many): all of them wait.
                let why = format!("named-checkconf refused the zone list: {}", refusal.output);
                for i in pending.drain(..).filter(|i| !dropped.contains(i)) {
                    results.insert(i, Err(not_reached(pod, &asks[i].0, why.clone())));
                }
                break;
            }
            pending.retain(|i| !dropped.contains(i));
            continue;
        }
        for (k, i) in pending.drain(..).enumerate() {
            let result = match (applied.results.remove(&k), &applied.failure) {
                (Some(r), _) => r,
                (None, Some(e)) => Err(e.clone()),
                (None, None) => Err(not_reached(
                    pod,
                    &asks[i].0,
                    "the batched run did not reach the zone".into(),
                )),
            };
            results.insert(i, result);
        }
    }
    let mut joins = Vec::new();
    for (w, reply, join) in asks {
        let winner = last[&(w.zone.clone(), w.view.clone())];
        let result = results.get(&winner).cloned().unwrap_or_else(|| {
            Err(not_reached(
                pod,
                &w,
                "the batched run did not reach the zone".into(),
            ))
        });
        if let (Ok(ZoneApplied::New | ZoneApplied::NewBare(_)), Some(join)) = (&result, join) {
            joins.push(join);
        }
        let _ = reply.send(result);
    }
    joins
}

/// One zone's update: its messages, the key signing them, whether to read
/// the serial back; several replies when it carries the changes of
/// several requests (a catalog's members), each told the same outcome.
struct UpdateRequest {
    zone: ZoneName,
    messages: Vec<UpdateMessage>,
    key: TsigKey,
    read_serial: bool,
    replies: Vec<Reply<Option<u32>>>,
    /// A SERVFAIL is tried again ([`MEMBERSHIP_RETRIES`]).
    retry_servfail: bool,
}

/// Waits before sending a catalog membership UPDATE again after a
/// SERVFAIL. A catalog zone made by this round's reconfig may still be
/// loading when its joins are sent (named answers SERVFAIL for a zone not
/// loaded yet: seen under load in the BusyBox lane); membership changes
/// are RRset replaces with no prerequisite, so sending one again is safe.
/// Record UPDATEs are not retried here (their prerequisites decide
/// conflicts; their zone's next round writes again).
const MEMBERSHIP_RETRIES: [Duration; 6] = [
    Duration::from_millis(25),
    Duration::from_millis(50),
    Duration::from_millis(100),
    Duration::from_millis(200),
    Duration::from_millis(400),
    Duration::from_millis(800),
];

/// The membership changes of one catalog, signed with one key, asked in one
/// round.
struct MemberGroup {
    catalog: ZoneName,
    key: TsigKey,
    changes: Vec<RrsetChange>,
    replies: Vec<Reply<Option<u32>>>,
}

impl MemberGroup {
    /// The group as one update of the catalog. A zone asked twice (it
    /// joined, then left) keeps its last change: the two share the member
    /// id, and in one message the later change would win anyway.
    fn into_update(self) -> Option<UpdateRequest> {
        let mut last: HashMap<(DomainName, RecordType), usize> = HashMap::new();
        for (i, c) in self.changes.iter().enumerate() {
            last.insert((c.name().clone(), c.rtype()), i);
        }
        let changes: Vec<RrsetChange> = self
            .changes
            .into_iter()
            .enumerate()
            .filter(|(i, c)| last[&(c.name().clone(), c.rtype())] == *i)
            .map(|(_, c)| c)
            .collect();
        let batch = UpdateBatch {
            zone: self.catalog,
            changes,
            apex_ns: None,
        };
        match wire::update::messages(&batch) {
            Ok(messages) if !messages.is_empty() => Some(UpdateRequest {
                zone: batch.zone,
                messages,
                key: self.key,
                read_serial: false,
                replies: self.replies,
                retry_servfail: true,
            }),
            Ok(_) => {
                for reply in self.replies {
                    let _ = reply.send(Ok(None));
                }
                None
            }
            Err(source) => {
                for reply in self.replies {
                    let _ = reply.send(Err(ServerError::Batch {
                        zone: batch.zone.to_string(),
                        source: source.clone(),
                    }));
                }
                None
            }
        }
    }
}

/// Whether an update failed with SERVFAIL.
fn servfail(r: &Result<(), ServerError>) -> bool {
    matches!(
        r,
        Err(ServerError::Update {
            source: NsupdateError::ServFail,
            ..
        })
    )
}

/// Sends the round's updates straight to the pod's DNS port: a zone's
/// requests in order on one connection, up to [`UPDATES_AT_ONCE`] zones
/// at once; then, off the round, the serials the requests want, read
/// over DNS with the key that signed each update.
async fn update_round(servers: &Arc<dyn ZoneServers>, pod: &PodRef, updates: Vec<UpdateRequest>) {
    // A zone's requests stay together, in order.
    let mut by_zone: Vec<(ZoneName, Vec<UpdateRequest>)> = Vec::new();
    for u in updates {
        match by_zone.iter_mut().find(|(z, _)| *z == u.zone) {
            Some((_, v)) => v.push(u),
            None => by_zone.push((u.zone.clone(), vec![u])),
        }
    }
    tracing::debug!(
        pod = %pod,
        zones = by_zone.len(),
        messages = by_zone.iter().flat_map(|(_, v)| v).map(|u| u.messages.len()).sum::<usize>(),
        "sending updates over DNS"
    );
    let sent: Vec<Vec<(UpdateRequest, Result<(), ServerError>)>> =
        futures::stream::iter(by_zone.into_iter().map(|(zone, reqs)| async move {
            let mut out = Vec::new();
            for u in reqs {
                let mut r = servers.update(pod, &zone, &u.messages, &u.key).await;
                if u.retry_servfail {
                    for wait in MEMBERSHIP_RETRIES {
                        if !servfail(&r) {
                            break;
                        }
                        tokio::time::sleep(wait).await;
                        r = servers.update(pod, &zone, &u.messages, &u.key).await;
                    }
                }
                out.push((u, r));
            }
            out
        }))
        .buffer_unordered(UPDATES_AT_ONCE)
        .collect()
        .await;
    let sent: Vec<(UpdateRequest, Result<(), ServerError>)> = sent.into_iter().flatten().collect();
    // Answered now: what failed or wants no serial.
    let (reading, done): (Vec<_>, Vec<_>) = sent
        .into_iter()
        .partition(|(u, r)| u.read_serial && r.is_ok());
    for (u, result) in done {
        for reply in u.replies {
            let _ = reply.send(result.clone().map(|()| None));
        }
    }
    if reading.is_empty() {
        return;
    }
    // The serials read back off the pod's round: the next round's UPDATEs
    // (other zones; this zone's next write waits for this reply anyway)
    // need not wait for them. Read with the key that signed the update
    // (in a view, the view's: it lands there), one pipelined read per key.
    let (servers, pod) = (servers.clone(), pod.clone());
    tokio::spawn(async move {
        let mut read_back: Vec<(TsigKey, BTreeSet<ZoneName>)> = Vec::new();
        for (u, _) in &reading {
            match read_back.iter_mut().find(|(k, _)| *k == u.key) {
                Some((_, zones)) => {
                    zones.insert(u.zone.clone());
                }
                None => read_back.push((u.key.clone(), BTreeSet::from([u.zone.clone()]))),
            }
        }
        let mut serials: Result<BTreeMap<ZoneName, u32>, ServerError> = Ok(BTreeMap::new());
        for (key, zones) in read_back {
            let zones: Vec<ZoneName> = zones.into_iter().collect();
            match servers.serials(&pod, &zones, Some(&key)).await {
                Ok(found) => {
                    if let Ok(all) = &mut serials {
                        all.extend(found);
                    }
                }
                Err(e) => serials = Err(e),
            }
        }
        for (u, _) in reading {
            let result = serials.clone().map(|s| s.get(&u.zone).copied());
            for reply in u.replies {
                let _ = reply.send(result.clone());
            }
        }
    });
}

/// Answers the round's serial reads: one pipelined read per signing key.
async fn serials_round(servers: &dyn ZoneServers, pod: &PodRef, reads: Vec<SerialRead>) {
    let mut by_key: Vec<(Option<TsigKey>, Vec<SerialRead>)> = Vec::new();
    for r in reads {
        match by_key.iter_mut().find(|(k, _)| *k == r.1) {
            Some((_, v)) => v.push(r),
            None => by_key.push((r.1.clone(), vec![r])),
        }
    }
    for (key, reads) in by_key {
        let all: Vec<ZoneName> = reads
            .iter()
            .flat_map(|(z, _, _)| z.iter().cloned())
            .collect::<BTreeSet<_>>()
            .into_iter()
            .collect();
        let served = servers.serials(pod, &all, key.as_ref()).await;
        for (zones, _, reply) in reads {
            let result = served.clone().map(|served| {
                zones
                    .iter()
                    .filter_map(|z| served.get(z).map(|s| (z.clone(), *s)))
                    .collect()
            });
            let _ = reply.send(result);
        }
    }
}
