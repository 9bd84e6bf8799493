//! The zone and record controllers end to end on real `named`: a primary and
//! a secondary started through the rendered entrypoint (the BIND layer's
//! harness), the controllers running against the in-memory API with an
//! executor that runs each pod's commands on this machine. Every assertion
//! is what `dig` shows: records land on the primary and, through the
//! catalog, on the secondary; changes and deletes follow; a primary
//! restarted on an empty data directory gets every record back; a
//! secondary's view that missed a NOTIFY catches up on the periodic check.

use crate::support_bind as harness;
use crate::support_zones as support;

use std::collections::HashMap;
use std::io::Write as _;
use std::process::Stdio;
use std::sync::Arc;
use std::time::Duration;

use bind_operator::api::{BindCluster, BindZone, DNSRecord, Phase, RecordType};
use bind_operator::bind::commands::{self, Command};
use bind_operator::bind::layout::PodLayout;
use bind_operator::bind::render::{ClusterConfig, View, render_cluster, view_key_names, view_keys};
use bind_operator::bind::{AclElement, TsigKey, ViewName};
use bind_operator::controller::exec::{ExecError, ExecOutput, PodExecutor, PodRef};
use bind_operator::controller::zonesync::Settings;
use futures::FutureExt as _;
use futures::future::BoxFuture;
use harness::{Pod, dig_short, wait_until};
use serde_json::json;
use support::{Bind, Env, PRIMARY, SECONDARY, record, test_settings, zone};

/// How long dig may take to see a change on the secondary (NOTIFY with
/// notify-delay 0, then a transfer).
const FOLLOW: Duration = Duration::from_secs(10);

/// Runs each pod's commands on this machine against that pod's named.
pub(crate) struct LocalExec {
    pub(crate) layouts: HashMap<String, PodLayout>,
}

impl PodExecutor for LocalExec {
    fn layout(&self, pod: &PodRef) -> PodLayout {
        self.layouts[&pod.name].clone()
    }

    fn exec<'a>(
        &'a self,
        pod: &'a PodRef,
        cmd: &'a Command,
    ) -> BoxFuture<'a, Result<ExecOutput, ExecError>> {
        async move {
            let c = cmd.clone();
            let out = tokio::task::spawn_blocking(move || {
                let mut child = std::process::Command::new(&c.argv[0])
                    .args(&c.argv[1..])
                    .stdin(if c.stdin.is_some() {
                        Stdio::piped()
                    } else {
                        Stdio::null()
                    })
                    .stdout(Stdio::piped())
                    .stderr(Stdio::piped())
                    .spawn()?;
                if let Some(input) = &c.stdin {
                    child.stdin.take().unwrap().write_all(input.as_bytes())?;
                }
                child.wait_with_output()
            })
            .await
            .expect("exec task")
            .map_err(|e| ExecError::transport(pod, cmd, e))?;
            let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
            let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
            match out.status.code() {
                Some(0) => Ok(ExecOutput { stdout, stderr }),
                code => Err(ExecError::exited(
                    pod,
                    cmd,
                    code.unwrap_or(-1),
                    stdout,
                    &stderr,
                )),
            }
        }
        .boxed()
    }
}

pub(crate) struct Named {
    pub(crate) primary: Pod,
    pub(crate) secondary: Pod,
    cfg: ClusterConfig,
    _tmp: tempfile::TempDir,
}

fn short(port: u16, name: &str, t: &str) -> Vec<String> {
    dig_short(port, name, t)
}

#[track_caller]
pub(crate) fn follow(port: u16, name: &str, t: &str, want: &[&str]) {
    let want: Vec<String> = want.iter().map(|s| s.to_string()).collect();
    let ok = wait_until(FOLLOW, || short(port, name, t) == want);
    assert!(
        ok,
        "{name} {t} on port {port}: {:?}, want {want:?}",
        short(port, name, t)
    );
}

/// Where the primary's NOTIFYs go while a test wants the secondary to miss
/// them: a UDP socket of the test's own. A NOTIFY that reached it was spent
/// there, not on the secondary. (An empty list proves nothing: a NOTIFY
/// still pending to the secondary, such as the retry of the zone's first
/// one, sent before the secondary knew the zone, goes out later carrying
/// whatever serial the zone has by then.)
struct NotifySink {
    socket: std::net::UdpSocket,
}

impl NotifySink {
    fn bind() -> NotifySink {
        let socket = std::net::UdpSocket::bind((std::net::Ipv4Addr::LOCALHOST, 0)).unwrap();
        socket
            .set_read_timeout(Some(Duration::from_millis(100)))
            .unwrap();
        NotifySink { socket }
    }

    fn endpoint(&self) -> bind_operator::bind::Endpoint {
        let port = self.socket.local_addr().unwrap().port();
        bind_operator::bind::Endpoint::new(std::net::Ipv4Addr::LOCALHOST.into(), port).unwrap()
    }

    /// Waits for a NOTIFY of `zone` (lowercase, trailing dot) announcing
    /// serial `serial`.
    #[track_caller]
    fn wait_for(&self, zone: &str, serial: u32) {
        use hickory_proto::op::{Message, OpCode};
        use hickory_proto::rr::RData;
        let heard = |msg: &Message| {
            msg.metadata.op_code == OpCode::Notify
                && msg
                    .queries
                    .first()
                    .is_some_and(|q| q.name().to_ascii() == zone)
                && msg
                    .answers
                    .iter()
                    .any(|r| matches!(&r.data, RData::SOA(soa) if soa.serial == serial))
        };
        let deadline = std::time::Instant::now() + FOLLOW;
        let mut buf = [0u8; 4096];
        while std::time::Instant::now() < deadline {
            if let Ok(n) = self.socket.recv(&mut buf)
                && Message::from_vec(&buf[..n]).is_ok_and(|m| heard(&m))
            {
                return;
            }
        }
        panic!("no NOTIFY of {zone} at serial {serial} reached the sink");
    }
}

/// Starts named (primary and secondary, on the keys the API will hold),
/// then the controllers (zone operations batched per pod, as in
/// production) with an executor for those two pods.
pub(crate) async fn setup(settings: Settings) -> (Env, Named) {
    let (env, named, _) = setup_views(settings, vec![]).await;
    (env, named)
}

/// [`setup`] with BIND views (the BindCluster's spec.views must match),
/// and what the operator ran in the pods and NOTIFYed itself.
async fn setup_views(settings: Settings, views: Vec<View>) -> (Env, Named, Arc<Watched>) {
    // Real named plays the batched commands production runs.
    let settings = Settings { ..settings };
    let update = support::random_key(support::UPDATE_KEY);
    let xfer = support::random_key(support::XFER_KEY);
    let named = start_named(&update, &xfer, views);
    let exec = Arc::new(Watched {
        inner: LocalExec {
            layouts: HashMap::from([
                (PRIMARY.to_string(), named.primary.layout.clone()),
                (SECONDARY.to_string(), named.secondary.layout.clone()),
            ]),
        },
        log: Default::default(),
    });
    let env = Env::start_with_keys(Bind::Exec(exec.clone()), settings, update, xfer).await;
    (env, named, exec)
}

/// [`setup_views`] with views `internal` (the 10/8 clients) and `external`
/// (everyone else), and the BindCluster given the same two. Unsigned
/// queries from 127.0.0.1 land in `external`; only the internal view's key
/// reaches `internal`.
async fn setup_two_views(settings: Settings) -> (Env, Named, Arc<Watched>) {
    let views = vec![
        View {
            name: ViewName::parse("internal").unwrap(),
            match_clients: vec![AclElement::parse("10.0.0.0/8").unwrap()],
            match_destinations: vec![],
            recursion: None,
        },
        View {
            name: ViewName::parse("external").unwrap(),
            match_clients: vec![],
            match_destinations: vec![],
            recursion: None,
        },
    ];
    let (env, named, watched) = setup_views(settings, views).await;
    env.patch_spec::<BindCluster>(
        support::CLUSTER,
        json!({"views": [
            {"name": "internal", "matchClients": ["10.0.0.0/8"]},
            {"name": "external"},
        ]}),
    )
    .await;
    (env, named, watched)
}

/// [`LocalExec`], keeping a line per exec (its argv after the program's
/// name, up to a script's first line: no key material is on a command
/// line) and per NOTIFY the operator sent itself (pod, zone, the signing
/// key's name).
pub(crate) struct Watched {
    inner: LocalExec,
    log: std::sync::Mutex<Vec<String>>,
}

impl Watched {
    /// The lines logged after the first `from`.
    fn since(&self, from: usize) -> Vec<String> {
        self.log.lock().unwrap()[from..].to_vec()
    }

    /// How many lines are logged.
    fn len(&self) -> usize {
        self.log.lock().unwrap().len()
    }
}

impl PodExecutor for Watched {
    fn layout(&self, pod: &PodRef) -> PodLayout {
        self.inner.layout(pod)
    }

    fn exec<'a>(
        &'a self,
        pod: &'a PodRef,
        cmd: &'a Command,
    ) -> BoxFuture<'a, Result<ExecOutput, ExecError>> {
        let program = std::path::Path::new(&cmd.argv[0])
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        // A script's first line names it; the rest would swamp a message.
        let args = cmd.argv[1..].join(" ");
        let args = args.lines().next().unwrap_or_default();
        self.log
            .lock()
            .unwrap()
            .push(format!("exec {} {program} {args}", pod.name));
        self.inner.exec(pod, cmd)
    }

    fn dns_notify<'a>(
        &'a self,
        pod: &'a PodRef,
        zone: &'a bind_operator::bind::ZoneName,
        key: &'a TsigKey,
    ) -> BoxFuture<'a, Result<(), bind_operator::bind::wire::WireError>> {
        self.log
            .lock()
            .unwrap()
            .push(format!("notify {} {zone} {}", pod.name, key.name.as_str()));
        self.inner.dns_notify(pod, zone, key)
    }
}

/// What a look at the secondary right after the change's NOTIFY went to
/// the sink may find (`served`): still the `old` answer, or (when the look
/// came after the operator's first recheck, 1 s after the write, as on a
/// loaded machine) the `new` one brought by the operator's own NOTIFY of
/// `zone`, logged before the look ended. Nothing else may have told it.
fn untold_but_by_the_operator(
    served: &[String],
    old: &[&str],
    new: &[&str],
    watched: &Watched,
    from: usize,
    zone: &str,
) {
    if served != new {
        assert_eq!(served, old, "nothing told the secondary");
        return;
    }
    told_by_the_operator(watched, from, zone);
}

/// The operator NOTIFYed the secondary of `zone` since the log's `from`.
fn told_by_the_operator(watched: &Watched, from: usize, zone: &str) {
    let seen = watched.since(from);
    assert!(
        seen.iter()
            .any(|l| l.starts_with(&format!("notify {SECONDARY} {zone} "))),
        "nothing but the operator's NOTIFY told the secondary: {seen:?}"
    );
}

/// A primary and a secondary through the rendered entrypoint, and the
/// primary's NOTIFY list (the BindCluster reconciler's part; one per view
/// with views).
pub(crate) fn start_named(update: &TsigKey, xfer: &TsigKey, views: Vec<View>) -> Named {
    let tmp = tempfile::tempdir().unwrap();
    let config = tmp.path().join("config");
    let mut primary = Pod::new(tmp.path(), &config, 0);
    let mut secondary = Pod::new(tmp.path(), &config, 1);
    let mut cfg = harness::small_config(primary.endpoint(), xfer, update);
    cfg.views = views;
    assert_eq!(cfg.catalog_zone.as_str(), support::CATALOG);
    harness::write_mount(&config, &render_cluster(&cfg).unwrap());
    primary.start();
    secondary.start();
    let named = Named {
        primary,
        secondary,
        cfg,
        _tmp: tmp,
    };
    named.write_notify_list(&[named.secondary.endpoint()]);
    named
}

impl Named {
    /// Rewrites the primary's NOTIFY list(s) (then a reconfig, which sends
    /// no NOTIFY of its own).
    fn write_notify_list(&self, targets: &[bind_operator::bind::Endpoint]) {
        let layout = &self.primary.layout;
        harness::run_ok(&if self.cfg.views.is_empty() {
            commands::write_notify_targets(layout, targets, &self.cfg.transfer_key, &[])
        } else {
            commands::write_view_notify_targets(
                layout,
                targets,
                &view_key_names(&self.cfg).unwrap(),
                &[],
            )
        });
    }

    /// `dig -y` argument of view `view`'s key (its messages land in it).
    fn view_key(&self, view: &str) -> String {
        let (_, k) = view_keys(&self.cfg)
            .unwrap()
            .into_iter()
            .find(|(v, _)| v.as_str() == view)
            .expect("a view of the config");
        format!(
            "{}:{}:{}",
            k.algorithm,
            k.name.as_str(),
            k.secret.expose_base64()
        )
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn records_land_change_and_go_on_real_named() {
    let (env, named) = setup(test_settings()).await;
    let (p, s) = (named.primary.dns.port, named.secondary.dns.port);
    let mut z = zone("web", "web.test");
    z.spec.nameservers = vec!["ns1".into()];
    z.spec.records = serde_json::from_value(json!([
        {"name": "ns1", "type": "A", "values": ["192.0.2.53"]},
    ]))
    .unwrap();
    env.create(z).await;
    env.create(record(
        "www",
        "web",
        "www",
        RecordType::A,
        &["192.0.2.10", "192.0.2.11"],
    ))
    .await;
    env.create(record(
        "mx",
        "web",
        "@",
        RecordType::MX,
        &["10 mail.web.test."],
    ))
    .await;
    env.create(record(
        "txt",
        "web",
        "hello",
        RecordType::TXT,
        &["say \"hi\""],
    ))
    .await;
    for r in ["www", "mx", "txt"] {
        env.record_phase(r, Phase::Ready).await;
    }
    env.zone_phase("web", Phase::Ready).await;

    for port in [p, s] {
        follow(port, "www.web.test", "A", &["192.0.2.10", "192.0.2.11"]);
        follow(port, "web.test", "MX", &["10 mail.web.test."]);
        follow(port, "hello.web.test", "TXT", &["\"say \\\"hi\\\"\""]);
        follow(port, "web.test", "NS", &["ns1.web.test."]);
    }

    // spec.soa changes reach the served SOA (and the secondary).
    env.patch_spec::<BindZone>("web", json!({"soa": {"refresh": 7200, "minimum": 120}}))
        .await;
    for port in [p, s] {
        let ok = wait_until(FOLLOW, || {
            let soa = harness::dig(port, &["+short", "+norecurse", "web.test", "SOA"]);
            soa.trim_end().ends_with(" 7200 900 1209600 120")
        });
        assert!(
            ok,
            "SOA on {port}: {}",
            harness::dig(port, &["+short", "web.test", "SOA"])
        );
    }

    // A change replaces the RRset; a delete removes it, on both servers.
    env.patch_spec::<DNSRecord>("www", json!({"values": ["192.0.2.20"]}))
        .await;
    env.delete::<DNSRecord>("txt").await;
    env.gone::<DNSRecord>("txt").await;
    for port in [p, s] {
        follow(port, "www.web.test", "A", &["192.0.2.20"]);
        follow(port, "hello.web.test", "TXT", &[]);
    }

    // The zone goes: the secondary drops it through the catalog.
    env.delete::<BindZone>("web").await;
    env.gone::<BindZone>("web").await;
    for port in [p, s] {
        let gone = wait_until(FOLLOW, || {
            !harness::dig(port, &["+norecurse", "web.test", "SOA"]).contains("status: NOERROR")
        });
        assert!(gone, "web.test still served on {port}");
    }
    env.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn primary_restarted_on_an_empty_data_directory_gets_every_record_back() {
    // Periodic checks every second: they notice secondaries lagging.
    let settings = Settings {
        verify_interval: Duration::from_secs(1),
        survey_max_age: Duration::from_millis(500),
        ..test_settings()
    };
    let (env, mut named) = setup(settings).await;
    let (p, s) = (named.primary.dns.port, named.secondary.dns.port);
    env.create(zone("shop", "shop.test")).await;
    let names: Vec<String> = (0..20).map(|i| format!("host{i}")).collect();
    for (i, n) in names.iter().enumerate() {
        let ip = format!("198.51.100.{}", i + 1);
        env.create(record(n, "shop", n, RecordType::A, &[&ip]))
            .await;
    }
    env.create(record(
        "alias",
        "shop",
        "www",
        RecordType::CNAME,
        &["host0"],
    ))
    .await;
    for n in names.iter().chain(std::iter::once(&"alias".to_string())) {
        env.record_phase(n, Phase::Ready).await;
    }
    follow(s, "host19.shop.test", "A", &["198.51.100.20"]);

    // Kill named, empty its data directory, start it again: named comes
    // back without zones, catalog or records; kubelet reports a restart.
    named.primary.stop();
    let data = named.primary.layout.data_dir.clone();
    for entry in std::fs::read_dir(&data).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() && !path.is_symlink() {
            std::fs::remove_dir_all(&path).unwrap();
        } else {
            std::fs::remove_file(&path).unwrap();
        }
    }
    named.primary.start();
    assert!(
        short(p, "host0.shop.test", "A").is_empty(),
        "the volume was not empty"
    );
    env.set_pod(PRIMARY, true, 1).await;

    for (i, n) in names.iter().enumerate() {
        let ip = format!("198.51.100.{}", i + 1);
        follow(p, &format!("{n}.shop.test"), "A", &[&ip]);
    }
    follow(p, "www.shop.test", "CNAME", &["host0.shop.test."]);
    // The BindCluster reconciler restores the primary's NOTIFY list (lost
    // with the volume) — here after the zone was rebuilt, so its NOTIFYs
    // went nowhere; the periodic check sees the secondary lag and repeats
    // them.
    named.write_notify_list(&[named.secondary.endpoint()]);
    // The secondary still serves it, at the re-created zone's serial.
    let primary_serial = || harness::dig(p, &["+short", "shop.test", "SOA"]);
    let ok = wait_until(FOLLOW, || {
        harness::dig(s, &["+short", "shop.test", "SOA"]) == primary_serial()
    });
    assert!(
        ok,
        "secondary did not follow the re-created zone:\n{}",
        named.secondary.log_text()
    );
    follow(s, "host7.shop.test", "A", &["198.51.100.8"]);
    env.stop().await;
}

/// `dig +short NAME A` signed with `key` (`alg:name:secret`): the view
/// that key steers to.
fn short_signed(port: u16, key: &str, name: &str) -> Vec<String> {
    let mut v: Vec<String> = harness::dig(port, &["+short", "+norecurse", "-y", key, name, "A"])
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with(';'))
        .map(str::to_string)
        .collect();
    v.sort();
    v
}

#[track_caller]
fn follow_signed(port: u16, key: &str, name: &str, want: &[&str]) {
    let ok = wait_until(FOLLOW, || short_signed(port, key, name) == want);
    assert!(
        ok,
        "{name} A on port {port} in the key's view: {:?}, want {want:?}",
        short_signed(port, key, name)
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_view_secondary_that_missed_a_notify_catches_up_on_the_periodic_check() {
    // Periodic checks every second: they notice the secondary's view lag.
    view_secondary_catches_up(Settings {
        verify_interval: Duration::from_secs(1),
        survey_max_age: Duration::from_millis(500),
        ..test_settings()
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_view_secondary_that_missed_a_notify_catches_up_on_the_recheck_after_the_write() {
    // No periodic check within the test (600 s): only the rechecks after
    // the write (every second while the secondary lags) can notice it.
    view_secondary_catches_up(Settings {
        recheck_after_write: Duration::from_secs(1),
        survey_max_age: Duration::from_secs(30),
        ..test_settings()
    })
    .await;
}

/// A zone in a view whose change's NOTIFY reached nobody: the secondary's
/// view follows through what `settings` schedule, by the operator's own
/// NOTIFY signed with the view's key (the primary's NOTIFY list stays on a
/// sink), with no exec to read or NOTIFY.
async fn view_secondary_catches_up(settings: Settings) {
    let (env, named, watched) = setup_two_views(settings).await;
    let (p, s) = (named.primary.dns.port, named.secondary.dns.port);
    let internal = named.view_key("internal");
    let mut z = zone("int", "example.com");
    z.spec.view = Some("internal".into());
    env.create(z).await;
    env.create(record("www", "int", "www", RecordType::A, &["10.0.0.1"]))
        .await;
    env.record_phase("www", Phase::Ready).await;
    follow_signed(s, &internal, "www.example.com", &["10.0.0.1"]);
    assert!(
        short(s, "www.example.com", "A").is_empty(),
        "the external view does not have the zone"
    );
    // A second record reaches the secondary's view through its NOTIFY: none
    // is left pending to the secondary (see `NotifySink`).
    env.create(record("ftp", "int", "ftp", RecordType::A, &["10.0.0.9"]))
        .await;
    follow_signed(s, &internal, "ftp.example.com", &["10.0.0.9"]);

    // The primary's NOTIFY list for the views points at a sink: the
    // change's NOTIFY goes there, and the secondary's view keeps the old
    // record.
    let sink = NotifySink::bind();
    named.write_notify_list(&[sink.endpoint()]);
    let from = watched.len();
    env.patch_spec::<DNSRecord>("www", json!({"values": ["10.0.0.2"]}))
        .await;
    follow_signed(p, &internal, "www.example.com", &["10.0.0.2"]);
    sink.wait_for(
        "example.com.",
        harness::dig_serial(p, Some(&internal), "example.com"),
    );
    untold_but_by_the_operator(
        &short_signed(s, &internal, "www.example.com"),
        &["10.0.0.1"],
        &["10.0.0.2"],
        &watched,
        from,
        "example.com",
    );
    // The primary's list stays on the sink: only a check that sees the
    // secondary's view behind, and NOTIFYs it itself with the view's key,
    // brings it along — well before the zone's SOA refresh (hours).
    follow_signed(s, &internal, "www.example.com", &["10.0.0.2"]);
    let seen = watched.since(from);
    let key = internal.split(':').nth(1).unwrap();
    assert!(
        seen.iter()
            .any(|l| *l == format!("notify {SECONDARY} example.com {key}")),
        "the operator NOTIFYed the secondary with the view's key: {seen:?}"
    );
    assert!(
        seen.iter()
            .all(|l| !l.contains(" zonestatus ") && !l.contains(" notify ")),
        "no rndc zonestatus or rndc notify: {seen:?}"
    );

    // A delete alone (its serial read back in the update's round, signed
    // with the view's key) leaves both servers' view, with no exec either.
    let from = watched.len();
    env.delete::<DNSRecord>("ftp").await;
    env.gone::<DNSRecord>("ftp").await;
    follow_signed(p, &internal, "ftp.example.com", &[]);
    follow_signed(s, &internal, "ftp.example.com", &[]);
    let seen = watched.since(from);
    assert!(
        seen.iter().all(|l| !l.starts_with("exec ")),
        "a delete in a view runs nothing in a pod: {seen:?}"
    );
    env.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_view_zone_re_created_on_an_empty_primary_starts_above_the_secondarys_serial() {
    // Periodic checks every second: they notice the primary lost the zone.
    let settings = Settings {
        verify_interval: Duration::from_secs(1),
        survey_max_age: Duration::from_millis(500),
        ..test_settings()
    };
    let (env, mut named, _) = setup_two_views(settings).await;
    let (p, s) = (named.primary.dns.port, named.secondary.dns.port);
    let internal = named.view_key("internal");
    let mut z = zone("int", "example.com");
    z.spec.view = Some("internal".into());
    env.create(z).await;
    env.create(record("www", "int", "www", RecordType::A, &["10.0.0.1"]))
        .await;
    env.record_phase("www", Phase::Ready).await;
    follow_signed(s, &internal, "www.example.com", &["10.0.0.1"]);

    // Another client moves the zone's serial a million ahead (an UPDATE of
    // the SOA in the internal view); the secondary's view follows it. A
    // zone re-created at "now" would then sit below what the secondary
    // holds, and the secondary would never transfer it again.
    let soa = harness::dig(
        p,
        &[
            "+short",
            "+norecurse",
            "-y",
            &internal,
            "example.com",
            "SOA",
        ],
    );
    let mut fields: Vec<String> = soa.split_whitespace().map(str::to_string).collect();
    assert_eq!(fields.len(), 7, "SOA of example.com in internal: {soa:?}");
    let ahead = fields[2].parse::<u32>().unwrap() + 1_000_000;
    fields[2] = ahead.to_string();
    crate::support_e2e::nsupdate(
        p,
        &internal,
        &[&format!(
            "update add example.com. 3600 SOA {}",
            fields.join(" ")
        )],
    )
    .expect("the SOA update is accepted");
    let ok = wait_until(FOLLOW, || {
        harness::dig_serial(s, Some(&internal), "example.com") == ahead
    });
    assert!(ok, "the secondary's view did not follow serial {ahead}");

    // Kill named, empty its data directory, start it again: the primary
    // comes back without the view's zone or catalog.
    named.primary.stop();
    let data = named.primary.layout.data_dir.clone();
    for entry in std::fs::read_dir(&data).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() && !path.is_symlink() {
            std::fs::remove_dir_all(&path).unwrap();
        } else {
            std::fs::remove_file(&path).unwrap();
        }
    }
    named.primary.start();
    assert!(
        short_signed(p, &internal, "www.example.com").is_empty(),
        "the volume was not empty"
    );
    env.set_pod(PRIMARY, true, 1).await;
    follow_signed(p, &internal, "www.example.com", &["10.0.0.1"]);
    // The re-created zone starts above the secondary's serial, read from
    // the secondary's internal view with that view's key.
    let recreated = harness::dig_serial(p, Some(&internal), "example.com");
    assert!(
        recreated > ahead,
        "re-created at serial {recreated}, not above the secondary's {ahead}"
    );
    // So the secondary's view takes the re-created zone's changes.
    named.write_notify_list(&[named.secondary.endpoint()]);
    env.create(record("ftp", "int", "ftp", RecordType::A, &["10.0.0.9"]))
        .await;
    follow_signed(p, &internal, "ftp.example.com", &["10.0.0.9"]);
    follow_signed(s, &internal, "ftp.example.com", &["10.0.0.9"]);
    env.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_record_says_ready_only_once_the_secondary_serves_it() {
    // No recheck or periodic check within the test (600 s): nothing but
    // the zone's own writes brings the secondary along. `www` and `ftp`
    // are Ready and on the secondary, `ftp` through its NOTIFY, so none is
    // left pending to the secondary (see `NotifySink`).
    let (env, named, _) = setup_views(test_settings(), vec![]).await;
    let (p, s) = (named.primary.dns.port, named.secondary.dns.port);
    env.create(zone("web", "web.test")).await;
    env.create(record("www", "web", "www", RecordType::A, &["192.0.2.1"]))
        .await;
    env.record_phase("www", Phase::Ready).await;
    // Ready now means the secondary answers it, without waiting.
    assert_eq!(short(s, "www.web.test", "A"), ["192.0.2.1"]);
    env.create(record("ftp", "web", "ftp", RecordType::A, &["192.0.2.9"]))
        .await;
    env.record_phase("ftp", Phase::Ready).await;
    assert_eq!(short(s, "ftp.web.test", "A"), ["192.0.2.9"]);

    // The primary's NOTIFYs go to a sink: the secondary misses the next
    // change. The primary serves the new record; the secondary, where
    // resolvers are sent too, answers NXDOMAIN: the record is not Ready.
    // After the wait for the servers it says Pending, NotServed, naming
    // the secondary and the serials.
    // `www` changes in the same write.
    let sink = NotifySink::bind();
    named.write_notify_list(&[sink.endpoint()]);
    env.create(record("api", "web", "api", RecordType::A, &["192.0.2.7"]))
        .await;
    env.patch_spec::<DNSRecord>("www", serde_json::json!({"values": ["192.0.2.2"]}))
        .await;
    follow(p, "api.web.test", "A", &["192.0.2.7"]);
    follow(p, "www.web.test", "A", &["192.0.2.2"]);
    let serial = harness::dig_serial(p, None, "web.test");
    sink.wait_for("web.test.", serial);
    let pending = env
        .wait::<DNSRecord, _>("api Pending, NotServed", "api", |r| {
            let st = r?.status.as_ref()?;
            (st.phase == Some(Phase::Pending)
                && st.conditions.iter().any(|c| c.reason == "NotServed"))
            .then(|| st.clone())
        })
        .await;
    let message = &pending
        .conditions
        .iter()
        .find(|c| c.type_ == "Ready")
        .expect("a Ready condition")
        .message;
    // The serial named is the record's own write (`api` and `www` can go
    // in two writes, the zone at the later one's serial): above what the
    // secondary serves, at most the primary's.
    let serial_after = |before: &str| -> u32 {
        let rest =
            &message[message.find(before).unwrap_or_else(|| panic!("{message}")) + before.len()..];
        rest.split(|c: char| !c.is_ascii_digit())
            .next()
            .unwrap()
            .parse()
            .unwrap()
    };
    let lagging = serial_after(&format!("pod {SECONDARY} serves serial "));
    let wanted = serial_after("the record set is at serial ");
    assert!(
        message.contains(&format!("at serial {wanted} on the primary"))
            && lagging == harness::dig_serial(s, None, "web.test")
            && lagging < wanted
            && wanted <= serial,
        "{message} (the primary at {serial})"
    );
    assert!(
        short(s, "api.web.test", "A").is_empty(),
        "the secondary does not serve it"
    );
    // The changed record: not Ready at its new generation either.
    env.wait::<DNSRecord, _>("www Pending, NotServed at generation 2", "www", |r| {
        let st = r?.status.as_ref()?;
        (st.phase == Some(Phase::Pending)
            && st.observed_generation == Some(2)
            && st.conditions.iter().any(|c| c.reason == "NotServed"))
        .then_some(())
    })
    .await;
    assert_eq!(short(s, "www.web.test", "A"), ["192.0.2.1"]);

    // The NOTIFY list back: the next change reaches the secondary with
    // both records, and both say Ready (the first one's wait went on past
    // its Pending).
    named.write_notify_list(&[named.secondary.endpoint()]);
    env.create(record(
        "mail",
        "web",
        "mail",
        RecordType::A,
        &["192.0.2.25"],
    ))
    .await;
    env.record_phase("api", Phase::Ready).await;
    env.record_phase("mail", Phase::Ready).await;
    env.record_phase("www", Phase::Ready).await;
    assert_eq!(short(s, "api.web.test", "A"), ["192.0.2.7"]);
    assert_eq!(short(s, "www.web.test", "A"), ["192.0.2.2"]);
    assert_eq!(short(s, "mail.web.test", "A"), ["192.0.2.25"]);
    env.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_zone_says_ready_only_once_the_secondary_serves_it() {
    // As for records: a new zone and a changed one say Ready only once the
    // secondary serves them. No recheck or periodic check within the test.
    let (env, named, _) = setup_views(test_settings(), vec![]).await;
    let (p, s) = (named.primary.dns.port, named.secondary.dns.port);
    env.create(zone("web", "web.test")).await;
    env.create(record("www", "web", "www", RecordType::A, &["192.0.2.1"]))
        .await;
    env.record_phase("www", Phase::Ready).await;
    env.zone_phase("web", Phase::Ready).await;
    // A second record through its NOTIFY, so none is left pending to the
    // secondary (see `NotifySink`).
    env.create(record("ftp", "web", "ftp", RecordType::A, &["192.0.2.9"]))
        .await;
    env.record_phase("ftp", Phase::Ready).await;
    follow(s, "ftp.web.test", "A", &["192.0.2.9"]);

    // The secondary misses the catalog's NOTIFY of a new zone and the
    // zone's NOTIFY of a changed one.
    let sink = NotifySink::bind();
    named.write_notify_list(&[sink.endpoint()]);
    env.create(zone("late", "late.test")).await;
    env.patch_spec::<BindZone>(
        "web",
        serde_json::json!({"records": [{"name": "mx", "type": "A", "values": ["192.0.2.25"]}]}),
    )
    .await;
    follow(p, "mx.web.test", "A", &["192.0.2.25"]);
    harness::wait_until(Duration::from_secs(10), || {
        !harness::dig_short(p, "late.test", "SOA").is_empty()
    });
    let not_served = |name: &'static str, generation: i64, says: &'static str| {
        let env = &env;
        async move {
            let st = env
                .wait::<BindZone, _>(&format!("{name} Pending, NotServed"), name, |z| {
                    let st = z?.status.as_ref()?;
                    (st.phase == Some(Phase::Pending)
                        && st.observed_generation == Some(generation)
                        && st.conditions.iter().any(|c| c.reason == "NotServed"))
                    .then(|| st.clone())
                })
                .await;
            let message = &st
                .conditions
                .iter()
                .find(|c| c.type_ == "Ready")
                .expect("a Ready condition")
                .message;
            assert!(message.contains(says), "{name}: {message}");
        }
    };
    not_served("late", 1, "pod c-1 does not answer for the zone").await;
    not_served("web", 2, "pod c-1 serves serial").await;
    assert!(harness::dig_short(s, "late.test", "SOA").is_empty());
    assert!(harness::dig_short(s, "mx.web.test", "A").is_empty());

    // The NOTIFY list back; the next changes (a record in web, a new zone
    // in the catalog) bring the secondary along, and both zones say Ready.
    named.write_notify_list(&[named.secondary.endpoint()]);
    env.create(record("api", "web", "api", RecordType::A, &["192.0.2.7"]))
        .await;
    env.create(zone("later", "later.test")).await;
    for z in ["web", "late", "later"] {
        env.zone_phase(z, Phase::Ready).await;
    }
    assert_eq!(harness::dig_short(s, "mx.web.test", "A"), ["192.0.2.25"]);
    for z in ["late.test", "later.test"] {
        assert!(
            !harness::dig_short(s, z, "SOA").is_empty(),
            "{z} on the secondary"
        );
    }
    env.stop().await;
}

/// The start of the missed-NOTIFY tests outside views: no periodic check
/// within the test (600 s), rechecks every second after a write; zone
/// `web.test` with `www` (Ready) and `ftp` answered by the secondary, `ftp`
/// through its NOTIFY, so none is left pending to the secondary (see
/// `NotifySink`); with what the operator ran and NOTIFYed.
async fn web_zone_on_the_secondary_with_rechecks() -> (Env, Named, Arc<Watched>) {
    let (env, named, watched) = setup_views(
        Settings {
            recheck_after_write: Duration::from_secs(1),
            survey_max_age: Duration::from_secs(30),
            ..test_settings()
        },
        vec![],
    )
    .await;
    let s = named.secondary.dns.port;
    env.create(zone("web", "web.test")).await;
    env.create(record("www", "web", "www", RecordType::A, &["192.0.2.1"]))
        .await;
    env.record_phase("www", Phase::Ready).await;
    follow(s, "www.web.test", "A", &["192.0.2.1"]);
    env.create(record("ftp", "web", "ftp", RecordType::A, &["192.0.2.9"]))
        .await;
    follow(s, "ftp.web.test", "A", &["192.0.2.9"]);
    (env, named, watched)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn new_zones_behind_on_a_secondary_share_one_catalog_notify() {
    // Six new zones join the catalog while the primary's NOTIFYs go to a
    // sink: each zone's recheck sees the secondary lacking it with its
    // catalog behind. The catalog brings them all, so the secondary gets
    // the catalog's NOTIFY (once per serial and recheck interval, shared
    // by the six), and none of the zones' own (it would refuse them).
    let (env, named, watched) = web_zone_on_the_secondary_with_rechecks().await;
    let s = named.secondary.dns.port;
    let sink = NotifySink::bind();
    named.write_notify_list(&[sink.endpoint()]);
    let from = watched.len();
    const ZONES: usize = 6;
    for i in 0..ZONES {
        env.create(zone(&format!("z{i}"), &format!("z{i}.test")))
            .await;
        env.create(record(
            &format!("r{i}"),
            &format!("z{i}"),
            "www",
            RecordType::A,
            &[&format!("192.0.2.{}", 10 + i)],
        ))
        .await;
    }
    for i in 0..ZONES {
        follow(
            s,
            &format!("www.z{i}.test"),
            "A",
            &[&format!("192.0.2.{}", 10 + i)],
        );
    }
    let seen = watched.since(from);
    let to_secondary = |zone: &str| {
        seen.iter()
            .filter(|l| l.starts_with(&format!("notify {SECONDARY} {zone} ")))
            .count()
    };
    let catalog = to_secondary(support::CATALOG);
    assert!(
        (1..=2).contains(&catalog),
        "{catalog} catalog NOTIFYs for {ZONES} zones: {seen:?}"
    );
    for i in 0..ZONES {
        assert_eq!(
            to_secondary(&format!("z{i}.test")),
            0,
            "a zone the secondary lacks is brought by the catalog: {seen:?}"
        );
    }
    env.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_secondary_that_missed_the_catalogs_notify_gets_a_new_zone_on_the_recheck() {
    // As below, for a zone the secondary lacks: its NOTIFY would be
    // refused; the catalog's brings it.
    let (env, named, watched) = web_zone_on_the_secondary_with_rechecks().await;
    let (p, s) = (named.primary.dns.port, named.secondary.dns.port);

    // A new zone joins the catalog while the primary's NOTIFYs go to a
    // sink: the secondary neither knows the zone nor hears of the catalog.
    let sink = NotifySink::bind();
    named.write_notify_list(&[sink.endpoint()]);
    let from = watched.len();
    env.create(zone("shop", "shop.test")).await;
    env.create(record("api", "shop", "api", RecordType::A, &["192.0.2.7"]))
        .await;
    follow(p, "api.shop.test", "A", &["192.0.2.7"]);
    let catalog = format!("{}.", support::CATALOG);
    sink.wait_for(&catalog, harness::dig_serial(p, None, support::CATALOG));
    untold_but_by_the_operator(
        &short(s, "api.shop.test", "A"),
        &[],
        &["192.0.2.7"],
        &watched,
        from,
        support::CATALOG,
    );
    // The operator's recheck NOTIFYs the secondary of the catalog.
    follow(s, "api.shop.test", "A", &["192.0.2.7"]);
    told_by_the_operator(&watched, from, support::CATALOG);
    env.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_secondary_that_missed_a_notify_catches_up_on_the_recheck_after_the_write() {
    // No periodic check within the test (600 s): only the rechecks after
    // the write (every second while the secondary lags) can notice it. As
    // when a secondary's refresh fails while its transfer key changes: it
    // retries at the zone's SOA retry timer, unless NOTIFYed again. The
    // operator NOTIFYs it itself, over DNS: the primary's NOTIFY list
    // never points at the secondary again.
    let (env, named, watched) = web_zone_on_the_secondary_with_rechecks().await;
    let (p, s) = (named.primary.dns.port, named.secondary.dns.port);

    // The change's NOTIFY goes to a sink: the secondary keeps the old record.
    let sink = NotifySink::bind();
    named.write_notify_list(&[sink.endpoint()]);
    let from = watched.len();
    env.patch_spec::<DNSRecord>("www", json!({"values": ["192.0.2.2"]}))
        .await;
    follow(p, "www.web.test", "A", &["192.0.2.2"]);
    sink.wait_for("web.test.", harness::dig_serial(p, None, "web.test"));
    untold_but_by_the_operator(
        &short(s, "www.web.test", "A"),
        &["192.0.2.1"],
        &["192.0.2.2"],
        &watched,
        from,
        "web.test",
    );
    // The primary's list stays on the sink: what tells the secondary is the
    // operator's own NOTIFY, sent to it over DNS by the recheck that sees
    // it behind, well before the zone's SOA refresh (hours).
    follow(s, "www.web.test", "A", &["192.0.2.2"]);
    told_by_the_operator(&watched, from, "web.test");

    // A delete: its write is followed at once by another pass (the
    // DNSRecord's release wakes the zone), which must keep the recheck the
    // write scheduled; the secondary loses the record through it.
    env.delete::<DNSRecord>("ftp").await;
    env.gone::<DNSRecord>("ftp").await;
    follow(p, "ftp.web.test", "A", &[]);
    follow(s, "ftp.web.test", "A", &[]);
    env.stop().await;
}
