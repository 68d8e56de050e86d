//! Element counts read off the wire, made harmless to the process.
//!
//! kafka-protocol 0.18 decodes an array by `Vec::with_capacity(count)` with the count a broker
//! sent, before decoding one element (kafka-protocol-rs PRs #152, #161 and #200 propose a bound;
//! none is released). A few bytes claiming 2^31 elements ask for hundreds of GB; the system
//! allocator refuses, and Rust aborts the process — a hostile or broken broker could kill kbench
//! with one response (found by kbench's fuzzing: `fuzz/`, docs/FUZZING.md).
//!
//! [`Reserving`] serves every allocation of [`HUGE`] bytes or more with an anonymous mapping made
//! with `MAP_NORESERVE`: address space, not memory. Nothing is committed until a page is written,
//! so an impossible capacity costs nothing while the decoder runs into the end of the buffer and
//! returns its error; a real buffer that large behaves as before, committed as it is filled.

use std::alloc::{GlobalAlloc, Layout};

/// Allocations this large or larger are reserved lazily (above the 32 MiB that the binary keeps
/// mapped for reuse, `keep_freed_buffers`, so big batch buffers are unaffected).
pub const HUGE: usize = 64 << 20;
const PAGE: usize = 4096;

/// A global allocator: `A` below [`HUGE`] bytes, lazy anonymous mappings from there.
pub struct Reserving<A>(pub A);

fn lazy(layout: Layout) -> bool {
    layout.size() >= HUGE && layout.align() <= PAGE
}

// SAFETY: huge blocks are page-aligned mappings of at least `size` bytes, unmapped with the same
// size they were made with; everything else is `A`'s.
unsafe impl<A: GlobalAlloc> GlobalAlloc for Reserving<A> {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        if lazy(layout) {
            return map(layout.size());
        }
        unsafe { self.0.alloc(layout) }
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        if lazy(layout) {
            return map(layout.size()); // anonymous mappings read as zeros
        }
        unsafe { self.0.alloc_zeroed(layout) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        if lazy(layout) {
            // SAFETY: mapped by `map` with this size.
            unsafe { libc::munmap(ptr.cast(), layout.size()) };
            return;
        }
        unsafe { self.0.dealloc(ptr, layout) }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        // SAFETY: the caller guarantees `new_size` with `layout.align()` is a valid layout.
        let new = unsafe { Layout::from_size_align_unchecked(new_size, layout.align()) };
        match (lazy(layout), lazy(new)) {
            (false, false) => unsafe { self.0.realloc(ptr, layout, new_size) },
            (true, true) => {
                // SAFETY: `ptr` is a mapping of `layout.size()` bytes.
                let p = unsafe {
                    libc::mremap(ptr.cast(), layout.size(), new_size, libc::MREMAP_MAYMOVE)
                };
                if p == libc::MAP_FAILED {
                    std::ptr::null_mut()
                } else {
                    p.cast()
                }
            }
            _ => {
                let p = unsafe { self.alloc(new) };
                if !p.is_null() {
                    // SAFETY: both blocks hold at least the smaller size.
                    unsafe {
                        std::ptr::copy_nonoverlapping(ptr, p, layout.size().min(new_size));
                        self.dealloc(ptr, layout);
                    }
                }
                p
            }
        }
    }
}

fn map(size: usize) -> *mut u8 {
    // SAFETY: a fresh private anonymous mapping; no existing memory is touched.
    let p = unsafe {
        libc::mmap(
            std::ptr::null_mut(),
            size,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_NORESERVE,
            -1,
            0,
        )
    };
    if p == libc::MAP_FAILED {
        std::ptr::null_mut()
    } else {
        p.cast()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::alloc::System;

    /// A capacity no machine has is reserved and given back, untouched; a huge block that is
    /// written to and grown keeps its bytes.
    #[test]
    fn impossible_capacities_cost_address_space_only() {
        let a = Reserving(System);
        let layout = Layout::from_size_align(200 << 30, 8).unwrap();
        unsafe {
            let p = a.alloc(layout);
            assert!(!p.is_null(), "200 GiB reserved lazily");
            *p = 7;
            let q = a.realloc(p, layout, 300 << 30);
            assert!(!q.is_null());
            assert_eq!(*q, 7);
            let small = Layout::from_size_align(64, 8).unwrap();
            let r = a.realloc(q, Layout::from_size_align(300 << 30, 8).unwrap(), 64);
            assert_eq!(*r, 7);
            a.dealloc(r, small);
        }
    }
}
