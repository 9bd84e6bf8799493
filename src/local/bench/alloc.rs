//! The operator's own memory, exact, while it shares a process with the
//! in-memory API, the local runtime and the bench: a global allocator that
//! tags every allocation with the *side* of the thread that made it and
//! keeps live and peak bytes per side.
//!
//! Why this method: in local mode the controllers, the in-memory API (which
//! holds every object) and the runtime live in one process, so RSS or an
//! RSS delta cannot tell the operator's caches from the API's store (and
//! allocator slack blurs both). The bench runs the controllers on a Tokio
//! runtime of their own whose threads call [`set_thread_side`]
//! (`Side::Operator`); everything else (the API's runtime, the bench's
//! main thread) stays `Side::Other`. Requests hop from the operator's
//! runtime to the API's (see `env::OperatorService`), so the objects the
//! API stores are allocated on the API's side. An allocation carries its
//! side in a small header in front of it, so a free on the other side
//! (response bytes made by the API and dropped by the operator) is taken
//! off the side that allocated it: live bytes per side are counted, not
//! sampled. Bytes counted are those asked for (the header and allocator
//! slack are not).
//!
//! Each thread adds up its own changes and passes them on to the shared
//! totals once they reach [`SLACK`] bytes either way (the peak is taken
//! then): one shared atomic per allocation, written by every thread, cost
//! a tenth of the whole process's CPU at 100,000 records and slowed what
//! the bench measures. So a total lags by at most `SLACK` per thread and
//! side, and a thread that ends takes up to that much with it (a few MiB
//! at most over a scenario, against hundreds of MiB measured at scale).
//!
//! The header costs 16 bytes per allocation, so the allocator is installed
//! only where asked: `main.rs` with the `bench-alloc` cargo feature, and
//! the test suite. Without it [`installed`] is false and the bench reports
//! the operator's memory as not measured.
//!
//! No I/O; never allocates itself.

use std::alloc::{GlobalAlloc, Layout};

use mimalloc::MiMalloc;
use std::cell::Cell;
use std::sync::atomic::{AtomicBool, AtomicI64, Ordering};

/// Which part of the process a thread belongs to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
pub enum Side {
    /// The in-memory API, the local runtime, the bench (the default).
    Other = 0,
    /// The controllers.
    Operator = 1,
}

const SIDES: usize = 2;
/// Header in front of each allocation; 16 keeps the payload aligned as
/// malloc's would be.
const HEADER: usize = 16;

static INSTALLED: AtomicBool = AtomicBool::new(false);
static LIVE: [AtomicI64; SIDES] = [AtomicI64::new(0), AtomicI64::new(0)];
static PEAK: [AtomicI64; SIDES] = [AtomicI64::new(0), AtomicI64::new(0)];

/// Bytes a thread's count may differ from the shared totals by, per side.
pub const SLACK: i64 = 16 * 1024;

thread_local! {
    static SIDE: Cell<u8> = const { Cell::new(Side::Other as u8) };
    /// This thread's changes per side not yet in [`LIVE`] (no destructor:
    /// registering one could allocate, from inside the allocator).
    static PENDING: [Cell<i64>; SIDES] = const { [Cell::new(0), Cell::new(0)] };
}

/// Marks the calling thread's future allocations as `side`'s.
pub fn set_thread_side(side: Side) {
    SIDE.with(|s| s.set(side as u8));
}

fn thread_side() -> u8 {
    // During thread teardown the slot may be gone: count it as Other.
    SIDE.try_with(Cell::get).unwrap_or(Side::Other as u8)
}

/// Whether [`TaggingAllocator`] is this process's global allocator.
pub fn installed() -> bool {
    INSTALLED.load(Ordering::Relaxed)
}

/// Bytes `side` has allocated and not freed, or None when not installed.
pub fn live_bytes(side: Side) -> Option<u64> {
    installed().then(|| LIVE[side as usize].load(Ordering::Relaxed).max(0) as u64)
}

/// Most bytes `side` held at once since the last [`reset_peak`].
pub fn peak_bytes(side: Side) -> Option<u64> {
    installed().then(|| PEAK[side as usize].load(Ordering::Relaxed).max(0) as u64)
}

/// Starts a new peak at the current live bytes.
pub fn reset_peak(side: Side) {
    let live = LIVE[side as usize].load(Ordering::Relaxed);
    PEAK[side as usize].store(live, Ordering::Relaxed);
}

fn add(side: u8, bytes: usize) {
    count(side, bytes as i64);
}

fn sub(side: u8, bytes: usize) {
    count(side, -(bytes as i64));
}

/// Counts `delta` bytes for `side` on this thread, passing the thread's
/// sum on to the shared totals once it reaches [`SLACK`] either way.
fn count(side: u8, delta: i64) {
    let i = usize::from(side).min(SIDES - 1);
    let held = PENDING.try_with(|p| {
        let sum = p[i].get() + delta;
        if sum.abs() < SLACK {
            p[i].set(sum);
            0
        } else {
            p[i].set(0);
            sum
        }
    });
    // During thread teardown the slot may be gone: count it directly.
    let pass = held.unwrap_or(delta);
    if pass != 0 {
        let now = LIVE[i].fetch_add(pass, Ordering::Relaxed) + pass;
        if now > PEAK[i].load(Ordering::Relaxed) {
            PEAK[i].fetch_max(now, Ordering::Relaxed);
        }
    }
}

/// mimalloc (the operator's allocator, see `main.rs`) with a side tag in
/// front of every allocation.
pub struct TaggingAllocator;

/// The padded layout (header + payload) and the header's size.
fn outer(layout: Layout) -> Option<(Layout, usize)> {
    let header = HEADER.max(layout.align());
    let size = layout.size().checked_add(header)?;
    Layout::from_size_align(size, layout.align().max(HEADER))
        .ok()
        .map(|l| (l, header))
}

/// Allocates `layout` behind a header through `raw` (plain or zeroed) and
/// charges it to the calling thread's side.
///
/// # Safety
/// `raw` must return a block of at least `outer` bytes, aligned to it, or
/// null.
unsafe fn tagged(layout: Layout, raw: impl FnOnce(Layout) -> *mut u8) -> *mut u8 {
    INSTALLED.store(true, Ordering::Relaxed);
    let Some((outer, header)) = outer(layout) else {
        return std::ptr::null_mut();
    };
    // outer has a non-zero size (header > 0).
    let base = raw(outer);
    if base.is_null() {
        return base;
    }
    let side = thread_side();
    // SAFETY: the header's last byte and the payload lie inside the block.
    unsafe {
        let ptr = base.add(header);
        ptr.sub(1).write(side);
        add(side, layout.size());
        ptr
    }
}

// SAFETY (for every method): the payload handed out starts `header` bytes
// into a block of `outer(layout)`, `header` is a multiple of the payload's
// alignment, and the side byte lives in the header's last byte, so reading
// it back at `ptr - 1` stays inside the block we allocated.
unsafe impl GlobalAlloc for TaggingAllocator {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        // SAFETY: MiMalloc.alloc with a non-zero-sized layout.
        unsafe { tagged(layout, |outer| MiMalloc.alloc(outer)) }
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        // SAFETY: MiMalloc.alloc_zeroed with a non-zero-sized layout.
        unsafe { tagged(layout, |outer| MiMalloc.alloc_zeroed(outer)) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        let Some((outer, header)) = outer(layout) else {
            return;
        };
        // SAFETY: ptr came from alloc with this layout (GlobalAlloc contract).
        unsafe {
            sub(ptr.sub(1).read(), layout.size());
            MiMalloc.dealloc(ptr.sub(header), outer);
        }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        let Some((old_outer, header)) = outer(layout) else {
            return std::ptr::null_mut();
        };
        let Some(new_outer_size) = new_size.checked_add(header) else {
            return std::ptr::null_mut();
        };
        // SAFETY: ptr came from alloc with `layout`; MiMalloc.realloc keeps
        // the block's alignment and copies the header with the payload.
        unsafe {
            let old_side = ptr.sub(1).read();
            let base = MiMalloc.realloc(ptr.sub(header), old_outer, new_outer_size);
            if base.is_null() {
                return base;
            }
            // The grown block belongs to whoever grew it.
            sub(old_side, layout.size());
            let side = thread_side();
            let new = base.add(header);
            new.sub(1).write(side);
            add(side, new_size);
            new
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_threads_count_reaches_the_totals_once_it_passes_the_slack() {
        // Not installed in the lib tests: nothing else counts.
        std::thread::spawn(|| {
            let live = || LIVE[1].load(Ordering::Relaxed);
            let before = live();
            count(1, 1000);
            assert_eq!(live(), before, "held by the thread");
            count(1, SLACK);
            assert_eq!(live(), before + SLACK + 1000);
            assert!(PEAK[1].load(Ordering::Relaxed) >= before + SLACK + 1000);
            count(1, -10);
            count(1, -SLACK);
            assert_eq!(live(), before + 990, "frees pass on too");
        })
        .join()
        .unwrap();
    }

    #[test]
    fn outer_layout_keeps_the_payload_aligned() {
        let (l, h) = outer(Layout::from_size_align(10, 8).unwrap()).unwrap();
        assert_eq!((l.size(), l.align(), h), (26, 16, 16));
        let (l, h) = outer(Layout::from_size_align(100, 64).unwrap()).unwrap();
        assert_eq!((l.size(), l.align(), h), (164, 64, 64));
    }
}
