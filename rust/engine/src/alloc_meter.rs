//! The engine's global allocator: the system allocator, counting the bytes a thread allocates
//! minus those it frees while that thread is metered ([`metered`]). Chat-template rendering is
//! metered, so a template's live memory is known exactly (values built and dropped during the
//! render cancel out) and a render that holds too much fails with an error instead of the
//! process aborting on a failed allocation.
//!
//! Unmetered threads pay one thread-local flag read per allocation.

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;

/// The system allocator with per-thread counting (see the module docs).
pub(crate) struct CountingAllocator;

thread_local! {
    /// Whether this thread's allocations are counted.
    static METERED: Cell<bool> = const { Cell::new(false) };
    /// Bytes allocated minus bytes freed while metered.
    static NET: Cell<isize> = const { Cell::new(0) };
}

fn note(delta: isize) {
    // Const-initialized thread-locals without destructors: always accessible, never allocate.
    if METERED.with(Cell::get) {
        NET.with(|n| n.set(n.get().saturating_add(delta)));
    }
}

fn signed(n: usize) -> isize {
    isize::try_from(n).unwrap_or(isize::MAX)
}

// SAFETY: every call forwards to `System` with the caller's arguments unchanged; the counting
// touches only thread-local cells and never allocates.
unsafe impl GlobalAlloc for CountingAllocator {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        // SAFETY: forwarded as received (the caller upholds `GlobalAlloc::alloc`'s contract).
        let p = unsafe { System.alloc(layout) };
        if !p.is_null() {
            note(signed(layout.size()));
        }
        p
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        // SAFETY: as in `alloc`.
        let p = unsafe { System.alloc_zeroed(layout) };
        if !p.is_null() {
            note(signed(layout.size()));
        }
        p
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: `ptr` came from this allocator (hence from `System`) with `layout`.
        unsafe { System.dealloc(ptr, layout) };
        note(-signed(layout.size()));
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        // SAFETY: `ptr` came from this allocator (hence from `System`) with `layout`.
        let p = unsafe { System.realloc(ptr, layout, new_size) };
        if !p.is_null() {
            note(signed(new_size) - signed(layout.size()));
        }
        p
    }
}

/// Net bytes this thread has allocated while metered (frees of older memory make it fall).
pub(crate) fn net_bytes() -> isize {
    NET.with(Cell::get)
}

/// Run `f` with this thread's allocations counted (nested calls keep counting).
pub(crate) fn metered<R>(f: impl FnOnce() -> R) -> R {
    struct Restore(bool);
    impl Drop for Restore {
        fn drop(&mut self) {
            METERED.with(|m| m.set(self.0));
        }
    }
    let _restore = Restore(METERED.with(|m| m.replace(true)));
    f()
}
