//! Memory of the bench's processes and the machine's load, read from
//! `/proc`: this process's peak
//! resident set (VmHWM, which the kernel lets a process reset through
//! `/proc/self/clear_refs`, so each scenario gets its own peak) and the
//! peak of each named the runtime started (found by its config path).
//!
//! Linux only; elsewhere every reading is `None`. No cluster access.

use std::path::Path;

/// A `kB` field of `/proc/<pid>/status` (`VmHWM`, `VmRSS`).
fn status_kib(pid: &str, field: &str) -> Option<u64> {
    let text = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    text.lines().find_map(|l| {
        let rest = l.strip_prefix(field)?.strip_prefix(':')?;
        rest.split_whitespace().next()?.parse().ok()
    })
}

/// This process's peak RSS in KiB since start or the last [`reset_peak`].
pub fn peak_kib() -> Option<u64> {
    status_kib("self", "VmHWM")
}

/// This process's current RSS in KiB.
pub fn current_kib() -> Option<u64> {
    status_kib("self", "VmRSS")
}

/// Resets the peak to the current RSS (`echo 5 > /proc/self/clear_refs`).
/// Returns whether the kernel accepted it.
pub fn reset_peak() -> bool {
    std::fs::write("/proc/self/clear_refs", "5").is_ok()
}

/// Peak RSS in KiB of the named whose command line names `conf` (the
/// entrypoint runs `named -g -c <data>/named.conf`), if it runs.
pub fn named_peak_kib(conf: &Path) -> Option<u64> {
    let needle = conf.to_string_lossy();
    for entry in std::fs::read_dir("/proc").ok()?.flatten() {
        let name = entry.file_name();
        let pid = name.to_string_lossy();
        if !pid.bytes().all(|b| b.is_ascii_digit()) {
            continue;
        }
        let Ok(cmd) = std::fs::read(entry.path().join("cmdline")) else {
            continue;
        };
        let mut args = cmd.split(|b| *b == 0).map(String::from_utf8_lossy);
        let is_named = args
            .next()
            .is_some_and(|a| a.rsplit('/').next() == Some("named"));
        if is_named && args.any(|a| a == needle) {
            return status_kib(&pid, "VmHWM");
        }
    }
    None
}

/// The 1-minute load average (other work on the machine skews timings).
pub fn load_average() -> Option<f64> {
    std::fs::read_to_string("/proc/loadavg")
        .ok()?
        .split_whitespace()
        .next()?
        .parse()
        .ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn own_memory_is_readable_on_linux() {
        if !Path::new("/proc/self/status").exists() {
            return;
        }
        assert!(peak_kib().expect("VmHWM") > 0);
        assert!(current_kib().expect("VmRSS") > 0);
        assert!(load_average().expect("loadavg") >= 0.0);
        assert_eq!(named_peak_kib(Path::new("/nonexistent/named.conf")), None);
    }
}
