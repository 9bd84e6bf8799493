//! The readiness flag behind `/readyz`: set by whoever knows the process is
//! ready (the controllers once their caches synced, or the `run` wiring once
//! a standby knows another replica leads), read by the health server.
//!
//! Touches no cluster and does no I/O.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

/// The readiness flag. Cheap to clone; clones share it.
#[derive(Clone, Debug, Default)]
pub struct Readiness {
    ready: Arc<AtomicBool>,
}

impl Readiness {
    pub fn new() -> Self {
        Self::default()
    }

    pub fn set_ready(&self, ready: bool) {
        self.ready.store(ready, Ordering::SeqCst);
    }

    pub fn is_ready(&self) -> bool {
        self.ready.load(Ordering::SeqCst)
    }
}
