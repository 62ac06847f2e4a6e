//! A pull's records cut out of one CommitLog segment and joined into its reply body
//! (reference: `sidewinder.store.get_message.gather_run_py`, the same rules entry by entry).

/// A ConsumeQueue entry: commit log offset (i64), size (i32), tags code (i64), big-endian.
const ENTRY: usize = 20;
/// A blank entry (a queue file's padding) has this size, offset 0 and tags code 0.
const BLANK_SIZE: i32 = 0x7FFF_FFFF;

pub struct Run {
    pub scanned: usize,
    pub count: usize,
    pub total: i64,
    pub outside: bool,
    /// (start, end) in the segment of each record taken, in order.
    pub spans: Vec<(usize, usize)>,
}

pub struct Limits<'a> {
    pub segment_start: i64,
    pub segment_end: i64,
    pub max_count: usize,
    pub max_bytes: i64,
    /// Sorted; None: every tags code matches.
    pub tags_codes: Option<&'a [i64]>,
}

/// Walk `entries` (whole 20-byte entries; a partial tail is not read) while the batch is not
/// full, taking the records that lie in `segment`; `count` and `total` are what earlier
/// segments of the same batch took. Stops at the first entry pointing outside the segment
/// (`outside`: the caller looks up the next one and goes on from `scanned`).
pub fn gather(
    entries: &[u8],
    segment: &[u8],
    limits: &Limits<'_>,
    count: usize,
    total: i64,
) -> Run {
    let mut run = Run {
        scanned: 0,
        count,
        total,
        outside: false,
        spans: Vec::new(),
    };
    for entry in entries.chunks_exact(ENTRY) {
        if run.count >= limits.max_count {
            break;
        }
        let phy = i64::from_be_bytes(entry[0..8].try_into().unwrap());
        let size = i32::from_be_bytes(entry[8..12].try_into().unwrap());
        let tags = i64::from_be_bytes(entry[12..20].try_into().unwrap());
        let wanted = limits
            .tags_codes
            .is_none_or(|codes| codes.binary_search(&tags).is_ok());
        let blank = size == BLANK_SIZE && phy == 0 && tags == 0;
        if wanted && !blank {
            if !(limits.segment_start <= phy && phy < limits.segment_end) {
                run.outside = true;
                break;
            }
            let start = (phy - limits.segment_start) as u64;
            let end = start + size.max(0) as u64;
            // A record that is not wholly in the mapped segment (a broken entry) is stepped
            // over, as a blank one is.
            if size > 0 && end <= segment.len() as u64 {
                if run.count > 0 && run.total + size as i64 > limits.max_bytes {
                    break;
                }
                run.spans.push((start as usize, end as usize));
                run.count += 1;
                run.total += size as i64;
            }
        }
        run.scanned += 1;
    }
    run
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(phy: i64, size: i32, tags: i64) -> Vec<u8> {
        let mut out = phy.to_be_bytes().to_vec();
        out.extend_from_slice(&size.to_be_bytes());
        out.extend_from_slice(&tags.to_be_bytes());
        out
    }

    #[test]
    fn takes_matching_records_up_to_the_limits() {
        let segment = vec![7u8; 100];
        let mut entries = entry(0, 10, 1);
        entries.extend(entry(10, 10, 2));
        entries.extend(entry(0, BLANK_SIZE, 0));
        entries.extend(entry(20, 10, 1));
        entries.extend(entry(200, 10, 1));
        let codes = [1i64];
        let limits = Limits {
            segment_start: 0,
            segment_end: 100,
            max_count: 32,
            max_bytes: 1000,
            tags_codes: Some(&codes),
        };
        let run = gather(&entries, &segment, &limits, 0, 0);
        assert_eq!(run.spans, vec![(0, 10), (20, 30)]);
        assert_eq!(
            (run.scanned, run.count, run.total, run.outside),
            (4, 2, 20, true)
        );
        let tight = Limits {
            max_bytes: 15,
            tags_codes: None,
            ..limits
        };
        let run = gather(&entries, &segment, &tight, 0, 0);
        assert_eq!((run.scanned, run.count, run.spans.len()), (1, 1, 1));
    }
}
