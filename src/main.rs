//! The `bind-operator` binary: parses flags and wires the library together.
//! Logic lives in the library; each subcommand is a thin call into it.

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Args, Parser, Subcommand};

/// With the `bench-alloc` feature every allocation carries its side, so
/// `bind-operator bench` can report the operator's heap apart from the
/// in-memory API's (see `local::bench::alloc`; off by default: it costs a
/// 16-byte header per allocation).
#[cfg(feature = "bench-alloc")]
#[global_allocator]
static ALLOC: bind_operator::local::bench::alloc::TaggingAllocator =
    bind_operator::local::bench::alloc::TaggingAllocator;

/// mimalloc, not glibc's malloc: the operator allocates and frees many
/// small objects on every worker thread (watch events, statuses, plans),
/// where glibc's malloc took a fifth of the process's CPU at 100,000
/// records (see `local::bench::alloc`, which sits on top of it too).
#[cfg(not(feature = "bench-alloc"))]
#[global_allocator]
static ALLOC: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// Turns transparent huge pages off for this process (and what it
/// starts). With THP `always` (Debian's and RHEL's default) every fresh
/// 2 MiB of heap that mimalloc touches is zeroed whole on its first fault,
/// and memory purged after a burst is faulted and zeroed again at the
/// next: at 10,000 DNSRecords created at once, clearing pages was a fifth
/// of the process's CPU (`perf`: `clear_page_erms` under
/// `do_huge_pmd_anonymous_page`), and turning THP off here took the bench's
/// creates from 1.28 s to 0.67 s and every record on the secondary from
/// 1.65 s to 1.30 s. mimalloc has this switch (`allow_thp`) but reads it
/// when it initializes, before `main`; the process flag it would set is
/// set here instead, before the first large allocation.
fn no_transparent_huge_pages() {
    // SAFETY: prctl(PR_SET_THP_DISABLE) takes integer arguments only and
    // changes a flag of this process's memory map; it touches no memory
    // of ours. Failure (an old kernel) leaves THP as it was.
    unsafe {
        libc::prctl(libc::PR_SET_THP_DISABLE, 1, 0, 0, 0);
    }
}

/// Kubernetes operator that runs BIND9 clusters and manages their zones,
/// records and TSIG keys from custom resources.
#[derive(Parser)]
#[command(name = "bind-operator", version, about)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Print the CustomResourceDefinitions of all four kinds as one
    /// multi-document YAML (pipe into `kubectl apply -f -`).
    Crds {
        /// Instead of printing, rewrite the committed CRD files (crds/ and the
        /// Helm chart's crds/) under this repository root.
        #[arg(long, value_name = "REPO_ROOT")]
        regenerate: Option<PathBuf>,
    },
    /// Render every BindCluster in the manifests of DIR offline, into
    /// OUT/<namespace>/<cluster>/: the files its pods mount
    /// (named.conf.primary, named.conf.secondary, keys.conf, rndc.key,
    /// entrypoint.sh) and kubernetes.yaml, the objects the operator would
    /// create (Secret data redacted). Keys the operator generates in the
    /// cluster get a marked placeholder secret; the output lists the files
    /// that hold one.
    Render {
        /// Directory of manifests (YAML/JSON, multi-document; searched
        /// recursively; the same files and kinds `local` accepts).
        #[arg(short = 'f', long = "filename", value_name = "DIR")]
        dir: PathBuf,
        /// Output directory.
        #[arg(long, value_name = "OUT")]
        out: PathBuf,
        /// Address secondaries use to reach the primary (in a cluster: the
        /// primary Service's ClusterIP).
        #[arg(long, value_name = "IP", default_value = "127.0.0.1")]
        primary_address: std::net::IpAddr,
        /// Port secondaries use to reach the primary.
        #[arg(long, value_name = "PORT", default_value_t = 53)]
        primary_port: u16,
        /// Write the real material of keys with spec.secretRef, read from
        /// the Secrets in DIR (default: a placeholder, so OUT holds no
        /// secret).
        #[arg(long)]
        secrets_from_dir: bool,
    },
    /// Run the controllers against the API server of the in-cluster
    /// service account, or of KUBECONFIG / ~/.kube/config.
    Run {
        /// Log filter (tracing EnvFilter syntax: `info`,
        /// `bind_operator=debug,kube=warn`, ...). RUST_LOG wins when set.
        #[arg(long, value_name = "FILTER", default_value = "info")]
        log_level: String,
        /// Log as JSON lines instead of text.
        #[arg(long)]
        log_json: bool,
        /// Serve GET /healthz, /readyz and /metrics on this address
        /// [default: BIND_OPERATOR_HEALTH_ADDR, else 0.0.0.0:8080].
        #[arg(long, value_name = "ADDR")]
        health_addr: Option<std::net::SocketAddr>,
        /// Reconcile only while holding a Lease in POD_NAMESPACE, as
        /// POD_NAME (for more than one replica)
        /// [default: BIND_OPERATOR_LEADER_ELECTION, else off].
        #[arg(long)]
        leader_election: bool,
        /// Watch only these namespaces (comma-separated); the operator then
        /// needs Roles in them only, no ClusterRole
        /// [default: BIND_OPERATOR_WATCH_NAMESPACES, else every namespace].
        #[arg(long, value_name = "NS,NS")]
        watch_namespaces: Option<String>,
    },
    /// Serve real DNS from the manifests in DIR on this machine, with no
    /// cluster: an in-memory Kubernetes API, the controllers, and a local
    /// kubelet that runs `named` per pod on 127.0.0.1 (ports in the printed
    /// table and in STATE_DIR/status.json). DIR is kept in sync while
    /// running; Ctrl-C stops every named.
    Local {
        /// Directory of manifests (YAML/JSON, multi-document; searched
        /// recursively).
        #[arg(short = 'f', long = "filename", value_name = "DIR")]
        dir: PathBuf,
        /// Keep pods' files and status.json here (default: a temporary
        /// directory removed on exit).
        #[arg(long, value_name = "DIR")]
        state_dir: Option<PathBuf>,
        /// First port handed out; each pod takes a DNS and a control port.
        #[arg(long, value_name = "PORT", default_value_t = bind_operator::local::command::DEFAULT_BASE_PORT)]
        base_port: u16,
        /// Exit once everything has settled: 0 if every object is Ready,
        /// 1 if some are not (they are printed), 2 if it did not settle in
        /// time (3: local mode could not run at all).
        #[arg(long)]
        once: bool,
        /// With --once: give up after this many seconds.
        #[arg(long, value_name = "SECS", requires = "once", default_value_t = bind_operator::local::command::DEFAULT_ONCE_TIMEOUT.as_secs())]
        timeout: u64,
        /// Serve the BIND pods of a real API server instead (KUBECONFIG,
        /// ~/.kube/config, or the given file): apply DIR there, run the
        /// controllers here, run its pods locally. For a control plane
        /// without kubelets.
        #[arg(long, value_name = "FILE", num_args = 0..=1)]
        kubeconfig: Option<Option<PathBuf>>,
        /// Log filter (tracing EnvFilter syntax); logs go to stderr.
        /// RUST_LOG wins when set.
        #[arg(long, value_name = "FILTER", default_value = "warn")]
        log_level: String,
        /// Serve GET /metrics (the operator's and every local pod's named
        /// statistics, as in a cluster) on this address, e.g.
        /// 127.0.0.1:9090.
        #[arg(long, value_name = "ADDR")]
        metrics_addr: Option<std::net::SocketAddr>,
    },
    /// Import zones an existing BIND serves into manifests (a BindZone per
    /// zone, a DNSRecord per RRset) under --out, checked by the operator's
    /// own validation; prints what was skipped and why.
    Import {
        #[command(subcommand)]
        source: ImportSource,
    },
    /// Measure how fast DNSRecords answer on a BindCluster's primary and
    /// secondary (in-memory API, real controllers, local named), against a
    /// per-record nsupdate baseline, and print a PASS/FAIL verdict per
    /// target of issues 12 and 30.
    Bench {
        /// Scenarios to run (comma-separated): batched, baseline, at-once,
        /// converged, latency, primary-restart, restart; and catalog-consumer (not
        /// run unless named: a second cluster consuming the first one's catalog).
        #[arg(long, value_name = "NAME", value_delimiter = ',', default_values_t = bind_operator::local::bench::ScenarioKind::ALL)]
        scenarios: Vec<bind_operator::local::bench::ScenarioKind>,
        /// Batched scenarios to run, by record count (repeatable, or
        /// comma-separated: --records 1000,10000).
        #[arg(long = "records", value_name = "N", value_delimiter = ',', default_values_t = bind_operator::local::bench::DEFAULT_RECORDS)]
        records: Vec<usize>,
        /// BindZones the records are spread over.
        #[arg(long, value_name = "N", default_value_t = bind_operator::local::bench::DEFAULT_ZONES)]
        zones: usize,
        /// Records of the per-record nsupdate baseline (0: skip it).
        #[arg(long, value_name = "N", default_value_t = bind_operator::local::bench::DEFAULT_BASELINE_RECORDS)]
        baseline_records: usize,
        /// Zones on the source cluster of the catalog-consumer scenario.
        #[arg(long, value_name = "N", default_value_t = bind_operator::local::bench::consumer::DEFAULT_CONSUMER_ZONES)]
        consumer_zones: usize,
        /// Zones of the at-once scenario.
        #[arg(long, value_name = "N", default_value_t = bind_operator::local::bench::DEFAULT_AT_ONCE_ZONES)]
        at_once_zones: usize,
        /// DNSRecords per zone of the at-once scenario.
        #[arg(long, value_name = "N", default_value_t = bind_operator::local::bench::DEFAULT_AT_ONCE_RECORDS)]
        at_once_records: usize,
        /// Records of the converged scenario (over --zones).
        #[arg(long, value_name = "N", default_value_t = bind_operator::local::bench::DEFAULT_CONVERGED_RECORDS)]
        converged_records: usize,
        /// DNSRecords the latency scenario creates and deletes, one at a time.
        #[arg(long, value_name = "N", default_value_t = bind_operator::local::bench::DEFAULT_LATENCY_RECORDS)]
        latency_records: usize,
        /// How long the converged cluster is held, in seconds (shorten for
        /// a smoke run).
        #[arg(long, value_name = "SECS", default_value_t = bind_operator::local::bench::DEFAULT_CONVERGED_HOLD.as_secs())]
        converged_secs: u64,
        /// Zones of the primary-restart scenario.
        #[arg(long, value_name = "N", default_value_t = bind_operator::local::bench::DEFAULT_PRIMARY_RESTART_ZONES)]
        primary_restart_zones: usize,
        /// DNSRecords per zone of the primary-restart scenario.
        #[arg(long, value_name = "N", default_value_t = bind_operator::local::bench::DEFAULT_PRIMARY_RESTART_RECORDS)]
        primary_restart_records: usize,
        /// Records of the restart scenario (over --zones).
        #[arg(long, value_name = "N", default_value_t = bind_operator::local::bench::DEFAULT_RESTART_RECORDS)]
        restart_records: usize,
        /// Pods of the BindCluster (at least 2).
        #[arg(long, value_name = "N", default_value_t = 2)]
        replicas: i32,
        /// Keep the pods' files here (default: a temp dir, removed after).
        #[arg(long, value_name = "DIR")]
        state_dir: Option<PathBuf>,
        /// First local port for the pods.
        #[arg(long, value_name = "PORT", default_value_t = bind_operator::local::bench::DEFAULT_BASE_PORT)]
        base_port: u16,
        /// Longest a scenario may wait, in seconds.
        #[arg(long, value_name = "SECS", default_value_t = 300)]
        timeout: u64,
        /// Print the report as JSON instead of a table.
        #[arg(long)]
        json: bool,
        /// No progress lines on stderr.
        #[arg(long)]
        quiet: bool,
    },
}

#[derive(Subcommand)]
enum ImportSource {
    /// A master-format zone file, read as named-checkzone reads it.
    Zone {
        /// The zone file.
        file: PathBuf,
        /// The zone's name (the file's initial $ORIGIN).
        #[arg(long, value_name = "NAME")]
        zone: String,
        #[command(flatten)]
        common: ImportArgs,
    },
    /// The zone as a running server serves it, by AXFR. A TSIG key comes
    /// from --tsig-key-file or the BIND_OPERATOR_TSIG environment variable
    /// (`[algorithm:]name:secret`), never from an argument.
    Axfr {
        /// The server, HOST or HOST:PORT.
        #[arg(long, value_name = "HOST[:PORT]")]
        server: String,
        /// The zone to transfer.
        #[arg(long, value_name = "NAME")]
        zone: String,
        /// A BIND key file (`tsig-keygen` output) holding the TSIG key.
        #[arg(long, value_name = "FILE")]
        tsig_key_file: Option<PathBuf>,
        #[command(flatten)]
        common: ImportArgs,
    },
    /// Every primary zone of a named.conf (read from its file) and the
    /// options that map onto a BindCluster; lists what does not map.
    NamedConf {
        /// The named.conf.
        file: PathBuf,
        #[command(flatten)]
        common: ImportArgs,
    },
}

#[derive(Args)]
struct ImportArgs {
    /// Output directory.
    #[arg(long, value_name = "DIR")]
    out: PathBuf,
    /// The BindCluster the zones go to (spec.clusterRef).
    #[arg(long, value_name = "NAME")]
    cluster: String,
    /// metadata.namespace of every object (default: none written).
    #[arg(long, value_name = "NS")]
    namespace: Option<String>,
    /// The BindTSIGKey of the zones' spec.updateKeyRef
    /// [default: <cluster>-update].
    #[arg(long, value_name = "NAME")]
    update_key: Option<String>,
    /// Also write the BindCluster (with what a named.conf maps onto it) and
    /// the update key's BindTSIGKey to OUT/cluster.yaml.
    #[arg(long)]
    with_cluster: bool,
    /// Fail (exit 1, nothing written) if any record is skipped.
    #[arg(long)]
    strict: bool,
}

impl ImportArgs {
    fn options(self) -> bind_operator::import::Options {
        let update_key = self
            .update_key
            .unwrap_or_else(|| format!("{}-update", self.cluster));
        bind_operator::import::Options {
            out: self.out,
            target: bind_operator::import::Target {
                cluster: self.cluster,
                namespace: self.namespace,
                update_key,
            },
            with_cluster: self.with_cluster,
            strict: self.strict,
        }
    }
}

/// Runs one import and prints its report.
fn import(source: ImportSource) -> Result<(), String> {
    use bind_operator::import::{self, axfr::TSIG_ENV, axfr::TransferKey};
    let report = match source {
        ImportSource::Zone { file, zone, common } => {
            import::run_zone(&file, &zone, &common.options())
        }
        ImportSource::Axfr {
            server,
            zone,
            tsig_key_file,
            common,
        } => {
            let key = match (tsig_key_file, std::env::var(TSIG_ENV)) {
                (Some(f), _) => Some(TransferKey::from_file(&f)),
                (None, Ok(v)) => Some(TransferKey::from_env_value(&v)),
                (None, Err(_)) => None,
            }
            .transpose()
            .map_err(|e| error_chain(&e))?;
            import::run_axfr(&server, &zone, key.as_ref(), &common.options())
        }
        ImportSource::NamedConf { file, common } => {
            import::run_named_conf(&file, &common.options())
        }
    }
    .map_err(|e| error_chain(&e))?;
    write_stdout(&report.text)?;
    if report.written {
        Ok(())
    } else {
        Err("nothing written".into())
    }
}

fn main() -> ExitCode {
    no_transparent_huge_pages();
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Crds { regenerate: None } => bind_operator::api::crdgen::all_yaml()
            .map_err(|e| error_chain(&e))
            .and_then(|yaml| write_stdout(&yaml)),
        Command::Crds {
            regenerate: Some(root),
        } => bind_operator::api::crdgen::regenerate(&root).map_err(|e| error_chain(&e)),
        Command::Render {
            dir,
            out,
            primary_address,
            primary_port,
            secrets_from_dir,
        } => render(&dir, &out, primary_address, primary_port, secrets_from_dir),
        Command::Run {
            log_level,
            log_json,
            health_addr,
            leader_election,
            watch_namespaces,
        } => bind_operator::operator::manager::run_blocking(
            bind_operator::operator::manager::Options {
                log_filter: log_level,
                log_json,
                health_addr,
                leader_election,
                watch_namespaces,
            },
        )
        .map_err(|e| error_chain(&e)),
        Command::Local {
            dir,
            state_dir,
            base_port,
            once,
            timeout,
            kubeconfig,
            log_level,
            metrics_addr,
        } => {
            use bind_operator::local::command::{EXIT_FAILED, Options, run_blocking};
            let code = run_blocking(Options {
                dir,
                state_dir,
                base_port,
                once: once.then(|| std::time::Duration::from_secs(timeout)),
                kubeconfig,
                log_filter: log_level,
                metrics_addr,
            })
            .unwrap_or_else(|e| {
                eprintln!("bind-operator: {}", error_chain(&e));
                EXIT_FAILED
            });
            return ExitCode::from(code);
        }
        Command::Import { source } => import(source),
        Command::Bench {
            scenarios,
            records,
            zones,
            baseline_records,
            consumer_zones,
            at_once_zones,
            at_once_records,
            converged_records,
            converged_secs,
            latency_records,
            primary_restart_zones,
            primary_restart_records,
            restart_records,
            replicas,
            state_dir,
            base_port,
            timeout,
            json,
            quiet,
        } => bench(
            bind_operator::local::bench::BenchOptions {
                scenarios,
                records,
                zones,
                baseline_records,
                consumer_zones,
                at_once_zones,
                at_once_records,
                converged_records,
                converged_hold: std::time::Duration::from_secs(converged_secs),
                latency_records,
                primary_restart_zones,
                primary_restart_records,
                restart_records,
                replicas,
                state_dir,
                base_port,
                timeout: std::time::Duration::from_secs(timeout),
                verbose: !quiet,
                ..Default::default()
            },
            json,
        ),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(message) => {
            eprintln!("bind-operator: {message}");
            ExitCode::FAILURE
        }
    }
}

/// Runs the offline render and prints its report.
fn render(
    dir: &std::path::Path,
    out: &std::path::Path,
    ip: std::net::IpAddr,
    port: u16,
    secrets_from_dir: bool,
) -> Result<(), String> {
    use bind_operator::offline::{RenderOptions, render_dir};
    let primary = bind_operator::bind::Endpoint::new(ip, port).map_err(|e| e.to_string())?;
    let opts = RenderOptions {
        primary,
        secrets_from_dir,
    };
    let report = render_dir(dir, out, &opts).map_err(|e| error_chain(&e))?;
    let mut text = String::new();
    for e in &report.manifest_errors {
        text.push_str(&format!("error: {e}\n"));
    }
    for c in &report.clusters {
        let rendered = match &c.result {
            Ok(rendered) => rendered,
            Err(e) => {
                text.push_str(&format!(
                    "error: BindCluster {}/{}: {e}\n",
                    c.namespace, c.name
                ));
                continue;
            }
        };
        let names: Vec<String> = rendered
            .files
            .iter()
            .filter_map(|f| f.file_name().map(|n| n.to_string_lossy().into_owned()))
            .collect();
        text.push_str(&format!(
            "rendered BindCluster {}/{} into {}: {}\n",
            c.namespace,
            c.name,
            rendered.dir.display(),
            names.join(", ")
        ));
        for p in &rendered.placeholders {
            let keys: Vec<String> = p
                .keys
                .iter()
                .map(|k| format!("{} ({})", k.key, k.placeholder.reason()))
                .collect();
            text.push_str(&format!(
                "  placeholder key material in {}: {}\n",
                p.file.display(),
                keys.join("; ")
            ));
        }
    }
    for n in &report.notes {
        text.push_str(&format!("note: {n}\n"));
    }
    write_stdout(&text)?;
    if report.success() {
        Ok(())
    } else {
        Err("some manifests or clusters could not be rendered".into())
    }
}

/// Runs the benchmark and prints its table (or JSON).
fn bench(opts: bind_operator::local::bench::BenchOptions, json: bool) -> Result<(), String> {
    bind_operator::local::bench::init_logging("warn");
    let report = bind_operator::local::bench::run_blocking(&opts).map_err(|e| error_chain(&e))?;
    write_stdout(&if json {
        report.json() + "\n"
    } else {
        report.table()
    })
}

/// Prints to stdout; a closed pipe (`| head`) is not an error.
fn write_stdout(text: &str) -> Result<(), String> {
    use std::io::Write;
    match std::io::stdout().lock().write_all(text.as_bytes()) {
        Err(e) if e.kind() != std::io::ErrorKind::BrokenPipe => {
            Err(format!("failed to write to stdout: {e}"))
        }
        _ => Ok(()),
    }
}

/// "outer: inner: root" so the user sees the cause, not only the context.
fn error_chain(err: &dyn std::error::Error) -> String {
    let mut message = err.to_string();
    let mut source = err.source();
    while let Some(cause) = source {
        message.push_str(": ");
        message.push_str(&cause.to_string());
        source = cause.source();
    }
    message
}
