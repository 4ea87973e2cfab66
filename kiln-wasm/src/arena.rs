//! Zeroed memory for the skeleton.
//!
//! On wasm32 the arena is a run of pages taken with `memory.grow`: fresh
//! pages are zero, so reserving a gigabyte writes nothing and costs address
//! space only. The allocator never sees these pages (dlmalloc takes its own
//! with `memory.grow`), so nothing else writes into them. Between two checks
//! every byte is zero again: the checker clears the prefix it copied and the
//! JavaScript side clears the probe bytes it wrote.
//!
//! On other targets (host tests) it is a plain zeroed `Vec`.

#[cfg(target_arch = "wasm32")]
pub struct Arena {
    base: usize,
    cap: usize,
}

#[cfg(target_arch = "wasm32")]
impl Arena {
    const PAGE: usize = 65_536;

    pub const fn new() -> Self {
        Arena { base: 0, cap: 0 }
    }

    /// Makes at least `len` zero bytes available; false when wasm memory
    /// cannot grow that far.
    pub fn reserve(&mut self, len: usize) -> bool {
        use core::arch::wasm32::{memory_grow, memory_size};
        if len <= self.cap {
            return true;
        }
        // Extend in place when our pages are still the last ones.
        if self.cap > 0 && self.base + self.cap == memory_size(0) * Self::PAGE {
            let extra = (len - self.cap).div_ceil(Self::PAGE);
            if memory_grow(0, extra) == usize::MAX {
                return false;
            }
            self.cap += extra * Self::PAGE;
            return true;
        }
        // Otherwise take a fresh run (the old one stays zero, unused).
        let pages = len.div_ceil(Self::PAGE);
        let prev = memory_grow(0, pages);
        if prev == usize::MAX {
            return false;
        }
        self.base = prev * Self::PAGE;
        self.cap = pages * Self::PAGE;
        true
    }

    pub fn ptr(&self) -> usize {
        self.base
    }

    pub fn bytes(&mut self, len: usize) -> &mut [u8] {
        if len == 0 || self.cap == 0 {
            return &mut [];
        }
        let len = len.min(self.cap);
        // SAFETY: [base, base + cap) are pages this arena grew and owns
        // exclusively (the allocator never hands them out), inside linear
        // memory, and `&mut self` makes this the only live reference.
        unsafe { core::slice::from_raw_parts_mut(self.base as *mut u8, len) }
    }
}

#[cfg(not(target_arch = "wasm32"))]
pub struct Arena {
    buf: Vec<u8>,
}

#[cfg(not(target_arch = "wasm32"))]
impl Arena {
    pub const fn new() -> Self {
        Arena { buf: Vec::new() }
    }

    pub fn reserve(&mut self, len: usize) -> bool {
        if len > self.buf.len() {
            self.buf.resize(len, 0);
        }
        true
    }

    pub fn ptr(&self) -> usize {
        self.buf.as_ptr() as usize
    }

    pub fn bytes(&mut self, len: usize) -> &mut [u8] {
        let len = len.min(self.buf.len());
        &mut self.buf[..len]
    }
}
