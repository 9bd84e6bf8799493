//! Where things live inside a BIND pod, in one place: the mounted config
//! directory, the data directory named runs in, the files the entrypoint
//! writes, ports, and the tool binaries. Pure values, no I/O.
//!
//! Rendered files only ever use paths *relative* to the data directory
//! (named's working directory), so the same bytes work in the cluster and in
//! local mode. Command builders take a [`PodLayout`]: the cluster uses
//! [`PodLayout::in_cluster`], the local runtime and tests build their own
//! with temp dirs and ports.

use std::net::{IpAddr, Ipv4Addr};
use std::path::{Path, PathBuf};

/// File names inside the mounted config directory (the projected volume).
pub mod mount {
    /// named.conf for ordinal 0.
    pub const NAMED_CONF_PRIMARY: &str = "named.conf.primary";
    /// named.conf for every other ordinal.
    pub const NAMED_CONF_SECONDARY: &str = "named.conf.secondary";
    /// The container entrypoint.
    pub const ENTRYPOINT: &str = "entrypoint.sh";
    /// One `key` clause per TSIG key the cluster loads (a Secret).
    pub const KEYS_CONF: &str = "keys.conf";
    /// The rndc control key (a Secret).
    pub const RNDC_KEY: &str = "rndc.key";
}

/// Names relative to the data directory; named.conf refers to these.
pub mod data {
    /// Symlink to the primary or secondary named.conf in the mount: the path
    /// named is started with and re-reads on `rndc reconfig`.
    pub const RUN_CONF: &str = "named.conf";
    /// Symlink to the mounted config directory, so named.conf can include
    /// `config/keys.conf` relatively.
    pub const CONFIG_LINK: &str = "config";
    /// Written by the entrypoint at start: `listen-on` for this pod.
    pub const POD_LISTEN: &str = "pod-listen.conf";
    /// Written by the entrypoint at start: the `controls` clause.
    pub const POD_CONTROLS: &str = "pod-controls.conf";
    /// Written by the entrypoint at start: the `statistics-channels`
    /// clause (named's JSON statistics, read by the operator), or nothing
    /// when the pod's statistics port is 0.
    pub const POD_STATISTICS: &str = "pod-statistics.conf";
    /// Written by the entrypoint at start (empty) and rewritten by the
    /// operator: the primary's options-level `also-notify` list.
    pub const NOTIFY_TARGETS: &str = "notify-targets.conf";
    /// Prefix of the primary's NOTIFY list files: `notify-targets.conf`
    /// without views, `notify-targets.<view>.conf` included in each view.
    pub const NOTIFY_TARGETS_PREFIX: &str = "notify-targets.";
    /// Written at run time by the operator on the primary, included at top
    /// level: the server lists ([`crate::bind::render::SECONDARIES_LIST`])
    /// a zone with its own external secondaries notifies besides them.
    pub const NOTIFY_SERVERS: &str = "notify-servers.conf";

    /// The primary's NOTIFY list of one view (included in the view block;
    /// written at start by the entrypoint, rewritten by the operator).
    pub fn notify_targets_of(view: &crate::bind::ViewName) -> String {
        format!("{NOTIFY_TARGETS_PREFIX}{}.conf", view.as_str())
    }
    /// The primary's zone list outside views: every listed primary zone's
    /// stanza, concatenated (the entrypoint creates it empty; the operator
    /// rebuilds it from [`STANZA_DIR`]). named.conf includes it at the top
    /// level of the primary.
    pub const PRIMARY_ZONES: &str = "primary-zones.conf";
    /// Prefix of the primary's zone list files: [`PRIMARY_ZONES`] without
    /// views, `primary-zones.<view>.conf` included in each view.
    pub const PRIMARY_ZONES_PREFIX: &str = "primary-zones.";

    /// The primary's zone list of one view (included in the view block).
    pub fn primary_zones_of(view: &crate::bind::ViewName) -> String {
        format!("{PRIMARY_ZONES_PREFIX}{}.conf", view.as_str())
    }
    /// One file per listed primary zone, holding its one-line `zone`
    /// stanza: `zones.d/<zone>.conf`, or `zones.d/<view>/<zone>.conf` in a
    /// view. The zone lists are their concatenation.
    pub const STANZA_DIR: &str = "zones.d";

    /// The stanza file of one zone. Zone and view names are validated
    /// (letters, digits, `-`, `_`, `.`; a view never starts with `-` and
    /// has no empty label), so the path has no `/`, `..` or quote of a
    /// user's making.
    pub fn stanza_of(zone: &crate::bind::ZoneName, view: Option<&crate::bind::ViewName>) -> String {
        match view {
            Some(v) => format!("{STANZA_DIR}/{}/{}.conf", v.as_str(), zone.file_stem()),
            None => format!("{STANZA_DIR}/{}.conf", zone.file_stem()),
        }
    }
    /// Written by the entrypoint at start: rndc's client config.
    pub const RNDC_CONF: &str = "rndc.conf";
    /// Zone files and journals of primary zones, and catalog member zones on
    /// secondaries.
    pub const ZONES_DIR: &str = "zones";
    /// The catalog zone's file on secondaries.
    pub const CATALOG_DIR: &str = "catalog";
    /// `config/keys.conf`, as included by named.conf.
    pub const KEYS_CONF: &str = "config/keys.conf";
    /// `config/rndc.key`, as included by named.conf.
    pub const RNDC_KEY: &str = "config/rndc.key";
}

/// The in-container defaults (the entrypoint uses the same ones).
pub mod defaults {
    /// Data directory (`BIND_DATA_DIR`).
    pub const DATA_DIR: &str = "/var/lib/bind";
    /// Mounted config directory (`BIND_CONFIG_DIR`).
    pub const CONFIG_DIR: &str = "/etc/bind/operator";
    /// Scratch directory (an emptyDir: the root filesystem is read-only).
    pub const TMP_DIR: &str = "/tmp";
    /// The container's DNS port (`BIND_DNS_PORT`). Unprivileged, so named
    /// needs no capability to bind it; the Services keep
    /// [`SERVICE_DNS_PORT`] for clients.
    pub const DNS_PORT: u16 = 5353;
    /// The port clients use: the Services map it to [`DNS_PORT`].
    pub const SERVICE_DNS_PORT: u16 = 53;
    /// rndc control port (`BIND_CONTROL_PORT`), always on 127.0.0.1;
    /// unprivileged for the same reason as [`DNS_PORT`].
    pub const CONTROL_PORT: u16 = 8953;
    /// named's statistics channel (`BIND_STATS_PORT`): HTTP with JSON,
    /// on the pod's listen address, read by the operator (see
    /// `crate::telemetry::bindstats`). Unprivileged like [`DNS_PORT`].
    pub const STATS_PORT: u16 = 8053;
    /// The user and group named runs as unless the BindCluster says
    /// otherwise: `bind` in ISC's image. Numeric, so no passwd entry is
    /// needed.
    pub const BIND_UID: i64 = 53;
}

/// The environment variables the entrypoint reads (all optional).
pub mod env {
    pub const DNS_PORT: &str = "BIND_DNS_PORT";
    pub const CONTROL_PORT: &str = "BIND_CONTROL_PORT";
    /// The statistics channel's port; `0` turns the channel off.
    pub const STATS_PORT: &str = "BIND_STATS_PORT";
    /// `any` (default) or one address to listen on.
    pub const LISTEN_ADDRESS: &str = "BIND_LISTEN_ADDRESS";
    pub const DATA_DIR: &str = "BIND_DATA_DIR";
    pub const CONFIG_DIR: &str = "BIND_CONFIG_DIR";
    /// Overrides the ordinal taken from the hostname suffix.
    pub const POD_ORDINAL: &str = "POD_ORDINAL";
    /// The named binary (default `named` from PATH).
    pub const NAMED_BIN: &str = "BIND_NAMED";
    /// When `1`, prepare the data directory and exit instead of exec'ing named.
    pub const PREPARE_ONLY: &str = "BIND_PREPARE_ONLY";
}

/// Names or paths of the BIND tools a command runs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Tools {
    pub rndc: String,
    pub nsupdate: String,
    pub dig: String,
    pub checkconf: String,
}

impl Tools {
    /// Bare names resolved through the container's PATH.
    pub fn from_path() -> Self {
        Tools {
            rndc: "rndc".into(),
            nsupdate: "nsupdate".into(),
            dig: "dig".into(),
            checkconf: "named-checkconf".into(),
        }
    }

    /// Absolute paths found on this machine (PATH, then the sbin dirs that a
    /// non-root PATH lacks), falling back to the bare name.
    pub fn locate() -> Self {
        Tools {
            rndc: locate_tool("rndc"),
            nsupdate: locate_tool("nsupdate"),
            dig: locate_tool("dig"),
            checkconf: locate_tool("named-checkconf"),
        }
    }
}

/// Finds `name` on PATH or in /usr/sbin, /sbin, /usr/local/sbin.
pub fn locate_tool(name: &str) -> String {
    let path = std::env::var_os("PATH").unwrap_or_default();
    let extra = ["/usr/sbin", "/sbin", "/usr/local/sbin", "/usr/bin", "/bin"].map(PathBuf::from);
    std::env::split_paths(&path)
        .chain(extra)
        .map(|d| d.join(name))
        .find(|p| p.is_file())
        .map(|p| p.to_string_lossy().into_owned())
        .unwrap_or_else(|| name.to_string())
}

/// One pod's view of itself: where its files are and where its named
/// answers. Commands built from it run *inside* that pod.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PodLayout {
    pub data_dir: PathBuf,
    pub config_dir: PathBuf,
    /// Address in-pod tools use to reach named (loopback).
    pub server_addr: IpAddr,
    pub dns_port: u16,
    pub control_port: u16,
    /// named's statistics channel; 0: off.
    pub stats_port: u16,
    pub tools: Tools,
}

impl PodLayout {
    /// The layout inside a cluster pod.
    pub fn in_cluster() -> Self {
        PodLayout {
            data_dir: PathBuf::from(defaults::DATA_DIR),
            config_dir: PathBuf::from(defaults::CONFIG_DIR),
            server_addr: IpAddr::V4(Ipv4Addr::LOCALHOST),
            dns_port: defaults::DNS_PORT,
            control_port: defaults::CONTROL_PORT,
            stats_port: defaults::STATS_PORT,
            tools: Tools::from_path(),
        }
    }

    /// A layout for a named on 127.0.0.1 with its own dirs and ports (local
    /// mode, tests), with tools located on this machine; no statistics
    /// channel unless [`PodLayout::stats_port`] is set.
    pub fn local(data_dir: &Path, config_dir: &Path, dns_port: u16, control_port: u16) -> Self {
        PodLayout {
            data_dir: data_dir.to_path_buf(),
            config_dir: config_dir.to_path_buf(),
            server_addr: IpAddr::V4(Ipv4Addr::LOCALHOST),
            dns_port,
            control_port,
            stats_port: 0,
            tools: Tools::locate(),
        }
    }

    /// `data_dir/rel` as a string for argv.
    pub fn data_path(&self, rel: &str) -> String {
        self.data_dir.join(rel).to_string_lossy().into_owned()
    }

    /// The path named runs with (`-c`).
    pub fn run_conf(&self) -> String {
        self.data_path(data::RUN_CONF)
    }

    /// keys.conf as named reads it (through the config symlink).
    pub fn keys_conf(&self) -> String {
        self.data_path(data::KEYS_CONF)
    }

    /// rndc.conf written by the entrypoint.
    pub fn rndc_conf(&self) -> String {
        self.data_path(data::RNDC_CONF)
    }

    /// The environment that makes the entrypoint produce this layout.
    pub fn entrypoint_env(&self, ordinal: u32, listen: IpAddr) -> Vec<(String, String)> {
        vec![
            (env::DNS_PORT.into(), self.dns_port.to_string()),
            (env::CONTROL_PORT.into(), self.control_port.to_string()),
            (env::STATS_PORT.into(), self.stats_port.to_string()),
            (env::LISTEN_ADDRESS.into(), listen.to_string()),
            (
                env::DATA_DIR.into(),
                self.data_dir.to_string_lossy().into_owned(),
            ),
            (
                env::CONFIG_DIR.into(),
                self.config_dir.to_string_lossy().into_owned(),
            ),
            (env::POD_ORDINAL.into(), ordinal.to_string()),
        ]
    }
}
