//! Shared helpers for the real-API-server lane (`tests/realapi_*.rs`): a
//! kube-apiserver + kube-controller-manager started by `.ci/kube-lane.sh`
//! (from `../shared/kube/control-plane`), reached through the admin
//! kubeconfig named by [`ENV`].
//!
//! The lane is opt-in: without [`ENV`] every test prints that it skips and
//! why, so a plain `cargo test --locked` stays green and honest. With it the
//! test process must already run inside the control plane's network
//! namespace (the script does that), because Service ClusterIPs have no
//! data path outside it.
//!
//! Everything here talks to the server through `kubectl` (what a user runs),
//! one test namespace per test, deleted by a Drop guard. Tests that run an
//! operator take [`operator_lock`]: two operators (or two local modes) on
//! one API server would reconcile, and run the pods of, each other's objects.
#![allow(dead_code)]

pub mod cases;
mod process;

pub use process::Operator;

use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::sync::{Mutex, MutexGuard, OnceLock};
use std::time::{Duration, Instant};

use serde_json::Value;

/// The variable that turns the lane on: the control plane's admin kubeconfig.
pub const ENV: &str = "BIND_OPERATOR_REALAPI_KUBECONFIG";

/// Longest wait for anything the control plane and the operator do.
pub const WAIT: Duration = Duration::from_secs(60);
const POLL: Duration = Duration::from_millis(300);

/// The lane, or `None` after printing why `test` skips.
pub fn lane(test: &str) -> Option<Lane> {
    match std::env::var_os(ENV).filter(|v| !v.is_empty()) {
        Some(path) => {
            let kubeconfig = PathBuf::from(path);
            assert!(
                kubeconfig.is_file(),
                "{ENV}={} is not a file",
                kubeconfig.display()
            );
            Some(Lane { kubeconfig })
        }
        None => {
            say(&format!(
                "SKIP {test}: {ENV} is not set; this test needs a real kube-apiserver \
                 (run .ci/kube-lane.sh, which starts ../shared/kube/control-plane)"
            ));
            None
        }
    }
}

/// Prints a line past the test harness's capture (which hides `println!`
/// of passing tests): skips and what the lane measured stay visible.
pub fn say(line: &str) {
    use std::io::Write as _;
    let _ = writeln!(std::io::stderr(), "{line}");
}

/// Serialises the tests that run an operator or local mode against the one
/// API server. A panicking holder does not poison the others.
/// Held while CRDs are applied: `kubectl apply` (its server dry run too)
/// reads a CRD and then creates it, so two tests applying them at once can
/// both see "not found" and one gets `AlreadyExists`.
pub fn crd_lock() -> MutexGuard<'static, ()> {
    static LOCK: Mutex<()> = Mutex::new(());
    LOCK.lock().unwrap_or_else(|p| p.into_inner())
}

pub fn operator_lock() -> MutexGuard<'static, ()> {
    static LOCK: Mutex<()> = Mutex::new(());
    LOCK.lock().unwrap_or_else(|p| p.into_inner())
}

pub fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// A real API server reached with the admin kubeconfig.
#[derive(Clone, Debug)]
pub struct Lane {
    pub kubeconfig: PathBuf,
}

impl Lane {
    /// `kubectl ARGS` with the admin kubeconfig; stdin from `input`.
    pub fn kubectl_with(&self, kubeconfig: &Path, args: &[&str], input: Option<&str>) -> Output {
        let mut child = Command::new("kubectl")
            .args(args)
            .env("KUBECONFIG", kubeconfig)
            .stdin(if input.is_some() {
                Stdio::piped()
            } else {
                Stdio::null()
            })
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("kubectl runs");
        if let Some(text) = input {
            child
                .stdin
                .take()
                .unwrap()
                .write_all(text.as_bytes())
                .unwrap();
        }
        child.wait_with_output().unwrap()
    }

    pub fn kubectl(&self, args: &[&str]) -> Output {
        self.kubectl_with(&self.kubeconfig, args, None)
    }

    /// `kubectl ARGS`, asserting success; returns stdout.
    #[track_caller]
    pub fn ok(&self, args: &[&str]) -> String {
        ok(self.kubectl(args), args)
    }

    /// `kubectl apply -f -` of `yaml`, asserting success; returns stdout and
    /// stderr (where kubectl prints the server's warnings).
    #[track_caller]
    pub fn apply(&self, namespace: &str, yaml: &str) -> (String, String) {
        let args = ["apply", "-n", namespace, "-f", "-"];
        let out = self.kubectl_with(&self.kubeconfig, &args, Some(yaml));
        let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
        (ok(out, &args), stderr)
    }

    /// `kubectl get KIND NAME -n NS -o json`, `None` when it does not exist.
    pub fn get(&self, namespace: &str, kind: &str, name: &str) -> Option<Value> {
        let out = self.kubectl(&["get", kind, name, "-n", namespace, "-o", "json"]);
        if out.status.success() {
            return Some(serde_json::from_slice(&out.stdout).unwrap());
        }
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains("NotFound"), "kubectl get {kind} {name}: {err}");
        None
    }

    /// The items of `kubectl get KIND -n NS -o json`.
    pub fn list(&self, namespace: &str, kind: &str) -> Vec<Value> {
        let out = self.ok(&["get", kind, "-n", namespace, "-o", "json"]);
        let list: Value = serde_json::from_str(&out).unwrap();
        list["items"].as_array().cloned().unwrap_or_default()
    }

    /// Installs the CRDs (once per test process) the way a user does, with
    /// the operator's deploy/ manifests; returns what kubectl printed.
    pub fn install(&self) -> &'static Installed {
        static DONE: OnceLock<Installed> = OnceLock::new();
        DONE.get_or_init(|| {
            let base = repo().join("deploy/kustomize/base");
            let args = ["apply", "-k", base.to_str().unwrap()];
            let out = {
                let _crds = crd_lock();
                self.kubectl(&args)
            };
            let installed = Installed {
                ok: out.status.success(),
                stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
                stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
            };
            if installed.ok {
                for crd in crd_names() {
                    let name = format!("crd/{crd}");
                    self.ok(&[
                        "wait",
                        "--for=condition=Established",
                        "--timeout=60s",
                        &name,
                    ]);
                }
            }
            installed
        })
    }

    /// Like [`Self::install`], asserting that it worked.
    #[track_caller]
    pub fn installed(&self) {
        let i = self.install();
        assert!(
            i.ok,
            "kubectl apply -k deploy/kustomize/base failed:\n{}\n{}",
            i.stdout, i.stderr
        );
    }

    /// A fresh namespace `<prefix>-<pid>-<n>` with `labels`, deleted on drop.
    pub fn namespace(&self, prefix: &str, labels: &[(&str, &str)]) -> Namespace {
        static NEXT: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
        let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let name = format!("{prefix}-{}-{n}", std::process::id());
        let labels: String = labels
            .iter()
            .map(|(k, v)| format!("    {k}: \"{v}\"\n"))
            .collect();
        let yaml = format!(
            "apiVersion: v1\nkind: Namespace\nmetadata:\n  name: {name}\n  labels:\n    bind-operator-lane: \"true\"\n{labels}"
        );
        self.apply("default", &yaml);
        Namespace {
            lane: self.clone(),
            name,
        }
    }

    /// The children of the object with `uid` in `namespace`: `kind/name`
    /// for each ConfigMap, Secret, Service, StatefulSet and PDB that names
    /// it as owner.
    pub fn children(&self, namespace: &str, uid: &str) -> Vec<String> {
        let out = self.ok(&[
            "get",
            "configmaps,secrets,services,statefulsets.apps",
            "-n",
            namespace,
            "-o",
            "json",
        ]);
        let list: Value = serde_json::from_str(&out).unwrap();
        let mut found: Vec<String> = list["items"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|o| owned_by(o, uid))
            .map(|o| {
                format!(
                    "{}/{}",
                    o["kind"].as_str().unwrap(),
                    o["metadata"]["name"].as_str().unwrap()
                )
            })
            .collect();
        found.sort();
        found
    }

    /// A kubeconfig for the ServiceAccount `namespace/name`, with a token
    /// minted by `kubectl create token` (what a pod of that account holds).
    pub fn service_account_kubeconfig(&self, namespace: &str, name: &str, dir: &Path) -> PathBuf {
        let token = self.ok(&["create", "token", name, "-n", namespace, "--duration=2h"]);
        let server = self.ok(&[
            "config",
            "view",
            "--raw",
            "-o",
            "jsonpath={.clusters[0].cluster.server}",
        ]);
        let ca = self.ok(&[
            "config",
            "view",
            "--raw",
            "-o",
            "jsonpath={.clusters[0].cluster.certificate-authority-data}",
        ]);
        let path = dir.join(format!("{name}.kubeconfig"));
        let text = format!(
            "apiVersion: v1\nkind: Config\nclusters:\n- name: lane\n  cluster:\n    server: {server}\n    certificate-authority-data: {ca}\nusers:\n- name: {name}\n  user:\n    token: {}\ncontexts:\n- name: lane\n  context: {{cluster: lane, user: {name}, namespace: {namespace}}}\ncurrent-context: lane\n",
            token.trim()
        );
        std::fs::write(&path, text).unwrap();
        path
    }
}

/// What installing deploy/kustomize/base printed.
#[derive(Debug)]
pub struct Installed {
    pub ok: bool,
    pub stdout: String,
    pub stderr: String,
}

/// A test namespace, deleted (without waiting) on drop.
pub struct Namespace {
    lane: Lane,
    pub name: String,
}

impl Drop for Namespace {
    fn drop(&mut self) {
        let ns = self.name.as_str();
        let _ = self
            .lane
            .kubectl(&["delete", "namespace", ns, "--wait=false"]);
        // No operator runs any more to honour the finalizers on our kinds;
        // left in place they would keep the namespace (and its objects,
        // which the next test's operator would see) Terminating forever.
        let out = self.lane.kubectl(&[
            "get",
            "bindzones,dnsrecords,bindclusters,bindtsigkeys",
            "-n",
            ns,
            "-o",
            "name",
        ]);
        for obj in String::from_utf8_lossy(&out.stdout).lines() {
            let _ = self.lane.kubectl(&[
                "patch",
                obj,
                "-n",
                ns,
                "--type=merge",
                "-p",
                r#"{"metadata":{"finalizers":null}}"#,
            ]);
        }
        // Gone before the next test's operator starts, which would
        // otherwise reconcile (and fail to write into) what is left here.
        let name = format!("namespace/{ns}");
        let _ = self
            .lane
            .kubectl(&["wait", "--for=delete", &name, "--timeout=60s"]);
    }
}

/// The names of the project's CRDs, from crds/.
pub fn crd_names() -> Vec<String> {
    let mut names = Vec::new();
    for entry in std::fs::read_dir(repo().join("crds")).unwrap() {
        let name = entry.unwrap().file_name().to_string_lossy().into_owned();
        if let Some(crd) = name.strip_suffix(".yaml")
            && crd.contains('.')
        {
            names.push(crd.to_owned());
        }
    }
    names.sort();
    names
}

pub fn owned_by(obj: &Value, uid: &str) -> bool {
    obj["metadata"]["ownerReferences"]
        .as_array()
        .is_some_and(|refs| refs.iter().any(|r| r["uid"] == uid))
}

#[track_caller]
fn ok(out: Output, args: &[&str]) -> String {
    assert!(
        out.status.success(),
        "kubectl {} failed:\n{}{}",
        args.join(" "),
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// Polls `f` every 300 ms until it yields, for up to `limit`; on timeout
/// panics with `what` and `diag()`.
#[track_caller]
pub fn wait_for<T>(
    what: &str,
    limit: Duration,
    mut f: impl FnMut() -> Option<T>,
    diag: impl Fn() -> String,
) -> T {
    let deadline = Instant::now() + limit;
    loop {
        if let Some(v) = f() {
            return v;
        }
        if Instant::now() > deadline {
            panic!("timed out after {limit:?} waiting for {what}\n{}", diag());
        }
        std::thread::sleep(POLL);
    }
}

/// The manifests of examples/ with every object placed in `namespace`.
pub fn examples_in(namespace: &str) -> String {
    let mut files: Vec<PathBuf> = std::fs::read_dir(repo().join("examples"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "yaml"))
        .collect();
    files.sort();
    let mut out = String::new();
    for f in files {
        let text = std::fs::read_to_string(&f).unwrap();
        out.push_str("---\n");
        out.push_str(&in_namespace(&text, namespace));
        out.push('\n');
    }
    out
}

/// `yaml` with `namespace: NS` added under every top-level `metadata:`.
pub fn in_namespace(yaml: &str, namespace: &str) -> String {
    yaml.lines()
        .map(|l| {
            if l == "metadata:" {
                format!("metadata:\n  namespace: {namespace}")
            } else {
                l.to_owned()
            }
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// A DNSRecord `name` in zone `example-com` (examples/), type TXT.
pub fn txt_record(namespace: &str, name: &str, value: &str) -> String {
    format!(
        "apiVersion: bind.unkin.net/v1alpha1\nkind: DNSRecord\nmetadata:\n  name: {name}\n  namespace: {namespace}\nspec:\n  zoneRef: example-com\n  name: {name}\n  type: TXT\n  values:\n    - '\"{value}\"'\n"
    )
}
