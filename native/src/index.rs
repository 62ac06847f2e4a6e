//! IndexFile entries written for keys already hashed (reference:
//! `sidewinder.store.index_file.put_keys_py`; the layout, and who reads which bytes while they
//! are written, are in that module's doc).
//!
//! The file's mapping is shared: the event loop's lookups read it while `put` writes it on the
//! dispatch thread with the GIL released. So no Rust reference covers it (a `&mut [u8]` over
//! bytes another thread reads is a data race by Rust's rules, and lets the compiler assume
//! nobody sees the order or the number of its stores): `SharedIndex` writes the bytes it owns
//! one store each, in program order, through a raw pointer, as relaxed atomic stores.

use std::sync::atomic::{fence, AtomicU32, AtomicU8, Ordering};

const HEADER: usize = 40;
const SLOT: usize = 4;
const ENTRY: usize = 20;
pub const KEY_ENTRY: usize = 24; // hash, phy offset, store timestamp: i64 little-endian each

/// The header's running fields: (indexCount, hashSlotCount, beginTimestamp, beginPhyOffset,
/// endPhyOffset, endTimestamp).
pub type Counts = (i32, i32, i64, i64, i64, i64);

/// Why the keys cannot be written into a buffer of this size (nothing is written then).
pub fn check(
    buffer_len: usize,
    hash_slot_num: usize,
    count: i32,
    keys: &[u8],
) -> Result<(), String> {
    if hash_slot_num == 0 || !keys.len().is_multiple_of(KEY_ENTRY) || count < 0 {
        return Err(format!(
            "{} key bytes, {} slots and count {} do not make an index write",
            keys.len(),
            hash_slot_num,
            count
        ));
    }
    let entries_at = HEADER + hash_slot_num * SLOT;
    let end = entries_at + (count as usize + keys.len() / KEY_ENTRY) * ENTRY;
    if end > buffer_len {
        return Err(format!(
            "index entries up to byte {end} do not fit a file of {buffer_len} bytes"
        ));
    }
    for key in keys.chunks_exact(KEY_ENTRY) {
        let hash = i64::from_le_bytes(key[..8].try_into().unwrap());
        if !(0..=i32::MAX as i64).contains(&hash) {
            return Err(format!("key hash {hash} is not a non-negative int32"));
        }
    }
    if count as usize + keys.len() / KEY_ENTRY > i32::MAX as usize {
        return Err("the index count would pass Integer.MAX_VALUE".to_string());
    }
    Ok(())
}

/// An index file's bytes, written by one thread while others may read them.
pub struct SharedIndex {
    base: *mut u8,
    len: usize,
}

// SAFETY: it only hands out atomics over its bytes, so it may be used from the thread that
// runs without the GIL (`new`'s contract keeps the bytes mapped meanwhile).
unsafe impl Send for SharedIndex {}
unsafe impl Sync for SharedIndex {}

impl SharedIndex {
    /// # Safety
    /// `base` points at `len` bytes that stay mapped while this value lives, and no other
    /// thread writes them meanwhile (the store's dispatch lock: the index has one writer);
    /// other threads may read them.
    pub unsafe fn new(base: *mut u8, len: usize) -> Self {
        SharedIndex { base, len }
    }

    fn at(&self, at: usize, len: usize) -> *mut u8 {
        assert!(
            at.checked_add(len).is_some_and(|end| end <= self.len),
            "{len} bytes at {at} of a {}-byte index",
            self.len
        );
        self.base.wrapping_add(at)
    }

    /// `value`'s bytes stored at `at`, a 4-byte word a store where it is aligned (every field
    /// of a mapped index file is), else a byte a store.
    fn write(&self, at: usize, value: &[u8]) {
        let to = self.at(at, value.len());
        if to.align_offset(4) == 0 && value.len().is_multiple_of(4) {
            for (i, word) in value.chunks_exact(4).enumerate() {
                let word = u32::from_ne_bytes(word.try_into().unwrap());
                // SAFETY: in bounds (`at`) of bytes mapped while `self` lives (`new`), aligned
                // for a u32; from Rust they are only accessed atomically, words as words.
                unsafe { AtomicU32::from_ptr(to.add(4 * i).cast()) }.store(word, Ordering::Relaxed);
            }
        } else {
            for (i, &b) in value.iter().enumerate() {
                // SAFETY: as above; a u8 is always aligned.
                unsafe { AtomicU8::from_ptr(to.add(i)) }.store(b, Ordering::Relaxed);
            }
        }
    }

    /// A slot's entry number: only this writer writes slots, so it reads what it wrote last.
    fn read_i32(&self, at: usize) -> i32 {
        let from = self.at(at, 4);
        // SAFETY: in bounds (`at`) of mapped bytes no other thread writes (`new`).
        i32::from_be_bytes(unsafe { from.cast::<[u8; 4]>().read() })
    }
}

/// Write the keys (checked by `check`) after entry `count`: per key its entry, then its slot,
/// then the header (the order RocketMQ writes them in, and the one readers rely on).
pub fn put(index: &SharedIndex, hash_slot_num: usize, counts: Counts, keys: &[u8]) -> Counts {
    let (mut count, mut slot_count, mut begin_ts, mut begin_phy, mut phy, mut ts) = counts;
    let entries_at = HEADER + hash_slot_num * SLOT;
    for key in keys.chunks_exact(KEY_ENTRY) {
        let hash = i64::from_le_bytes(key[..8].try_into().unwrap());
        phy = i64::from_le_bytes(key[8..16].try_into().unwrap());
        ts = i64::from_le_bytes(key[16..24].try_into().unwrap());
        let slot_at = HEADER + (hash as usize % hash_slot_num) * SLOT;
        let mut previous = index.read_i32(slot_at);
        // Only entries below the count exist; a slot naming another is stale (a crash).
        if previous <= 0 || previous >= count {
            previous = 0;
            slot_count = slot_count.wrapping_add(1);
        }
        let time_diff = if begin_ts <= 0 {
            0
        } else {
            (ts.saturating_sub(begin_ts).div_euclid(1000)).clamp(0, i32::MAX as i64) as i32
        };
        let at = entries_at + count as usize * ENTRY;
        index.write(at, &(hash as i32).to_be_bytes());
        index.write(at + 4, &phy.to_be_bytes());
        index.write(at + 12, &time_diff.to_be_bytes());
        index.write(at + 16, &previous.to_be_bytes());
        // The entry before the slot that names it, the slot before the count that admits it.
        fence(Ordering::Release);
        index.write(slot_at, &count.to_be_bytes());
        if count <= 1 {
            begin_phy = phy;
            begin_ts = ts;
        }
        count += 1;
        fence(Ordering::Release);
        index.write(0, &begin_ts.to_be_bytes());
        index.write(8, &ts.to_be_bytes());
        index.write(16, &begin_phy.to_be_bytes());
        index.write(24, &phy.to_be_bytes());
        index.write(32, &slot_count.to_be_bytes());
        index.write(36, &count.to_be_bytes());
    }
    (count, slot_count, begin_ts, begin_phy, phy, ts)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_land_as_rocketmq_lays_them_out() {
        let slots = 4;
        let mut file = vec![0u8; HEADER + slots * SLOT + 3 * ENTRY];
        let mut keys = Vec::new();
        for (hash, phy, ts) in [(5i64, 100i64, 2000i64), (9, 200, 5000)] {
            keys.extend_from_slice(&hash.to_le_bytes());
            keys.extend_from_slice(&phy.to_le_bytes());
            keys.extend_from_slice(&ts.to_le_bytes());
        }
        check(file.len(), slots, 1, &keys).unwrap();
        // SAFETY: the Vec outlives `index`, and nothing else touches it meanwhile.
        let index = unsafe { SharedIndex::new(file.as_mut_ptr(), file.len()) };
        let counts = put(&index, slots, (1, 0, 0, 0, 0, 0), &keys);
        assert_eq!(counts, (3, 1, 2000, 100, 200, 5000));
        // Both keys hash to slot 1: the newest entry (2) there, chained to entry 1.
        let slot = HEADER + SLOT;
        assert_eq!(file[slot..slot + 4], 2i32.to_be_bytes());
        let second = HEADER + slots * SLOT + 2 * ENTRY;
        assert_eq!(file[second..second + 4], 9i32.to_be_bytes());
        assert_eq!(file[second + 12..second + 16], 3i32.to_be_bytes()); // (5000 - 2000) / 1000
        assert_eq!(file[second + 16..second + 20], 1i32.to_be_bytes());
        assert_eq!(file[36..40], 3i32.to_be_bytes());
        // A buffer that is not word-aligned gets the same bytes, a byte at a time.
        let mut shifted = vec![0u8; file.len() + 1];
        // SAFETY: as above, one byte into the Vec.
        let index = unsafe { SharedIndex::new(shifted.as_mut_ptr().add(1), file.len()) };
        assert_eq!(put(&index, slots, (1, 0, 0, 0, 0, 0), &keys), counts);
        assert_eq!(shifted[1..], file[..]);
    }
}
