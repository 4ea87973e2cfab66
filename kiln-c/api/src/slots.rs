//! A/B model slots that survive a power cut (`kiln_model::slots`), over a
//! NOR flash the caller drives through three callbacks: the slot state, a
//! trial boot and its confirm, the release counter, the trusted keys, and
//! a download into the slot that is not confirmed.

use core::ffi::{c_int, c_void};
use core::mem::{align_of, size_of};

use embedded_storage::nor_flash::{ErrorType, NorFlash, NorFlashError, NorFlashErrorKind, ReadNorFlash};
use kiln_model::slots::{self, Download, Keys, Layout, Slot, SlotError, Slots, State, Trial, MAX_KEYS};

use crate::*;

/// Reads `len` bytes at flash offset `offset` into `buf`; 0 on success,
/// anything else on failure (reported as `KILN_ERR_FLASH`).
pub type kiln_flash_read_fn =
    Option<unsafe extern "C" fn(ctx: *mut c_void, offset: u32, buf: *mut u8, len: usize) -> c_int>;
/// Programs `len` bytes at `offset` (both multiples of 64): each flash bit
/// becomes its old value AND the new one, as NOR flash programs; 0 on success.
pub type kiln_flash_write_fn =
    Option<unsafe extern "C" fn(ctx: *mut c_void, offset: u32, buf: *const u8, len: usize) -> c_int>;
/// Erases `[from, to)` (whole sectors of `kiln_flash.sector` bytes) to 0xFF; 0 on success.
pub type kiln_flash_erase_fn = Option<unsafe extern "C" fn(ctx: *mut c_void, from: u32, to: u32) -> c_int>;

/// A NOR flash driven by the caller's callbacks.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct kiln_flash {
    /// Reads (must not be NULL).
    pub read: kiln_flash_read_fn,
    /// Programs (must not be NULL); asked only for whole 64-byte units, so
    /// any part whose write unit divides 64 works.
    pub write: kiln_flash_write_fn,
    /// Erases (must not be NULL).
    pub erase: kiln_flash_erase_fn,
    /// Passed to every callback.
    pub ctx: *mut c_void,
    /// Bytes of the flash.
    pub capacity: u32,
    /// Bytes of an erase sector (a multiple of 64, at least 512); the
    /// layout's regions start on sector boundaries.
    pub sector: u32,
}

/// Where the journal (two sectors), the keys (one sector) and the two
/// slots lie; see kiln-model's `slots` documentation.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct kiln_slots_layout {
    /// The journal's first sector.
    pub state: u32,
    /// The keys sector.
    pub keys: u32,
    /// Slot A's first byte (the factory image).
    pub slot_a: u32,
    /// Slot B's first byte.
    pub slot_b: u32,
    /// Bytes of each slot.
    pub slot_len: u32,
}

/// `kiln_slot_state.trial`: no trial, the confirmed slot boots.
pub const KILN_TRIAL_IDLE: u8 = 0;
/// A checked image waits in the other slot; the next boot tries it once.
pub const KILN_TRIAL_PENDING: u8 = 1;
/// The other slot was booted and is not confirmed: the next boot returns to the confirmed one.
pub const KILN_TRIAL_BOOTED: u8 = 2;

/// The persisted state (the newest journal record).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct kiln_slot_state {
    /// The record's sequence number.
    pub seq: u32,
    /// The confirmed slot: 0 (A) or 1 (B).
    pub active: u8,
    /// `KILN_TRIAL_*`.
    pub trial: u8,
    /// The release counter: the highest release ever confirmed.
    pub counter: u64,
    /// The release an update must go past (the counter, at least the
    /// confirmed image's release): give it to `kiln_trust.newer_than`.
    pub floor: u64,
    /// Each slot's image length (A, B).
    pub len: [u32; 2],
    /// Each slot's image release (A, B).
    pub version: [u64; 2],
}

/// What to run, as `kiln_slots_boot` decided it.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct kiln_boot {
    /// The slot to run: 0 (A) or 1 (B).
    pub slot: u8,
    /// True for a trial: call `kiln_slots_confirm` once it works, or the
    /// next boot returns to the confirmed slot.
    pub trial: bool,
    /// The image's flash offset.
    pub offset: u32,
    /// Bytes of the image.
    pub len: u32,
    /// Its release.
    pub version: u64,
}

/// Words of opaque storage in a `kiln_download`.
pub const KILN_DOWNLOAD_WORDS: usize = 14;

/// A download in progress, filled by `kiln_slots_begin`: plain memory of
/// fixed size, no destructor.
#[repr(C)]
pub struct kiln_download {
    /// Opaque.
    pub opaque: [u64; KILN_DOWNLOAD_WORDS],
}

const MAGIC: u32 = 0x4B44_4C44; // "KDLD"

#[repr(C)]
struct Stored {
    magic: u32,
    dl: Download,
}

const _: () = assert!(size_of::<Stored>() <= size_of::<kiln_download>(), "too small");
const _: () = assert!(align_of::<Stored>() <= align_of::<kiln_download>(), "underaligned");

/// The callbacks as an `embedded_storage` NOR flash (64-byte write units; the sector is the layout's).
struct Callbacks {
    read: unsafe extern "C" fn(*mut c_void, u32, *mut u8, usize) -> c_int,
    write: unsafe extern "C" fn(*mut c_void, u32, *const u8, usize) -> c_int,
    erase: unsafe extern "C" fn(*mut c_void, u32, u32) -> c_int,
    ctx: *mut c_void,
    capacity: u32,
}

/// A callback's nonzero status.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Status(c_int);

impl NorFlashError for Status {
    fn kind(&self) -> NorFlashErrorKind {
        NorFlashErrorKind::Other
    }
}

impl ErrorType for Callbacks {
    type Error = Status;
}

fn status(s: c_int) -> Result<(), Status> {
    if s == 0 {
        Ok(())
    } else {
        Err(Status(s))
    }
}

impl ReadNorFlash for Callbacks {
    const READ_SIZE: usize = 1;

    fn read(&mut self, offset: u32, bytes: &mut [u8]) -> Result<(), Status> {
        // SAFETY: the caller's callback, with a buffer of exactly `bytes.len()` writable bytes.
        status(unsafe { (self.read)(self.ctx, offset, bytes.as_mut_ptr(), bytes.len()) })
    }

    fn capacity(&self) -> usize {
        usize_from_u32(self.capacity)
    }
}

impl NorFlash for Callbacks {
    const WRITE_SIZE: usize = slots::RECORD_LEN;
    // The sector is checked by the slots against `kiln_flash.sector`.
    const ERASE_SIZE: usize = 1;

    fn erase(&mut self, from: u32, to: u32) -> Result<(), Status> {
        // SAFETY: the caller's callback.
        status(unsafe { (self.erase)(self.ctx, from, to) })
    }

    fn write(&mut self, offset: u32, bytes: &[u8]) -> Result<(), Status> {
        // SAFETY: the caller's callback, with exactly `bytes.len()` readable bytes.
        status(unsafe { (self.write)(self.ctx, offset, bytes.as_ptr(), bytes.len()) })
    }
}

fn fail_of(e: SlotError<Status>) -> Fail {
    Fail::Api(match e {
        SlotError::Flash(Status(s)) => return Fail::Flash(s),
        SlotError::Layout => KILN_ERR_ARGUMENT,
        SlotError::NotProvisioned => KILN_ERR_NOT_PROVISIONED,
        SlotError::Provisioned => KILN_ERR_PROVISIONED,
        SlotError::NoTrial => KILN_ERR_NO_TRIAL,
        SlotError::TrialRunning => KILN_ERR_TRIAL_RUNNING,
        SlotError::TooLarge => KILN_ERR_TOO_LARGE,
        SlotError::NotNewer => KILN_ERR_NOT_NEWER,
        SlotError::Keys => KILN_ERR_KEYS,
    })
}

/// The slots over the caller's flash and layout.
fn open(flash: *const kiln_flash, layout: *const kiln_slots_layout) -> Result<Slots<Callbacks>, Fail> {
    // SAFETY: NULL or readable, per the contract of the exported functions.
    let f = unsafe { flash.as_ref() }.ok_or(Fail::Api(KILN_ERR_NULL))?;
    // SAFETY: as above.
    let l = unsafe { layout.as_ref() }.ok_or(Fail::Api(KILN_ERR_NULL))?;
    let (Some(read), Some(write), Some(erase)) = (f.read, f.write, f.erase) else {
        return Err(Fail::Api(KILN_ERR_NULL));
    };
    let cb = Callbacks { read, write, erase, ctx: f.ctx, capacity: f.capacity };
    let layout = Layout { state: l.state, keys: l.keys, slots: [l.slot_a, l.slot_b], slot_len: l.slot_len };
    Slots::with_sector(cb, layout, usize_from_u32(f.sector)).map_err(fail_of)
}

/// Runs `op` on the slots over `flash` and `layout` and writes the state it
/// leaves into `*out` (NULL: not written), the error into `*err`.
fn with_state(
    flash: *const kiln_flash,
    layout: *const kiln_slots_layout,
    out: *mut kiln_slot_state,
    err: *mut kiln_error,
    op: impl FnOnce(&mut Slots<Callbacks>) -> Result<State, Fail>,
) -> c_int {
    let r = open(flash, layout).and_then(|mut slots| op(&mut slots)).map(|s| put(out, state_of(&s)));
    report(err, r)
}

fn state_of(s: &State) -> kiln_slot_state {
    let (a, b) = (s.image(Slot::A), s.image(Slot::B));
    kiln_slot_state {
        seq: s.seq,
        active: slot_code(s.active),
        trial: match s.trial {
            Trial::Idle => KILN_TRIAL_IDLE,
            Trial::Pending => KILN_TRIAL_PENDING,
            Trial::Booted => KILN_TRIAL_BOOTED,
        },
        counter: s.counter,
        floor: s.floor(),
        len: [a.len, b.len],
        version: [a.version, b.version],
    }
}

fn slot_code(s: Slot) -> u8 {
    match s {
        Slot::A => 0,
        Slot::B => 1,
    }
}

/// Reads the state into `*out` (may be NULL); `KILN_ERR_NOT_PROVISIONED`
/// before `kiln_slots_provision`. `out->floor` is what an update's
/// release must be above (`kiln_trust.newer_than`): the persisted release
/// counter, so a downgrade, or the same release again, is refused after
/// any number of reboots.
///
/// # Safety
/// `flash` and `layout` readable (callbacks valid); `out` and `err` NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn kiln_slots_state(
    flash: *const kiln_flash,
    layout: *const kiln_slots_layout,
    out: *mut kiln_slot_state,
    err: *mut kiln_error,
) -> c_int {
    with_state(flash, layout, out, err, |slots| slots.state().map_err(fail_of))
}

/// Writes the first state: slot A confirmed, holding the factory image of
/// `len` bytes at release `version` (programmed there beforehand), the
/// counter at `version`. `KILN_ERR_PROVISIONED` when a state exists
/// (nothing lowers the counter).
///
/// # Safety
/// As for `kiln_slots_state`.
#[no_mangle]
pub unsafe extern "C" fn kiln_slots_provision(
    flash: *const kiln_flash,
    layout: *const kiln_slots_layout,
    len: u32,
    version: u64,
    out: *mut kiln_slot_state,
    err: *mut kiln_error,
) -> c_int {
    with_state(flash, layout, out, err, |slots| slots.provision(len, version).map_err(fail_of))
}

/// Writes the trusted Ed25519 keys (`keys[0..count]`, 32 bytes each, 1 to
/// `KILN_MAX_KEYS`) into the keys sector (provisioning).
///
/// # Safety
/// As for `kiln_slots_state`; `keys[0..count]` readable.
#[no_mangle]
pub unsafe extern "C" fn kiln_slots_write_keys(
    flash: *const kiln_flash,
    layout: *const kiln_slots_layout,
    keys: *const [u8; 32],
    count: usize,
    err: *mut kiln_error,
) -> c_int {
    let r = (|| {
        // SAFETY: the caller's array, per the contract.
        let keys = unsafe { slice(keys, count) }?;
        let keys = Keys::new(keys).ok_or(Fail::Api(KILN_ERR_ARGUMENT))?;
        open(flash, layout)?.write_keys(&keys).map_err(fail_of)
    })();
    report(err, r)
}

/// The most keys the keys sector lists (kiln-model's `slots::MAX_KEYS`).
pub const KILN_MAX_KEYS: usize = 8;
const _: () = assert!(KILN_MAX_KEYS == MAX_KEYS, "KILN_MAX_KEYS is kiln-model's MAX_KEYS");

/// Where a signed model file holds its signer's public key (32 bytes):
/// `kiln_slots_key_for_file` needs the file's first `KILN_SIGNED_KEY_AT + 32` bytes.
pub const KILN_SIGNED_KEY_AT: usize = 20;
const _: () = assert!(KILN_SIGNED_KEY_AT == kiln_model::signed::KEY_AT, "KILN_SIGNED_KEY_AT is kiln-model's KEY_AT");

/// The trusted key a signed model names: `head[0..head_len]` is the start
/// of the file (its first `KILN_SIGNED_KEY_AT + 32` bytes suffice), `key_out` gets the listed key
/// equal to the file's `signature.key`. `KILN_ERR_NOT_FOUND` when the key
/// is not listed (refuse the update), `KILN_ERR_KEYS` when the keys sector
/// holds no valid list.
///
/// # Safety
/// As for `kiln_slots_state`; `head[0..head_len]` readable; `key_out` writable (32 bytes).
#[no_mangle]
pub unsafe extern "C" fn kiln_slots_key_for_file(
    flash: *const kiln_flash,
    layout: *const kiln_slots_layout,
    head: *const u8,
    head_len: usize,
    key_out: *mut [u8; 32],
    err: *mut kiln_error,
) -> c_int {
    let r = (|| {
        if key_out.is_null() {
            return Err(Fail::Api(KILN_ERR_NULL));
        }
        // SAFETY: the caller's buffer, per the contract.
        let head = unsafe { slice(head, head_len) }?;
        let keys = open(flash, layout)?.keys().map_err(fail_of)?;
        let key = keys.for_file(head).ok_or(Fail::Api(KILN_ERR_NOT_FOUND))?;
        put(key_out, *key);
        Ok(())
    })();
    report(err, r)
}

/// At every start: decides what runs and records it (a pending image is
/// tried once; a trial not confirmed before this boot is left for the
/// confirmed slot). `*out` says which slot, where and whether a trial.
///
/// # Safety
/// As for `kiln_slots_state`.
#[no_mangle]
pub unsafe extern "C" fn kiln_slots_boot(
    flash: *const kiln_flash,
    layout: *const kiln_slots_layout,
    out: *mut kiln_boot,
    err: *mut kiln_error,
) -> c_int {
    put(out, kiln_boot::default());
    let r = (|| {
        let b = open(flash, layout)?.boot().map_err(fail_of)?;
        put(
            out,
            kiln_boot { slot: slot_code(b.slot), trial: b.trial, offset: b.offset, len: b.len, version: b.version },
        );
        Ok(())
    })();
    report(err, r)
}

/// The running trial works: it becomes the confirmed slot and the counter
/// its release, in one record. `KILN_ERR_NO_TRIAL` unless a trial was booted.
///
/// # Safety
/// As for `kiln_slots_state`.
#[no_mangle]
pub unsafe extern "C" fn kiln_slots_confirm(
    flash: *const kiln_flash,
    layout: *const kiln_slots_layout,
    out: *mut kiln_slot_state,
    err: *mut kiln_error,
) -> c_int {
    with_state(flash, layout, out, err, |slots| slots.confirm().map_err(fail_of))
}

/// Starts a download into the slot that is not confirmed, in `*dl`
/// (a pending image there is dropped first). `KILN_ERR_TRIAL_RUNNING`
/// while a booted trial is not confirmed.
///
/// # Safety
/// As for `kiln_slots_state`; `dl` writable.
#[no_mangle]
pub unsafe extern "C" fn kiln_slots_begin(
    flash: *const kiln_flash,
    layout: *const kiln_slots_layout,
    dl: *mut kiln_download,
    err: *mut kiln_error,
) -> c_int {
    let r = (|| {
        if dl.is_null() {
            return Err(Fail::Api(KILN_ERR_NULL));
        }
        let d = open(flash, layout)?.begin().map_err(fail_of)?;
        // SAFETY: not NULL; large and aligned enough (the assertions above).
        unsafe { dl.cast::<Stored>().write(Stored { magic: MAGIC, dl: d }) };
        Ok(())
    })();
    if r.is_err() && !dl.is_null() {
        // SAFETY: not NULL; the magic is the first word.
        unsafe { dl.cast::<u32>().write(0) };
    }
    report(err, r)
}

fn download<'x>(dl: *mut kiln_download) -> Result<&'x mut Download, Fail> {
    if dl.is_null() {
        return Err(Fail::Api(KILN_ERR_NULL));
    }
    // SAFETY: not NULL; at least 4 bytes, 8-aligned.
    if unsafe { dl.cast::<u32>().read() } != MAGIC {
        return Err(Fail::Api(KILN_ERR_HANDLE));
    }
    // SAFETY: the magic says kiln_slots_begin stored a Stored here.
    Ok(unsafe { &mut (*dl.cast::<Stored>()).dl })
}

/// Programs `bytes[0..len]` at the download's end (bytes the update check
/// accepted: write a packet only after the check took it), erasing each
/// sector of the slot just before its first byte. `KILN_ERR_TOO_LARGE`
/// past the slot's end.
///
/// # Safety
/// As for `kiln_slots_state`; `dl` filled by `kiln_slots_begin`; `bytes[0..len]` readable.
#[no_mangle]
pub unsafe extern "C" fn kiln_slots_write(
    flash: *const kiln_flash,
    layout: *const kiln_slots_layout,
    dl: *mut kiln_download,
    bytes: *const u8,
    len: usize,
    err: *mut kiln_error,
) -> c_int {
    let r = (|| {
        let d = download(dl)?;
        // SAFETY: the caller's buffer, per the contract.
        let bytes = unsafe { slice(bytes, len) }?;
        open(flash, layout)?.write(d, bytes).map_err(fail_of)
    })();
    report(err, r)
}

/// Ends the download (call it only once the check accepted the whole
/// image): programs a partial last unit, then records the image as
/// pending at release `version`; the next `kiln_slots_boot` tries it.
/// `KILN_ERR_NOT_NEWER` unless `version` is above the counter. `*dl` is
/// spent either way.
///
/// # Safety
/// As for `kiln_slots_write`; `out` NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn kiln_slots_finish(
    flash: *const kiln_flash,
    layout: *const kiln_slots_layout,
    dl: *mut kiln_download,
    version: u64,
    out: *mut kiln_slot_state,
    err: *mut kiln_error,
) -> c_int {
    let r = (|| {
        let d = download(dl)?.clone();
        // SAFETY: `download` checked it is not NULL; spent from here on.
        unsafe { dl.cast::<u32>().write(0) };
        let s = open(flash, layout)?.finish(d, version).map_err(fail_of)?;
        put(out, state_of(&s));
        Ok(())
    })();
    report(err, r)
}
