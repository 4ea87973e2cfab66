//! A/B model slots that survive a power cut (feature `slots`): a trial
//! boot with an explicit confirm, a monotonic release counter and a list of
//! trusted keys, all in NOR flash through `embedded-storage`'s traits
//! ([`Slots`], blocking) or `embedded-storage-async`'s (`AsyncSlots`,
//! with feature `embedded-storage-async`). No heap; one 64-byte record on
//! the stack.
//!
//! # Flash layout ([`Layout`])
//!
//! - **state**: two erase sectors holding an append-only journal of 64-byte
//!   [`State`] records (sequence number, release counter, which slot is
//!   confirmed, the trial's stage, each slot's image length and version,
//!   then 16 bytes of SHA-256 over the rest). The valid record with the
//!   highest sequence number is the state. A new record goes to the next
//!   never-programmed place after the newest record's sector's last used
//!   place; when that sector is full, the *other* sector is erased and the
//!   record goes to its start. The sector holding the newest record is
//!   never erased, so a cut at any point leaves either the old newest
//!   record or the new one: a record torn by a cut fails its digest, and a
//!   sector whose erase was cut holds only older records.
//! - **keys**: one erase sector with the trusted Ed25519 keys ([`Keys`], up
//!   to [`MAX_KEYS`]), written at provisioning ([`Slots::write_keys`]; not
//!   in the field: a cut while it runs leaves no list, and every update is
//!   then refused, [`SlotError::Keys`], until the keys are written again).
//!   A signed model names its key at [`KEY_AT`](crate::signed::KEY_AT); the
//!   device checks it with the listed key of that name ([`Keys::for_file`]),
//!   and refuses a key not in the list.
//! - **slot A** and **slot B**: one model image each.
//!
//! # The state machine
//!
//! The state is the confirmed slot, the release counter, each slot's image
//! (length, release) and the trial's stage of the other slot ([`Trial`]):
//!
//! | stage | call | record written | then |
//! |---|---|---|---|
//! | `Idle` | [`begin`](Slots::begin), [`write`](Slots::write) | none | the other slot is erased and programmed, sector by sector |
//! | `Pending` | [`begin`](Slots::begin) | `Idle` (before any erase) | as above |
//! | `Idle` | [`finish`](Slots::finish) (release above the counter) | `Pending` | |
//! | `Pending` | [`boot`](Slots::boot) | `Booted` (before the jump) | the other slot runs, once |
//! | `Booted` | [`confirm`](Slots::confirm) | `Idle`, the other slot confirmed, counter = its release | |
//! | `Booted` | [`boot`](Slots::boot) (a reboot before confirm) | `Idle` | the confirmed slot runs |
//! | `Idle` | [`boot`](Slots::boot) | none | the confirmed slot runs |
//!
//! [`finish`](Slots::finish) is called only once the caller's check accepted
//! every byte ([`UpdateCheck::finish`](crate::update::UpdateCheck::finish),
//! feature `ed25519`); [`begin`](Slots::begin) is refused while a trial
//! runs. The confirmed slot is never written, so a cut anywhere leaves it
//! whole, and a delta can read its base there while the other slot is
//! rebuilt. Only [`confirm`](Slots::confirm) raises the counter.
//!
//! The update check reads the counter through [`State::floor`]: give
//! [`Trust::newer_than`](crate::Trust::newer_than) `state.floor()` (or use
//! [`State::trust`]); the check refuses a release that is not above it, so
//! an older release and the same release are refused alike, after any
//! number of reboots. The trusted key is the listed one the file names
//! ([`Keys::for_file`] on its first packet).
//!
//! # Wear
//!
//! One update of an `n`-byte image costs `ceil(n / sector)` erases of the
//! receiving slot's sectors (each once, just before its first byte), one
//! program per [`write`](Slots::write) call that completes write units plus
//! one for a partial last unit, and three 64-byte records (`finish`, the
//! trial's `boot`, `confirm`; one more when `begin` drops a pending image
//! or a boot leaves an unconfirmed trial). A boot that changes nothing
//! writes nothing. The journal erases a sector when the other one fills:
//! every `sector / 64` records (64 for 4 KiB sectors), alternating, so each
//! journal sector is erased once per about 42 updates; the slots
//! alternate, so each slot sector once per two updates. For the example
//! model (20,775 bytes, 4 KiB sectors, 4-byte units, 256-byte packets)
//! `tests/power_cut.rs` counts 6 erases and 86 programs for a full update,
//! 6 erases and 168 programs for its delta (whose pieces end off packet
//! boundaries).
//!
//! ```
//! # #[cfg(feature = "alloc")] {
//! use kiln_model::slots::{Layout, Slot, Slots, Trial};
//! # let mut flash = kiln_model::slots::doc_flash();
//! let layout = Layout { state: 0, keys: 8192, slots: [12288, 12288 + 65536], slot_len: 65536 };
//! let mut slots = Slots::new(&mut flash, layout).unwrap();
//! slots.provision(1000, 1).unwrap(); // the factory image (1000 bytes, release 1) in slot A
//! assert_eq!(slots.boot().unwrap().slot, Slot::A);
//! let mut dl = slots.begin().unwrap();
//! slots.write(&mut dl, &[0x55; 700]).unwrap(); // bytes the update check accepted
//! let s = slots.finish(dl, 2).unwrap();
//! assert_eq!(s.trial, Trial::Pending);
//! let boot = slots.boot().unwrap(); // the first boot of the new image: a trial
//! assert_eq!((boot.slot, boot.trial, boot.len), (Slot::B, true, 700));
//! let s = slots.confirm().unwrap(); // the new model works
//! assert_eq!((s.active, s.counter, s.floor()), (Slot::B, 2, 2));
//! # }
//! ```

use crate::bytes::usize_from_u32;
use crate::digest::sha256;
use crate::signed::KEY_LEN;

/// Bytes of one state record (and the unit the journal is read in).
pub const RECORD_LEN: usize = 64;
/// The most trusted keys the keys sector holds.
pub const MAX_KEYS: usize = 8;
/// Bytes of the keys sector's contents: magic, count, [`MAX_KEYS`] keys, digest.
pub const KEYS_LEN: usize = 320;

const STATE_MAGIC: [u8; 4] = *b"KSL1";
const KEYS_MAGIC: [u8; 4] = *b"KKY1";
/// Bytes of a record before its digest.
const BODY_LEN: usize = 48;
/// Where the keys sector's digest starts.
const KEYS_BODY: usize = KEYS_LEN - 16;

/// One of the two model slots.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum Slot {
    /// The first slot (index 0), where provisioning puts the factory image.
    A,
    /// The second slot (index 1).
    B,
}

impl Slot {
    /// The other slot.
    #[must_use]
    pub const fn other(self) -> Slot {
        match self {
            Slot::A => Slot::B,
            Slot::B => Slot::A,
        }
    }

    /// 0 for A, 1 for B.
    #[must_use]
    pub const fn index(self) -> usize {
        match self {
            Slot::A => 0,
            Slot::B => 1,
        }
    }

    const fn code(self) -> u8 {
        match self {
            Slot::A => 0,
            Slot::B => 1,
        }
    }
}

/// Where the image in the slot that is not confirmed stands.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum Trial {
    /// No trial: the confirmed slot boots.
    Idle,
    /// A checked image waits in the other slot; the next boot tries it once.
    Pending,
    /// The other slot was booted and is not confirmed: the next boot returns
    /// to the confirmed slot.
    Booted,
}

impl Trial {
    const fn code(self) -> u8 {
        match self {
            Trial::Idle => 0,
            Trial::Pending => 1,
            Trial::Booted => 2,
        }
    }
}

/// A slot's image as the state records it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct Image {
    /// Bytes of the image (0: none).
    pub len: u32,
    /// Its release version.
    pub version: u64,
}

/// The persisted state: one journal record.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct State {
    /// The record's sequence number (the newest valid record wins).
    pub seq: u32,
    /// The release counter: the highest release ever confirmed. It only grows.
    pub counter: u64,
    /// The confirmed slot.
    pub active: Slot,
    /// The trial of the other slot.
    pub trial: Trial,
    /// Each slot's image, by [`Slot::index`]. The confirmed slot's is what
    /// runs; the other's is what the last [`Slots::finish`] recorded, whose
    /// bytes a later download (stage `Idle`) may have overwritten since.
    pub images: [Image; 2],
}

impl State {
    /// The release an update must go past: the counter (at least the
    /// confirmed image's release). Equal is refused like older.
    #[must_use]
    pub fn floor(&self) -> u64 {
        self.counter.max(self.image(self.active).version)
    }

    /// The image recorded for `slot`.
    #[must_use]
    pub fn image(&self, slot: Slot) -> Image {
        match slot {
            Slot::A => self.images.first().copied().unwrap_or_default(),
            Slot::B => self.images.get(1).copied().unwrap_or_default(),
        }
    }

    /// The image of the slot that is not confirmed.
    #[must_use]
    pub fn candidate(&self) -> Image {
        self.image(self.active.other())
    }

    /// `trust` for `key` that refuses a release not above [`floor`](Self::floor)
    /// (feature `ed25519`); `None` when the key is not usable ([`Trust::new`](crate::Trust::new)).
    #[cfg(feature = "ed25519")]
    #[must_use]
    pub fn trust<'k>(&self, key: &'k [u8; KEY_LEN]) -> Option<crate::Trust<'k>> {
        Some(crate::Trust::new(key)?.newer_than(self.floor()))
    }

    fn with_image(mut self, slot: Slot, image: Image) -> State {
        if let Some(i) = self.images.get_mut(slot.index()) {
            *i = image;
        }
        self
    }

    /// The record's bytes: the fields little-endian, then 16 bytes of SHA-256.
    #[must_use]
    pub fn encode(&self) -> [u8; RECORD_LEN] {
        let mut r = [0u8; RECORD_LEN];
        let (a, b) = (self.image(Slot::A), self.image(Slot::B));
        let fields: [&[u8]; 8] = [
            &STATE_MAGIC,
            &self.seq.to_le_bytes(),
            &self.counter.to_le_bytes(),
            &[self.active.code(), self.trial.code(), 0, 0, 0, 0, 0, 0],
            &a.len.to_le_bytes(),
            &b.len.to_le_bytes(),
            &a.version.to_le_bytes(),
            &b.version.to_le_bytes(),
        ];
        let mut at = 0usize;
        for f in fields {
            put(&mut r, at, f);
            at = at.saturating_add(f.len());
        }
        let d = sha256(r.get(..BODY_LEN).unwrap_or(&[]));
        put(&mut r, BODY_LEN, &d);
        r
    }

    /// The state in a record's bytes; `None` unless its magic, codes and digest hold.
    #[must_use]
    pub fn decode(r: &[u8; RECORD_LEN]) -> Option<State> {
        let d = sha256(r.get(..BODY_LEN)?);
        if r.get(BODY_LEN..) != d.get(..RECORD_LEN.saturating_sub(BODY_LEN)) || r.get(..4)? != STATE_MAGIC {
            return None;
        }
        let u32_at = |i: usize| Some(u32::from_le_bytes(r.get(i..i.checked_add(4)?)?.try_into().ok()?));
        let u64_at = |i: usize| Some(u64::from_le_bytes(r.get(i..i.checked_add(8)?)?.try_into().ok()?));
        let active = match r.get(16)? {
            0 => Slot::A,
            1 => Slot::B,
            _ => return None,
        };
        let trial = match r.get(17)? {
            0 => Trial::Idle,
            1 => Trial::Pending,
            2 => Trial::Booted,
            _ => return None,
        };
        Some(State {
            seq: u32_at(4)?,
            counter: u64_at(8)?,
            active,
            trial,
            images: [
                Image { len: u32_at(24)?, version: u64_at(32)? },
                Image { len: u32_at(28)?, version: u64_at(40)? },
            ],
        })
    }
}

/// What to run, as [`Slots::boot`] decided it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct Boot {
    /// The slot to run.
    pub slot: Slot,
    /// Its flash offset.
    pub offset: u32,
    /// Bytes of its image.
    pub len: u32,
    /// Its release.
    pub version: u64,
    /// True for a trial: call [`Slots::confirm`] once it works, or the next
    /// boot returns to the confirmed slot.
    pub trial: bool,
}

/// Where the journal, the keys and the two slots lie in the flash. Every
/// offset and `slot_len` is a multiple of the sector (the flash's
/// `ERASE_SIZE`, or the one given to [`Slots::with_sector`]); the
/// journal takes two erase sectors from `state`, the keys one from `keys`;
/// no two regions overlap.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct Layout {
    /// The journal's first sector (two sectors).
    pub state: u32,
    /// The keys sector.
    pub keys: u32,
    /// Slot A's and slot B's first byte.
    pub slots: [u32; 2],
    /// Bytes of each slot.
    pub slot_len: u32,
}

impl Layout {
    /// Slot `s`'s first byte.
    #[must_use]
    pub fn slot(&self, s: Slot) -> u32 {
        self.slots.get(s.index()).copied().unwrap_or(0)
    }

    /// True when the regions are sector-aligned, apart and inside `capacity`.
    fn fits(&self, erase: usize, capacity: usize) -> bool {
        let (Ok(erase), Ok(capacity)) = (u64::try_from(erase), u64::try_from(capacity)) else { return false };
        let regions = [
            (self.state, erase.saturating_mul(2)),
            (self.keys, erase),
            (self.slot(Slot::A), u64::from(self.slot_len)),
            (self.slot(Slot::B), u64::from(self.slot_len)),
        ];
        let aligned = |x: u64| erase > 0 && x.checked_rem(erase) == Some(0);
        let inside = regions.iter().all(|&(at, len)| {
            aligned(u64::from(at)) && aligned(len) && len > 0 && u64::from(at).saturating_add(len) <= capacity
        });
        let apart = regions.iter().enumerate().all(|(i, &(a, al))| {
            regions.iter().skip(i.saturating_add(1)).all(|&(b, bl)| {
                let (a, b) = (u64::from(a), u64::from(b));
                a.saturating_add(al) <= b || b.saturating_add(bl) <= a
            })
        });
        inside && apart
    }
}

/// The trusted Ed25519 public keys, as the keys sector lists them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Keys {
    count: usize,
    keys: [[u8; KEY_LEN]; MAX_KEYS],
}

impl Keys {
    /// The list of `keys`; `None` for none or more than [`MAX_KEYS`].
    #[must_use]
    pub fn new(keys: &[[u8; KEY_LEN]]) -> Option<Keys> {
        if keys.is_empty() || keys.len() > MAX_KEYS {
            return None;
        }
        let mut all = [[0u8; KEY_LEN]; MAX_KEYS];
        for (dst, k) in all.iter_mut().zip(keys) {
            *dst = *k;
        }
        Some(Keys { count: keys.len(), keys: all })
    }

    /// The keys, in the order listed.
    pub fn iter(&self) -> impl Iterator<Item = &[u8; KEY_LEN]> {
        self.keys.iter().take(self.count)
    }

    /// The listed key equal to `key`.
    #[must_use]
    pub fn find(&self, key: &[u8]) -> Option<&[u8; KEY_LEN]> {
        self.iter().find(|k| k.as_slice() == key)
    }

    /// The listed key a signed model's first bytes name (its `signature`
    /// field's key, at [`KEY_AT`](crate::signed::KEY_AT)); `None` when the
    /// bytes are too few or the key is not listed, which refuses the update.
    #[must_use]
    pub fn for_file(&self, head: &[u8]) -> Option<&[u8; KEY_LEN]> {
        let at = crate::signed::KEY_AT;
        self.find(head.get(at..at.checked_add(KEY_LEN)?)?)
    }

    /// The keys sector's contents: magic, count (u32 LE), the keys (unused
    /// places zero), SHA-256's first 16 bytes over the rest.
    #[must_use]
    pub fn encode(&self) -> [u8; KEYS_LEN] {
        let mut out = [0u8; KEYS_LEN];
        put(&mut out, 0, &KEYS_MAGIC);
        // Fallback not taken: count is at most MAX_KEYS.
        put(&mut out, 4, &u32::try_from(self.count).unwrap_or(0).to_le_bytes());
        for (i, k) in self.iter().enumerate() {
            put(&mut out, i.saturating_mul(KEY_LEN).saturating_add(8), k);
        }
        let d = sha256(out.get(..KEYS_BODY).unwrap_or(&[]));
        put(&mut out, KEYS_BODY, &d);
        out
    }

    /// The list in the keys sector's contents; `None` unless its magic,
    /// count and digest hold.
    #[must_use]
    pub fn decode(b: &[u8; KEYS_LEN]) -> Option<Keys> {
        let d = sha256(b.get(..KEYS_BODY)?);
        if b.get(KEYS_BODY..) != d.get(..KEYS_LEN.saturating_sub(KEYS_BODY)) || b.get(..4)? != KEYS_MAGIC {
            return None;
        }
        let count = usize_from_u32(u32::from_le_bytes(b.get(4..8)?.try_into().ok()?));
        if count == 0 || count > MAX_KEYS {
            return None;
        }
        let mut keys = [[0u8; KEY_LEN]; MAX_KEYS];
        for (dst, k) in keys.iter_mut().zip(b.get(8..)?.chunks_exact(KEY_LEN)) {
            put(dst, 0, k);
        }
        Some(Keys { count, keys })
    }
}

/// Why a slot operation failed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum SlotError<E> {
    /// The flash driver failed (a power cut in the simulator).
    Flash(E),
    /// The layout is not sector-aligned, overlaps or runs past the flash.
    Layout,
    /// No valid state record: the device was never provisioned.
    NotProvisioned,
    /// [`Slots::provision`] on a device that has a state.
    Provisioned,
    /// [`Slots::confirm`] with no booted trial.
    NoTrial,
    /// [`Slots::begin`] while a trial runs: confirm it or reboot first.
    TrialRunning,
    /// The image does not fit the slot (or a count past `u32`).
    TooLarge,
    /// [`Slots::finish`] with a release not above the counter.
    NotNewer,
    /// The keys sector holds no valid list (or a list of none or too many).
    Keys,
}

impl<E: core::fmt::Debug> core::fmt::Display for SlotError<E> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self {
            SlotError::Flash(e) => write!(f, "the flash driver failed: {e:?}"),
            SlotError::Layout => {
                f.write_str("the slots' layout is not sector-aligned, overlaps or runs past the flash")
            }
            SlotError::NotProvisioned => f.write_str("no valid state record: the slots were never provisioned"),
            SlotError::Provisioned => f.write_str("the slots are provisioned already"),
            SlotError::NoTrial => f.write_str("no booted trial to confirm"),
            SlotError::TrialRunning => f.write_str("a booted trial is not confirmed: confirm it or reboot first"),
            SlotError::TooLarge => f.write_str("the image does not fit the slot"),
            SlotError::NotNewer => f.write_str("the release is not above the release counter"),
            SlotError::Keys => f.write_str("the keys sector holds no valid list of trusted keys"),
        }
    }
}

impl<E> From<E> for SlotError<E> {
    fn from(e: E) -> Self {
        SlotError::Flash(e)
    }
}

/// A download in progress into the slot that is not confirmed, from
/// [`Slots::begin`]: bytes are programmed as whole write units; a partial
/// unit waits here until more bytes or [`Slots::finish`].
#[derive(Clone, Debug)]
pub struct Download {
    slot: Slot,
    /// The slot's first byte.
    base: u32,
    /// Bytes programmed (whole write units).
    done: u32,
    /// Bytes of the slot erased so far.
    erased: u32,
    /// A partial write unit.
    tail: [u8; RECORD_LEN],
    have: usize,
}

impl Download {
    /// The slot being written.
    #[must_use]
    pub const fn slot(&self) -> Slot {
        self.slot
    }

    /// Bytes taken so far.
    #[must_use]
    pub fn len(&self) -> u64 {
        u64::from(self.done).saturating_add(crate::bytes::u64_from(self.have))
    }

    /// True before the first byte.
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// Copies `bytes` into `dst` from `at`, as far as `dst` goes (a copy with
/// no length check that could panic).
fn put(dst: &mut [u8], at: usize, bytes: &[u8]) {
    for (d, b) in dst.iter_mut().skip(at).zip(bytes) {
        *d = *b;
    }
}

/// Where the journal's newest record lies, and the first place after the
/// last used one in each sector.
struct Scan {
    newest: Option<(State, usize)>,
    next: [usize; 2],
}

/// The record place a new record goes to after `scan`, and whether the
/// other sector is erased first. `None`: both sectors, then place 0.
fn place(scan: &Scan, per_sector: usize) -> (usize, usize, bool) {
    match scan.newest {
        Some((_, s)) => match scan.next.get(s) {
            Some(&n) if n < per_sector => (s, n, false),
            _ => (s ^ 1, 0, true),
        },
        None => (0, 0, true),
    }
}

/// The slot ops over the flash trait `$Flash`, each flash call wrapped in
/// `$io!` (`now!` or `later!`), `async` if given: written once for both.
macro_rules! slot_ops {
    ($Flash:path, $io:ident $(, $async:tt)?) => {
        /// The slots in `flash` at `layout`; [`SlotError::Layout`] unless it
        /// fits the flash. The flash's `WRITE_SIZE` and `READ_SIZE` must
        /// divide 64 (checked when this is compiled).
        pub fn new(flash: F, layout: Layout) -> Result<Self, SlotError<F::Error>> {
            Self::with_sector(flash, layout, F::ERASE_SIZE)
        }

        /// [`new`](Self::new) with sectors of `sector` bytes, a multiple of
        /// the flash's `ERASE_SIZE` (and of 64, at least 512): for a flash
        /// whose sectors differ in size (the layout's regions then start
        /// on `sector` boundaries of sectors no larger), or a driver whose
        /// `ERASE_SIZE` is not its sector (the C API's callbacks).
        pub fn with_sector(flash: F, layout: Layout, sector: usize) -> Result<Self, SlotError<F::Error>> {
            const {
                assert!(
                    F::WRITE_SIZE > 0 && RECORD_LEN % F::WRITE_SIZE == 0 && F::READ_SIZE > 0 && RECORD_LEN % F::READ_SIZE == 0,
                    "the flash's WRITE_SIZE and READ_SIZE must divide 64"
                )
            };
            let whole = |unit: usize| unit > 0 && sector.checked_rem(unit) == Some(0);
            let ok = whole(F::ERASE_SIZE) && whole(RECORD_LEN) && sector >= 512 && u32::try_from(sector).is_ok();
            if ok && layout.fits(sector, flash.capacity()) {
                Ok(Self { flash, layout, sector })
            } else {
                Err(SlotError::Layout)
            }
        }

        /// The flash (to read a slot's image).
        pub fn flash(&mut self) -> &mut F {
            &mut self.flash
        }

        /// The flash back.
        pub fn into_inner(self) -> F {
            self.flash
        }

        /// The layout.
        pub const fn layout(&self) -> &Layout {
            &self.layout
        }

        fn erase_size(&self) -> u32 {
            // Fallback not taken: `with_sector` checked that it fits.
            u32::try_from(self.sector).unwrap_or(u32::MAX)
        }

        fn record_at(&self, sector: usize, place: usize) -> u32 {
            let es = self.erase_size();
            let off = u32::try_from(place.saturating_mul(RECORD_LEN)).unwrap_or(0);
            self.layout.state.saturating_add(if sector == 0 { 0 } else { es }).saturating_add(off)
        }

        $($async)? fn scan(&mut self) -> Result<Scan, SlotError<F::Error>> {
            let per = self.sector / RECORD_LEN;
            let mut scan = Scan { newest: None, next: [0, 0] };
            for s in 0..2usize {
                for i in 0..per {
                    let mut r = [0u8; RECORD_LEN];
                    let at = self.record_at(s, i);
                    $io!(self.flash.read(at, &mut r))?;
                    if r.iter().all(|&b| b == 0xFF) {
                        continue;
                    }
                    if let Some(n) = scan.next.get_mut(s) {
                        *n = i.saturating_add(1);
                    }
                    if let Some(st) = State::decode(&r) {
                        if scan.newest.is_none_or(|(b, _)| st.seq > b.seq) {
                            scan.newest = Some((st, s));
                        }
                    }
                }
            }
            Ok(scan)
        }

        /// The state: the newest valid journal record.
        pub $($async)? fn state(&mut self) -> Result<State, SlotError<F::Error>> {
            let scan = $io!(self.scan())?;
            scan.newest.map(|(s, _)| s).ok_or(SlotError::NotProvisioned)
        }

        /// Appends `state` (its `seq` replaced by the next one) to the journal.
        $($async)? fn record(&mut self, scan: &Scan, state: State) -> Result<State, SlotError<F::Error>> {
            let per = self.sector / RECORD_LEN;
            let (s, i, erase) = place(scan, per);
            let seq = scan.newest.map_or(1, |(b, _)| b.seq.saturating_add(1));
            let state = State { seq, ..state };
            if erase {
                let es = self.erase_size();
                let sectors: &[usize] = if scan.newest.is_none() { &[1, 0] } else { core::slice::from_ref(&s) };
                for &e in sectors {
                    let from = self.record_at(e, 0);
                    $io!(self.flash.erase(from, from.saturating_add(es)))?;
                }
            }
            let at = self.record_at(s, i);
            $io!(self.flash.write(at, &state.encode()))?;
            Ok(state)
        }

        /// Writes the first state: slot A confirmed with an image of `len`
        /// bytes at release `version` (the factory image, programmed there
        /// beforehand), the counter `version`. [`SlotError::Provisioned`]
        /// if a state exists: nothing lowers the counter.
        pub $($async)? fn provision(&mut self, len: u32, version: u64) -> Result<State, SlotError<F::Error>> {
            let scan = $io!(self.scan())?;
            if scan.newest.is_some() {
                return Err(SlotError::Provisioned);
            }
            if len > self.layout.slot_len {
                return Err(SlotError::TooLarge);
            }
            let state = State {
                seq: 0,
                counter: version,
                active: Slot::A,
                trial: Trial::Idle,
                images: [Image { len, version }, Image::default()],
            };
            $io!(self.record(&scan, state))
        }

        /// Writes the trusted keys' list into the keys sector (provisioning).
        pub $($async)? fn write_keys(&mut self, keys: &Keys) -> Result<(), SlotError<F::Error>> {
            let at = self.layout.keys;
            $io!(self.flash.erase(at, at.saturating_add(self.erase_size())))?;
            $io!(self.flash.write(at, &keys.encode()))?;
            Ok(())
        }

        /// The trusted keys' list; [`SlotError::Keys`] unless the keys sector holds a valid one.
        pub $($async)? fn keys(&mut self) -> Result<Keys, SlotError<F::Error>> {
            let mut b = [0u8; KEYS_LEN];
            let at = self.layout.keys;
            for (i, piece) in b.chunks_exact_mut(RECORD_LEN).enumerate() {
                let off = u32::try_from(i.saturating_mul(RECORD_LEN)).unwrap_or(0);
                $io!(self.flash.read(at.saturating_add(off), piece))?;
            }
            Keys::decode(&b).ok_or(SlotError::Keys)
        }

        /// Decides what runs, at every start (see the [module](self)):
        /// a pending image is tried once, a trial that was not confirmed
        /// is left for the confirmed slot.
        pub $($async)? fn boot(&mut self) -> Result<Boot, SlotError<F::Error>> {
            let scan = $io!(self.scan())?;
            let Some((st, _)) = scan.newest else { return Err(SlotError::NotProvisioned) };
            let cand = st.candidate();
            let st = match st.trial {
                Trial::Idle => st,
                // Tried once: the record comes before the jump, so a cut in
                // the trial returns to the confirmed slot.
                Trial::Pending if cand.version > st.floor() && cand.len > 0 => {
                    let st = $io!(self.record(&scan, State { trial: Trial::Booted, ..st }))?;
                    let slot = st.active.other();
                    return Ok(Boot { slot, offset: self.layout.slot(slot), len: cand.len, version: cand.version, trial: true });
                }
                Trial::Pending | Trial::Booted => $io!(self.record(&scan, State { trial: Trial::Idle, ..st }))?,
            };
            let img = st.image(st.active);
            Ok(Boot { slot: st.active, offset: self.layout.slot(st.active), len: img.len, version: img.version, trial: false })
        }

        /// The running trial becomes the confirmed slot, and the counter its
        /// release (one record). [`SlotError::NoTrial`] unless a trial was booted.
        pub $($async)? fn confirm(&mut self) -> Result<State, SlotError<F::Error>> {
            let scan = $io!(self.scan())?;
            let Some((st, _)) = scan.newest else { return Err(SlotError::NotProvisioned) };
            if st.trial != Trial::Booted {
                return Err(SlotError::NoTrial);
            }
            let next = State { active: st.active.other(), counter: st.counter.max(st.candidate().version), trial: Trial::Idle, ..st };
            $io!(self.record(&scan, next))
        }

        /// Starts a download into the slot that is not confirmed: a pending
        /// image there is dropped first (a record, before any erase).
        /// [`SlotError::TrialRunning`] while a booted trial is not confirmed.
        pub $($async)? fn begin(&mut self) -> Result<Download, SlotError<F::Error>> {
            let scan = $io!(self.scan())?;
            let Some((mut st, _)) = scan.newest else { return Err(SlotError::NotProvisioned) };
            match st.trial {
                Trial::Booted => return Err(SlotError::TrialRunning),
                Trial::Pending => st = $io!(self.record(&scan, State { trial: Trial::Idle, ..st }))?,
                Trial::Idle => {}
            }
            let slot = st.active.other();
            Ok(Download { slot, base: self.layout.slot(slot), done: 0, erased: 0, tail: [0xFF; RECORD_LEN], have: 0 })
        }

        /// Programs `bytes` (accepted by the update check) at the download's
        /// end, erasing each sector of the slot just before its first byte.
        pub $($async)? fn write(&mut self, dl: &mut Download, bytes: &[u8]) -> Result<(), SlotError<F::Error>> {
            let unit = F::WRITE_SIZE;
            let mut rest = bytes;
            while !rest.is_empty() {
                if dl.have > 0 || rest.len() < unit {
                    // A partial unit: gather it.
                    let k = unit.saturating_sub(dl.have).min(rest.len());
                    put(&mut dl.tail, dl.have, rest.get(..k).unwrap_or(&[]));
                    dl.have = dl.have.saturating_add(k);
                    rest = rest.get(k..).unwrap_or(&[]);
                    if dl.have == unit {
                        let tail = dl.tail;
                        $io!(self.program(dl, tail.get(..unit).unwrap_or(&[])))?;
                        dl.have = 0;
                    }
                } else {
                    let n = rest.len().saturating_sub(rest.len().checked_rem(unit).unwrap_or(0));
                    $io!(self.program(dl, rest.get(..n).unwrap_or(&[])))?;
                    rest = rest.get(n..).unwrap_or(&[]);
                }
            }
            Ok(())
        }

        /// Programs whole units at the download's end, erasing first.
        $($async)? fn program(&mut self, dl: &mut Download, units: &[u8]) -> Result<(), SlotError<F::Error>> {
            let n = u32::try_from(units.len()).map_err(|_| SlotError::TooLarge)?;
            let end = dl.done.checked_add(n).filter(|&e| e <= self.layout.slot_len).ok_or(SlotError::TooLarge)?;
            let es = self.erase_size();
            while dl.erased < end {
                let from = dl.base.saturating_add(dl.erased);
                $io!(self.flash.erase(from, from.saturating_add(es)))?;
                dl.erased = dl.erased.saturating_add(es);
            }
            $io!(self.flash.write(dl.base.saturating_add(dl.done), units))?;
            dl.done = end;
            Ok(())
        }

        /// Ends the download: programs a partial last unit (padded with
        /// 0xFF), then records the image as pending at release `version`.
        /// Call it only once the update check accepted every byte;
        /// [`SlotError::NotNewer`] unless `version` is above the counter.
        pub $($async)? fn finish(&mut self, mut dl: Download, version: u64) -> Result<State, SlotError<F::Error>> {
            let len = u32::try_from(dl.len()).map_err(|_| SlotError::TooLarge)?;
            if dl.have > 0 {
                let unit = F::WRITE_SIZE;
                let mut tail = dl.tail;
                if let Some(t) = tail.get_mut(dl.have..) {
                    t.fill(0xFF);
                }
                $io!(self.program(&mut dl, tail.get(..unit).unwrap_or(&[])))?;
            }
            let scan = $io!(self.scan())?;
            let Some((st, _)) = scan.newest else { return Err(SlotError::NotProvisioned) };
            if st.trial != Trial::Idle || st.active.other() != dl.slot {
                return Err(SlotError::TrialRunning);
            }
            if version <= st.floor() {
                return Err(SlotError::NotNewer);
            }
            let next = State { trial: Trial::Pending, ..st.with_image(dl.slot, Image { len, version }) };
            $io!(self.record(&scan, next))
        }
    };
}

macro_rules! now {
    ($call:expr) => {
        $call
    };
}

#[cfg(feature = "embedded-storage-async")]
macro_rules! later {
    ($call:expr) => {
        $call.await
    };
}

/// The slots over a blocking NOR flash; see the [module](self).
#[derive(Debug)]
pub struct Slots<F> {
    flash: F,
    layout: Layout,
    sector: usize,
}

impl<F: embedded_storage::nor_flash::NorFlash> Slots<F> {
    slot_ops!(embedded_storage::nor_flash::NorFlash, now);
}

/// The slots over an async NOR flash (`embedded_storage_async`, as
/// Embassy's flash drivers implement it): [`Slots`]' operations, each awaited.
#[cfg(feature = "embedded-storage-async")]
#[derive(Debug)]
pub struct AsyncSlots<F> {
    flash: F,
    layout: Layout,
    sector: usize,
}

#[cfg(feature = "embedded-storage-async")]
impl<F: embedded_storage_async::nor_flash::NorFlash> AsyncSlots<F> {
    slot_ops!(embedded_storage_async::nor_flash::NorFlash, later, async);
}

/// A 256 KiB RAM flash (4 KiB sectors) for the documentation's examples.
#[doc(hidden)]
#[cfg(feature = "alloc")]
pub fn doc_flash() -> RamFlash {
    RamFlash(alloc::vec![0xFF; 256 * 1024])
}

/// A RAM NOR flash for the documentation's examples.
#[doc(hidden)]
#[cfg(feature = "alloc")]
#[derive(Debug)]
pub struct RamFlash(pub alloc::vec::Vec<u8>);

#[cfg(feature = "alloc")]
mod ram {
    use super::RamFlash;
    use embedded_storage::nor_flash::{check_erase, check_read, check_write};
    use embedded_storage::nor_flash::{ErrorType, NorFlash, NorFlashErrorKind, ReadNorFlash};

    impl ErrorType for RamFlash {
        type Error = NorFlashErrorKind;
    }
    impl ReadNorFlash for RamFlash {
        const READ_SIZE: usize = 1;
        fn read(&mut self, at: u32, buf: &mut [u8]) -> Result<(), NorFlashErrorKind> {
            check_read(self, at, buf.len())?;
            let at = crate::bytes::usize_from_u32(at);
            let src = self.0.get(at..at.saturating_add(buf.len())).ok_or(NorFlashErrorKind::OutOfBounds)?;
            buf.copy_from_slice(src);
            Ok(())
        }
        fn capacity(&self) -> usize {
            self.0.len()
        }
    }
    impl NorFlash for RamFlash {
        const WRITE_SIZE: usize = 4;
        const ERASE_SIZE: usize = 4096;
        fn erase(&mut self, from: u32, to: u32) -> Result<(), NorFlashErrorKind> {
            check_erase(self, from, to)?;
            let (from, to) = (crate::bytes::usize_from_u32(from), crate::bytes::usize_from_u32(to));
            self.0.get_mut(from..to).ok_or(NorFlashErrorKind::OutOfBounds)?.fill(0xFF);
            Ok(())
        }
        fn write(&mut self, at: u32, bytes: &[u8]) -> Result<(), NorFlashErrorKind> {
            check_write(self, at, bytes.len())?;
            let at = crate::bytes::usize_from_u32(at);
            let dst = self.0.get_mut(at..at.saturating_add(bytes.len())).ok_or(NorFlashErrorKind::OutOfBounds)?;
            for (d, s) in dst.iter_mut().zip(bytes) {
                *d &= *s;
            }
            Ok(())
        }
    }
}
