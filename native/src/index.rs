//! IndexFile entries written for keys already hashed (reference:
//! `sidewinder.store.index_file.put_keys_py`; the layout is in that module's doc).

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

/// Write the keys (checked by `check`) after entry `count`, slot and header after each one.
pub fn put(buffer: &mut [u8], hash_slot_num: usize, counts: Counts, keys: &[u8]) -> Counts {
    let (mut count, mut slot_count, mut begin_ts, mut begin_phy, mut phy, mut ts) = counts;
    let entries_at = HEADER + hash_slot_num * SLOT;
    for key in keys.chunks_exact(KEY_ENTRY) {
        let hash = i64::from_le_bytes(key[..8].try_into().unwrap());
        phy = i64::from_le_bytes(key[8..16].try_into().unwrap());
        ts = i64::from_le_bytes(key[16..24].try_into().unwrap());
        let slot_at = HEADER + (hash as usize % hash_slot_num) * SLOT;
        let mut previous = i32::from_be_bytes(buffer[slot_at..slot_at + SLOT].try_into().unwrap());
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
        buffer[at..at + 4].copy_from_slice(&(hash as i32).to_be_bytes());
        buffer[at + 4..at + 12].copy_from_slice(&phy.to_be_bytes());
        buffer[at + 12..at + 16].copy_from_slice(&time_diff.to_be_bytes());
        buffer[at + 16..at + 20].copy_from_slice(&previous.to_be_bytes());
        buffer[slot_at..slot_at + SLOT].copy_from_slice(&count.to_be_bytes());
        if count <= 1 {
            begin_phy = phy;
            begin_ts = ts;
        }
        count += 1;
        buffer[0..8].copy_from_slice(&begin_ts.to_be_bytes());
        buffer[8..16].copy_from_slice(&ts.to_be_bytes());
        buffer[16..24].copy_from_slice(&begin_phy.to_be_bytes());
        buffer[24..32].copy_from_slice(&phy.to_be_bytes());
        buffer[32..36].copy_from_slice(&slot_count.to_be_bytes());
        buffer[36..40].copy_from_slice(&count.to_be_bytes());
    }
    (count, slot_count, begin_ts, begin_phy, phy, ts)
}
