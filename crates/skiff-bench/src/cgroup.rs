//! `--cpu-limit 15%`: caps one side's CPU the way the reports did, with a cgroup. cgroup v2
//! (cpu.max) where its cpu controller is available; otherwise the v1 cpu controller
//! (cpu.cfs_quota_us), which is what hybrid hosts such as this one offer.

use std::io;
use std::path::{Path, PathBuf};

const PERIOD_US: u64 = 100_000;

/// A cgroup made for one bench run; removed on drop (after its processes have ended).
pub struct CpuCap {
    dir: PathBuf,
}

impl CpuCap {
    /// Creates a cgroup limited to `percent` of one CPU.
    pub fn new(percent: f64, label: &str) -> io::Result<CpuCap> {
        if !(0.5..=100.0 * 64.0).contains(&percent) {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                "the CPU limit must be 0.5% or more",
            ));
        }
        let quota = (percent / 100.0 * PERIOD_US as f64).round() as u64;
        let name = format!("skiff-bench-{}-{label}", std::process::id());
        if let Some(root) = v2_root_with_cpu() {
            let dir = root.join(&name);
            std::fs::create_dir_all(&dir).map_err(|e| explain(&dir, e))?;
            std::fs::write(dir.join("cpu.max"), format!("{quota} {PERIOD_US}"))
                .map_err(|e| explain(&dir, e))?;
            return Ok(CpuCap { dir });
        }
        let v1 = Path::new("/sys/fs/cgroup/cpu");
        if v1.join("cpu.cfs_quota_us").exists() {
            let dir = v1.join(&name);
            std::fs::create_dir_all(&dir).map_err(|e| explain(&dir, e))?;
            std::fs::write(dir.join("cpu.cfs_period_us"), PERIOD_US.to_string())
                .map_err(|e| explain(&dir, e))?;
            std::fs::write(dir.join("cpu.cfs_quota_us"), quota.to_string())
                .map_err(|e| explain(&dir, e))?;
            return Ok(CpuCap { dir });
        }
        Err(io::Error::new(
            io::ErrorKind::Unsupported,
            "--cpu-limit needs a writable cgroup with the cpu controller (cgroup v2 cpu.max or \
             v1 /sys/fs/cgroup/cpu); none was found",
        ))
    }

    /// Moves process `pid` (all its threads) into the cgroup.
    pub fn add(&self, pid: u32) -> io::Result<()> {
        std::fs::write(self.dir.join("cgroup.procs"), pid.to_string())
            .map_err(|e| explain(&self.dir, e))
    }
}

impl Drop for CpuCap {
    fn drop(&mut self) {
        // The kernel refuses while processes remain; they have been ended by now, but give
        // a straggler a moment.
        for _ in 0..50 {
            if std::fs::remove_dir(&self.dir).is_ok() || !self.dir.exists() {
                return;
            }
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
    }
}

fn explain(dir: &Path, e: io::Error) -> io::Error {
    io::Error::new(
        e.kind(),
        format!(
            "--cpu-limit: cannot set up cgroup {} ({e}); it needs root and a writable cgroup",
            dir.display()
        ),
    )
}

/// The cgroup v2 mount whose root offers the cpu controller to children, if any.
fn v2_root_with_cpu() -> Option<PathBuf> {
    let mounts = std::fs::read_to_string("/proc/self/mounts").ok()?;
    for line in mounts.lines() {
        let mut f = line.split_whitespace();
        let (_, Some(path), Some("cgroup2")) = (f.next(), f.next(), f.next()) else {
            continue;
        };
        let root = PathBuf::from(path);
        let controllers =
            std::fs::read_to_string(root.join("cgroup.controllers")).unwrap_or_default();
        if controllers.split_whitespace().any(|c| c == "cpu") {
            let subtree = root.join("cgroup.subtree_control");
            let enabled = std::fs::read_to_string(&subtree).unwrap_or_default();
            if !enabled.split_whitespace().any(|c| c == "cpu") {
                std::fs::write(&subtree, "+cpu").ok()?;
            }
            return Some(root);
        }
    }
    None
}

/// Parses `15%` or `0.15` into a percentage of one CPU.
pub fn parse_percent(text: &str) -> Result<f64, String> {
    let t = text.trim();
    let value = match t.strip_suffix('%') {
        Some(p) => p
            .trim()
            .parse::<f64>()
            .map_err(|_| format!("`{text}` is not a percentage"))?,
        None => {
            t.parse::<f64>()
                .map_err(|_| format!("`{text}` is not a percentage"))?
                * 100.0
        }
    };
    if value.is_finite() && value > 0.0 {
        Ok(value)
    } else {
        Err(format!("`{text}`: the CPU limit must be above 0%"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percentages() {
        assert_eq!(parse_percent("15%").unwrap(), 15.0);
        assert_eq!(parse_percent("0.5").unwrap(), 50.0);
        assert!(parse_percent("-3%").is_err());
        assert!(parse_percent("abc").is_err());
    }
}
