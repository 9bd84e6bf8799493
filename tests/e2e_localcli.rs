//! `bind-operator local` as a user meets it (issue #15 items 2-8, #14 item
//! 6, #10 item 4), on the real binary and real named: whatever kills local
//! mode takes its named processes with it, what it writes is the user's
//! only, its output is one line per change plus a table when it settles,
//! `converged` means every pod answers, and an idle local mode makes no
//! API requests.

use crate::support_e2e as support;

use std::os::unix::fs::PermissionsExt as _;
use std::path::Path;
use std::time::{Duration, Instant};

use bind_operator::local::command::Backend;
use bind_operator::local::report::{PodRole, Snapshot};
use support::{Fixture, blocking, dig, processes_under, wait_no_processes_under};
use tokio_util::sync::CancellationToken;

/// How long named may take to die after local mode did.
const DEATH: Duration = Duration::from_secs(5);

#[test]
fn sigkill_and_sighup_of_local_leave_no_named_and_a_restart_stops_stale_pods() {
    let f = Fixture::examples();
    let local = f.start(&[]);
    local.wait_all_ready();
    assert!(!processes_under(&f.state).is_empty());

    // SIGKILL: no destructor runs; the kernel's parent-death signal must.
    local.signal(libc::SIGKILL);
    local
        .exit_status(Duration::from_secs(10))
        .expect("SIGKILL ends local mode");
    let left = wait_no_processes_under(&f.state, DEATH);
    assert!(left.is_empty(), "left running after SIGKILL: {left:?}");
    println!("after SIGKILL: no process under the state dir");
    drop(local);

    // A process an earlier run left behind (as if it had escaped): its pid
    // file in a pod directory names it; the next start stops it first.
    let pod_dir = f.state.join("default").join("example-0");
    let mut stale = {
        use std::os::unix::process::CommandExt as _;
        std::process::Command::new("sleep")
            .arg("120")
            .process_group(0)
            .spawn()
            .unwrap()
    };
    let stat = std::fs::read_to_string(format!("/proc/{}/stat", stale.id())).unwrap();
    let start_time = stat[stat.rfind(')').unwrap() + 1..]
        .split_whitespace()
        .nth(19)
        .unwrap()
        .to_owned();
    std::fs::write(
        pod_dir.join("container.pid"),
        format!("{} {start_time}\n", stale.id()),
    )
    .unwrap();

    // SIGHUP (the terminal closed) stops cleanly, like SIGTERM.
    let local = f.start(&[]);
    let deadline = Instant::now() + Duration::from_secs(10);
    let stale_status = loop {
        if let Some(status) = stale.try_wait().unwrap() {
            break status;
        }
        assert!(Instant::now() < deadline, "the stale process still runs");
        std::thread::sleep(Duration::from_millis(50));
    };
    use std::os::unix::process::ExitStatusExt as _;
    assert_eq!(stale_status.signal(), Some(libc::SIGKILL));
    local.wait_all_ready();
    local.signal(libc::SIGHUP);
    let status = local
        .exit_status(Duration::from_secs(20))
        .expect("SIGHUP ends local mode");
    assert!(status.success(), "exit after SIGHUP: {status}");
    let left = wait_no_processes_under(&f.state, DEATH);
    assert!(left.is_empty(), "left running after SIGHUP: {left:?}");
    assert!(local.stderr().contains("SIGHUP"), "{}", local.stderr());
}

/// Every directory and file under `dir` (symlinks not followed) with its
/// mode.
fn modes(dir: &Path, out: &mut Vec<Entry>) {
    for entry in std::fs::read_dir(dir).unwrap().flatten() {
        let meta = std::fs::symlink_metadata(entry.path()).unwrap();
        if meta.file_type().is_symlink() {
            continue;
        }
        out.push(Entry::of(&entry.path()));
        if meta.is_dir() {
            modes(&entry.path(), out);
        }
    }
}

/// One path under the state dir: mode bits, group, and whether a directory.
#[derive(Debug)]
struct Entry {
    path: std::path::PathBuf,
    mode: u32,
    gid: u32,
    dir: bool,
}

impl Entry {
    fn of(path: &Path) -> Entry {
        use std::os::unix::fs::MetadataExt as _;
        let meta = std::fs::symlink_metadata(path).unwrap();
        Entry {
            path: path.to_owned(),
            mode: meta.permissions().mode() & 0o7777,
            gid: meta.gid(),
            dir: meta.is_dir(),
        }
    }
}

/// The pods' user and fsGroup when local mode runs as root (the pod
/// template's default, as in a cluster).
const POD_GROUP: u32 = 53;

#[test]
fn what_local_mode_writes_is_readable_by_the_user_only() {
    let f = Fixture::examples();
    let local = f.start(&[]);
    local.wait_all_ready();
    // As root, named runs as the pod's user (uid/gid 53, fsGroup 53), as in
    // a cluster: that user reaches its files through its group, and the
    // directories above them are searchable (never listable) by others.
    // Otherwise everything is the invoking user's alone.
    let root = unsafe { libc::geteuid() } == 0;
    let mut all = vec![Entry::of(&f.state)];
    modes(&f.state, &mut all);
    let open: Vec<_> = all
        .iter()
        .filter(|e| {
            // Search (x) alone on a directory lets no one list or read it.
            let (group, other) = if root && e.dir {
                (0o060, 0o006)
            } else {
                (0o070, 0o007)
            };
            let group_ok = root && e.gid == POD_GROUP;
            e.mode & other != 0 || (e.mode & group != 0 && !group_ok)
        })
        .collect();
    assert!(open.is_empty(), "readable by others: {open:#?}");
    let keys: Vec<_> = all
        .iter()
        .filter(|e| {
            let name = e.path.file_name().unwrap().to_string_lossy();
            name == "keys.conf" || name == "rndc.key"
        })
        .collect();
    assert!(keys.len() >= 2, "key files found: {keys:?}");
    for e in &keys {
        // The kubelet's projected Secret mode for an fsGroup pod, or the
        // user's own file.
        let (mode, gid) = if root {
            (0o440, POD_GROUP)
        } else {
            (0o600, e.gid)
        };
        assert_eq!((e.mode, e.gid), (mode, gid), "{}", e.path.display());
    }
    assert_eq!(
        all[0].mode,
        if root { 0o711 } else { 0o700 },
        "the state directory"
    );
    println!(
        "{} paths under the state dir (as root: {root}), none open to other users; key files: {:?}",
        all.len(),
        keys.iter()
            .map(|e| (e.path.file_name().unwrap(), format!("{:o}", e.mode), e.gid))
            .collect::<Vec<_>>()
    );
    local.stop();
}

fn tables(stdout: &str) -> usize {
    stdout.matches(" objects ready, ").count()
}

#[test]
fn output_is_a_line_per_change_and_a_table_when_settled() {
    let f = Fixture::examples();
    let local = f.start(&["--log-level", "info"]);
    let s = local.wait_all_ready();
    // The table follows the status by a moment.
    let deadline = Instant::now() + support::WAIT;
    while tables(&local.stdout()) == 0 && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(50));
    }
    let start = local.stdout();
    println!("--- stdout after start ---\n{start}");
    assert_eq!(tables(&start), 1, "one table when settled:\n{start}");
    assert!(start.contains("loaded 6 objects from 4 files"), "{start}");
    assert!(
        start.contains("BindZone default/example-com: (new) -> Pending"),
        "{start}"
    );
    assert!(
        start.contains("6/6 objects ready, 2 pods, converged; ready"),
        "{start}"
    );
    assert!(start.lines().count() < 45, "{start}");

    // An edit: which file and object changed, the new state, one table.
    let secondary = s
        .pods
        .iter()
        .find(|p| p.role == PodRole::Secondary)
        .unwrap();
    let text = f
        .read("dnsrecords.yaml")
        .replace("192.0.2.11", "192.0.2.12");
    f.write("dnsrecords.yaml", &text);
    support::wait_answer(
        secondary.dns.port(),
        "www.example.com",
        "A",
        &["192.0.2.10".into(), "192.0.2.12".into()],
        &local,
    );
    let deadline = Instant::now() + support::WAIT;
    while tables(&local.stdout()) < 2 && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(50));
    }
    let all = local.stdout();
    let edit = &all[start.len()..];
    println!("--- stdout of one edit ---\n{edit}");
    assert!(
        edit.contains("dnsrecords.yaml: DNSRecord default/www-example-com updated"),
        "{edit}"
    );
    assert_eq!(tables(edit), 1, "{edit}");
    assert!(edit.lines().count() < 30, "{edit}");

    // Asked for: SIGUSR1 prints the table.
    local.signal(libc::SIGUSR1);
    let deadline = Instant::now() + support::WAIT;
    while tables(&local.stdout()) < 3 && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(50));
    }
    assert_eq!(tables(&local.stdout()), 3, "{}", local.stdout());
    // stderr is a file here: no colour codes.
    let stderr = local.stderr();
    assert!(!stderr.is_empty());
    assert!(!stderr.contains('\u{1b}'), "ANSI codes in {stderr}");
    local.stop();
}

/// Contradictions a user could see in one snapshot.
fn contradictions(s: &Snapshot) -> Vec<String> {
    let mut bad = Vec::new();
    for o in &s.objects {
        if !o.ready && o.phase == "Ready" {
            bad.push(format!("{} {} READY no / PHASE Ready", o.kind, o.name));
        }
        if o.ready && o.phase != "Ready" {
            bad.push(format!(
                "{} {} READY yes / PHASE {}",
                o.kind, o.name, o.phase
            ));
        }
        if o.reason == "PrimaryNotReady"
            && s.pods
                .iter()
                .any(|p| p.role == PodRole::Primary && p.ready && o.message.contains(&p.name))
        {
            bad.push(format!(
                "{} {} PrimaryNotReady beside a ready primary",
                o.kind, o.name
            ));
        }
        if o.kind == "BindCluster" && o.ready && s.pods.iter().any(|p| !p.ready) {
            bad.push(format!(
                "BindCluster {} Ready beside a pod not ready",
                o.name
            ));
        }
    }
    if s.ready != (s.objects.iter().all(|o| o.ready) && s.pods.iter().all(|p| p.ready)) {
        bad.push("ready disagrees with the rows".into());
    }
    bad
}

#[test]
fn converged_means_every_pod_answers_and_the_status_never_contradicts_itself() {
    let f = Fixture::examples();
    let local = f.start(&[]);
    // The first converged status: the secondary must already answer.
    let first = local.wait_status_for("converged", support::STARTUP, |s| s.converged);
    let secondary = first
        .pods
        .iter()
        .find(|p| p.role == PodRole::Secondary)
        .unwrap()
        .clone();
    let answer = dig(secondary.dns.port(), "www.example.com", "A");
    assert_eq!(
        answer,
        ["192.0.2.10", "192.0.2.11"],
        "converged, but the secondary answers {answer:?}\n{}",
        local.diagnostics()
    );
    assert!(first.ready, "{first:?}");

    // Records change while the status is sampled.
    let mut samples = 0;
    let mut seen_unconverged = 0;
    for round in 0..6 {
        let value = format!("192.0.2.{}", 100 + round);
        let text = support::record("www-example-com", "www", "A", &[&value]);
        f.write("dnsrecords.yaml", &text);
        let deadline = Instant::now() + support::WAIT;
        let want = std::slice::from_ref(&value);
        loop {
            if let Some(s) = local.status() {
                samples += 1;
                let bad = contradictions(&s);
                assert!(bad.is_empty(), "sample {samples}: {bad:?}\n{s:#?}");
                if !s.converged {
                    seen_unconverged += 1;
                }
                // Done when converged and both pods serve the new value.
                if s.converged && dig(secondary.dns.port(), "www.example.com", "A") == want {
                    assert_eq!(dig(first.pods[0].dns.port(), "www.example.com", "A"), want);
                    break;
                }
            }
            assert!(
                Instant::now() < deadline,
                "round {round} never converged\n{}",
                local.diagnostics()
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }
    println!(
        "{samples} status samples over 6 edits, {seen_unconverged} not converged, no contradiction"
    );
    local.stop();
}

/// What local mode talks to, for the request counts.
const RESOURCES: [&str; 12] = [
    "bindclusters",
    "bindtsigkeys",
    "bindzones",
    "dnsrecords",
    "pods",
    "statefulsets",
    "configmaps",
    "secrets",
    "services",
    "namespaces",
    "events",
    "leases",
];

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn idle_local_mode_makes_no_api_requests_and_edits_still_apply() {
    let f = Fixture::examples();
    let mode = support::local_in_process(&f, Backend::InMemory).await;
    let mem = mode.memapi().expect("in-memory API").clone();
    let stop = CancellationToken::new();
    let serving = tokio::spawn(mode.serve(stop.clone().cancelled_owned()));
    let state = f.state.clone();
    let ready = blocking(move || {
        let deadline = Instant::now() + support::STARTUP;
        loop {
            if let Some(s) = support::read_status(&state).filter(support::all_ready) {
                return s;
            }
            assert!(Instant::now() < deadline, "never ready");
            std::thread::sleep(Duration::from_millis(100));
        }
    })
    .await;

    // Wait for the tail of convergence to pass, then count everything. The
    // tail includes the recheck after a zone's last write, which surveys the
    // secondaries and writes `status.servers` once they caught up
    // (RECHECK_AFTER_WRITE later): quiet means longer than that without a
    // request.
    let quiet = bind_operator::controller::zonesync::RECHECK_AFTER_WRITE + Duration::from_secs(1);
    let quiet_by = Instant::now() + support::WAIT;
    loop {
        mem.reset_counts();
        tokio::time::sleep(quiet).await;
        if mem.count_verb(bind_operator::local::memapi::Verb::Get)
            + mem.count_verb(bind_operator::local::memapi::Verb::List)
            + mem.writes()
            == 0
        {
            break;
        }
        assert!(Instant::now() < quiet_by, "never quiet after convergence");
    }
    mem.reset_counts();
    let rv = mem.resource_version();
    let idle = Duration::from_secs(8);
    tokio::time::sleep(idle).await;
    let requests: u64 = [
        bind_operator::local::memapi::Verb::Get,
        bind_operator::local::memapi::Verb::List,
        bind_operator::local::memapi::Verb::Watch,
        bind_operator::local::memapi::Verb::Create,
        bind_operator::local::memapi::Verb::Update,
        bind_operator::local::memapi::Verb::Patch,
        bind_operator::local::memapi::Verb::Delete,
    ]
    .into_iter()
    .map(|v| {
        let n = mem.count_verb(v);
        if n > 0 {
            let by: Vec<_> = RESOURCES
                .iter()
                .map(|r| (*r, mem.count(v, r)))
                .filter(|(_, n)| *n > 0)
                .collect();
            println!("idle: {n} {v:?} requests: {by:?}");
        }
        n
    })
    .sum();
    println!(
        "idle for {idle:?} after convergence: {requests} API requests, resourceVersion {rv} -> {}",
        mem.resource_version()
    );
    // The session (directory sync and report) owns the requests on our
    // kinds and namespaces: none at all while idle (it re-applied every
    // object and re-created `default` every 30 s before). The controllers'
    // own periodic checks (a BindCluster re-reading its key Secrets now and
    // then) are theirs, read-only, and reported above.
    let verbs = [
        bind_operator::local::memapi::Verb::Get,
        bind_operator::local::memapi::Verb::List,
        bind_operator::local::memapi::Verb::Watch,
        bind_operator::local::memapi::Verb::Create,
        bind_operator::local::memapi::Verb::Patch,
        bind_operator::local::memapi::Verb::Delete,
    ];
    let sessions: u64 = RESOURCES[..4]
        .iter()
        .chain(["namespaces"].iter())
        .flat_map(|r| verbs.iter().map(|v| mem.count(*v, r)))
        .sum();
    assert_eq!(
        sessions, 0,
        "requests on our kinds or namespaces while idle"
    );
    assert_eq!(mem.writes(), 0, "writes while idle");
    assert_eq!(mem.resource_version(), rv, "writes while idle");
    assert!(requests <= 4, "{requests} requests while idle");

    // A file edit still applies within seconds.
    let edited = Instant::now();
    let text = f
        .read("dnsrecords.yaml")
        .replace("192.0.2.11", "192.0.2.13");
    f.write("dnsrecords.yaml", &text);
    let primary = support::primary(&ready, "example").dns.port();
    let state = f.state.clone();
    blocking(move || {
        support::wait_answer(
            primary,
            "www.example.com",
            "A",
            &["192.0.2.10".into(), "192.0.2.13".into()],
            state.as_path(),
        )
    })
    .await;
    println!("edit served {:?} after the write", edited.elapsed());

    stop.cancel();
    tokio::time::timeout(Duration::from_secs(20), serving)
        .await
        .expect("local mode stops")
        .unwrap();
}
