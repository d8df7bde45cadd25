//! FEC parameters as speederv2 takes them: `-f x:y` or `-f x1:y1,x2:y2,…`, `--mode`, `--mtu`,
//! `--queue-len`, `--timeout`, `--disable-fec`, with its ranges and its interpolation of the
//! list form into one (x, y) per group size.

use std::time::Duration;

use crate::rs::MAX_SHARDS;

/// How packets become FEC groups (`--mode`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FecMode {
    /// Packets are packed into one blob per group and split into equal shards.
    Blob = 0,
    /// Each packet is one shard, sent at once; parity follows when the group closes.
    PerPacket = 1,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FecParams {
    pub mode: FecMode,
    /// `--mtu`: largest shard (mode 0) or the size mode 1 warns above.
    pub mtu: usize,
    /// `--queue-len`: mode 0 closes a group after this many packets.
    pub queue_len: usize,
    /// `--timeout`: the longest a packet waits for its group to close.
    pub timeout: Duration,
    /// `--disable-fec`: packets go out with no FEC header at all.
    pub disable_fec: bool,
    /// y for each group size x = index + 1, up to the largest x given.
    redundancy: Vec<u8>,
}

impl Default for FecParams {
    fn default() -> Self {
        FecParams {
            mode: FecMode::Blob,
            mtu: 1250,
            queue_len: 200,
            timeout: Duration::from_millis(8),
            disable_fec: false,
            redundancy: parse_fec("20:10").expect("default is valid"),
        }
    }
}

impl FecParams {
    /// Sets `-f`: "x:y" or "x1:y1,x2:y2,…" with x ascending.
    pub fn set_fec(&mut self, spec: &str) -> Result<(), String> {
        self.redundancy = parse_fec(spec)?;
        Ok(())
    }

    pub fn set_mode(&mut self, mode: u32) -> Result<(), String> {
        self.mode = match mode {
            0 => FecMode::Blob,
            1 => FecMode::PerPacket,
            _ => return Err(format!("mode must be 0 or 1, not {mode}")),
        };
        Ok(())
    }

    pub fn set_mtu(&mut self, mtu: u32) -> Result<(), String> {
        if !(100..=2000).contains(&mtu) {
            return Err(format!("mtu must be between 100 and 2000, not {mtu}"));
        }
        self.mtu = mtu as usize;
        Ok(())
    }

    pub fn set_queue_len(&mut self, queue_len: u32) -> Result<(), String> {
        if !(1..=10_000).contains(&queue_len) {
            return Err(format!(
                "queueLen must be between 1 and 10000, not {queue_len}"
            ));
        }
        self.queue_len = queue_len as usize;
        Ok(())
    }

    pub fn set_timeout_ms(&mut self, ms: u32) -> Result<(), String> {
        if ms > 1000 {
            return Err(format!("timeout must be between 0 and 1000 ms, not {ms}"));
        }
        self.timeout = Duration::from_millis(ms.into());
        Ok(())
    }

    /// The largest group size (the last x of `-f`).
    pub fn max_data_shards(&self) -> usize {
        self.redundancy.len()
    }

    /// y for a group of `x` data shards (1 ≤ x ≤ `max_data_shards`).
    pub fn redundancy_for(&self, x: usize) -> usize {
        self.redundancy[x - 1] as usize
    }
}

/// speederv2's `rs_from_str`: sizes below the first x use the first y; between two given
/// points y is interpolated linearly and rounded up; x + y never exceeds 255.
fn parse_fec(spec: &str) -> Result<Vec<u8>, String> {
    let mut points: Vec<(usize, usize)> = Vec::new();
    for part in spec.split(',') {
        let (x, y) = part
            .split_once(':')
            .ok_or_else(|| format!("fec part {part:?} is not x:y"))?;
        let x: usize = x
            .trim()
            .parse()
            .map_err(|_| format!("fec x in {part:?} is not a number"))?;
        let y: usize = y
            .trim()
            .parse()
            .map_err(|_| format!("fec y in {part:?} is not a number"))?;
        if x < 1 || x + y > MAX_SHARDS {
            return Err(format!(
                "fec {x}:{y}: x must be at least 1 and x + y at most {MAX_SHARDS}"
            ));
        }
        if let Some(&(previous, _)) = points.last()
            && x <= previous
        {
            return Err(format!("fec {spec:?}: x must ascend"));
        }
        points.push((x, y));
    }
    let (first_x, first_y) = points[0];
    let last_x = points[points.len() - 1].0;
    let mut table = vec![0u8; last_x];
    for slot in table.iter_mut().take(first_x) {
        *slot = first_y as u8;
    }
    for pair in points.windows(2) {
        let ((pre_x, pre_y), (now_x, now_y)) = (pair[0], pair[1]);
        table[now_x - 1] = now_y as u8;
        let distance = (now_x - pre_x) as f64;
        for x in pre_x + 1..now_x {
            let step = (now_y as f64 - pre_y as f64) * (x - pre_x) as f64 / distance;
            let mut y = (pre_y as f64 + step + 0.9999) as i64;
            if x as i64 + y > MAX_SHARDS as i64 {
                y = (MAX_SHARDS - x) as i64;
            }
            table[x - 1] = y.max(0) as u8;
        }
    }
    Ok(table)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn single_pair_applies_to_every_smaller_group() {
        let mut p = FecParams::default();
        p.set_fec("20:10").unwrap();
        assert_eq!(p.max_data_shards(), 20);
        assert_eq!(p.redundancy_for(1), 10);
        assert_eq!(p.redundancy_for(20), 10);
    }

    #[test]
    fn list_form_interpolates_rounding_up() {
        let mut p = FecParams::default();
        p.set_fec("1:3,2:4,10:6,20:10").unwrap();
        // speederv2 prints this table for the same argument.
        let table: Vec<usize> = (1..=20).map(|x| p.redundancy_for(x)).collect();
        assert_eq!(
            table,
            [
                3, 4, 5, 5, 5, 5, 6, 6, 6, 6, 7, 7, 8, 8, 8, 9, 9, 10, 10, 10
            ]
        );
    }

    #[test]
    fn rejects_what_speederv2_rejects() {
        let mut p = FecParams::default();
        assert!(p.set_fec("0:3").is_err());
        assert!(p.set_fec("200:100").is_err());
        assert!(p.set_fec("5:1,3:1").is_err());
        assert!(p.set_fec("nonsense").is_err());
        assert!(p.set_mtu(50).is_err());
        assert!(p.set_mode(2).is_err());
        assert!(p.set_timeout_ms(1001).is_err());
        assert!(p.set_queue_len(0).is_err());
    }
}
