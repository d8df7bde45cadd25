//! Drops the start-up's read-only file pages from the process's page tables once it is done.
//!
//! Parsing the config, the CLI, geodata lists and every protocol's setup runs megabytes of
//! machine code once; the kernel maps each touched page (and up to 64 KiB around it) and
//! counts all of it in RSS for the life of the process: 5 of an idle `skiff run`'s 9.7 MiB.
//! `MADV_DONTNEED` on a private file mapping that holds no page of its own (no copy-on-write
//! copy: `Anonymous: 0 kB` in smaps) and cannot be written only removes the mappings; the
//! pages stay in the page cache, shared, and what the relay keeps running maps back on a
//! minor fault. Nothing is lost by construction: such a mapping's content is the file's.
//! What goes: code and read-only data of Skiff and its libraries that the idle loop does not
//! use. Peak RSS (VmHWM) is not changed, and the heap is `memory::trim`'s business.

/// One mapping that can go: its address range.
#[derive(Debug, PartialEq, Eq)]
pub struct Releasable {
    pub start: usize,
    pub end: usize,
    /// Its resident KiB when read, for the log.
    pub rss_kib: u64,
}

/// The mappings of `/proc/self/smaps` text that can be released: file-backed (a path),
/// private, not writable, resident, with no anonymous (copy-on-write) page.
pub fn releasable(smaps: &str) -> Vec<Releasable> {
    let mut found = Vec::new();
    // The eligible mapping being read, and its `Anonymous:` figure once seen.
    let mut current: Option<(Releasable, Option<u64>)> = None;
    let mut keep = |current: Option<(Releasable, Option<u64>)>| {
        if let Some((mapping, Some(0))) = current
            && mapping.rss_kib > 0
        {
            found.push(mapping);
        }
    };
    for line in smaps.lines() {
        let mut fields = line.split_whitespace();
        let Some(first) = fields.next() else { continue };
        if let Some((start, end)) = first.split_once('-')
            && let (Ok(start), Ok(end)) = (
                usize::from_str_radix(start, 16),
                usize::from_str_radix(end, 16),
            )
        {
            keep(current.take());
            let perms = fields.next().unwrap_or("").as_bytes();
            // offset, device, inode, then the path (absent for anonymous memory).
            let path = fields.nth(3).unwrap_or("");
            let eligible = perms.len() == 4
                && perms[0] == b'r'
                && perms[1] != b'w'
                && perms[3] == b'p'
                && path.starts_with('/');
            if eligible {
                let mapping = Releasable {
                    start,
                    end,
                    rss_kib: 0,
                };
                current = Some((mapping, None));
            }
            continue;
        }
        let Some((mapping, anonymous)) = current.as_mut() else {
            continue;
        };
        let value = fields.next().and_then(|v| v.parse::<u64>().ok());
        match first {
            "Rss:" => mapping.rss_kib = value.unwrap_or(0),
            "Anonymous:" => *anonymous = value,
            _ => {}
        }
    }
    keep(current);
    found
}

/// Releases what [`releasable`] finds in this process; returns the KiB that were resident in
/// those mappings. Off Linux, nothing to do.
pub fn release_startup_pages() -> u64 {
    #[cfg(target_os = "linux")]
    {
        let Ok(smaps) = std::fs::read_to_string("/proc/self/smaps") else {
            return 0;
        };
        let mut released = 0;
        for mapping in releasable(&smaps) {
            // SAFETY: the range is a whole mapping of this process as the kernel listed it:
            // private, read-only, file-backed, with no page of its own, so MADV_DONTNEED only
            // drops page-table entries that a later access faults back in from the same file.
            let done = unsafe {
                libc::madvise(
                    mapping.start as *mut libc::c_void,
                    mapping.end - mapping.start,
                    libc::MADV_DONTNEED,
                )
            };
            if done == 0 {
                released += mapping.rss_kib;
            }
        }
        released
    }
    #[cfg(not(target_os = "linux"))]
    0
}

#[cfg(test)]
mod tests {
    use super::*;

    const SMAPS: &str = "\
55860ef06000-55860f27c000 r--p 00000000 fe:00 5358638                    /usr/bin/skiff
Size:               3544 kB
Rss:                1256 kB
Anonymous:             0 kB
VmFlags: rd mr mw me dw sd
55860f27c000-55860fe8f000 r-xp 00375000 fe:00 5358638                    /usr/bin/skiff
Size:              12364 kB
Rss:                5428 kB
Anonymous:             0 kB
VmFlags: rd ex mr mw me dw sd
55860fe8f000-55860fef5000 r--p 00f87000 fe:00 5358638                    /usr/bin/skiff
Size:                408 kB
Rss:                 408 kB
Anonymous:           408 kB
VmFlags: rd mr mw me dw ac sd
55860fef5000-55860fef7000 rw-p 00fec000 fe:00 5358638                    /usr/bin/skiff
Size:                  8 kB
Rss:                   8 kB
Anonymous:             0 kB
558645894000-5586458d4000 rw-p 00000000 00:00 0                          [heap]
Rss:                 128 kB
Anonymous:           128 kB
7f6be3605000-7f6be375b000 r-xp 00026000 fe:00 326269                     /usr/lib/x86_64-linux-gnu/libc.so.6
Rss:                1068 kB
Anonymous:             0 kB
7f6be3800000-7f6be3900000 r--s 00000000 fe:00 77                         /dev/shm/shared
Rss:                 100 kB
Anonymous:             0 kB
7f6be3a00000-7f6be3a10000 r-xp 00000000 fe:00 78                         /usr/lib/not-touched.so
Rss:                   0 kB
Anonymous:             0 kB
7ffd0e3c4000-7ffd0e3c6000 r-xp 00000000 00:00 0                          [vdso]
Rss:                   4 kB
Anonymous:             0 kB
";

    #[test]
    fn only_private_read_only_file_mappings_without_copies_are_released() {
        let found = releasable(SMAPS);
        let ranges: Vec<(usize, usize, u64)> =
            found.iter().map(|m| (m.start, m.end, m.rss_kib)).collect();
        assert_eq!(
            ranges,
            [
                (0x55860ef06000, 0x55860f27c000, 1256), // rodata
                (0x55860f27c000, 0x55860fe8f000, 5428), // text
                (0x7f6be3605000, 0x7f6be375b000, 1068), // libc's text
            ],
            // Not: the relocated RELRO (copies), .data (writable), the heap, a shared
            // mapping, an untouched one, the vDSO (no file).
        );
    }

    #[test]
    fn garbage_finds_nothing() {
        assert!(releasable("").is_empty());
        assert!(releasable("zz-yy r-xp\nRss: x kB\nAnonymous: 0 kB\n").is_empty());
        assert!(releasable("0-10 r-xp 0 0 0 /a\nRss: 4 kB\n").is_empty()); // no Anonymous line
    }

    /// In this very process: the code that ran to get here is resident; after the release
    /// it no longer is, and the code keeps running (it faults back in).
    #[cfg(target_os = "linux")]
    #[test]
    fn releasing_lowers_this_process_rss_and_code_still_runs() {
        let resident = || -> u64 {
            let smaps = std::fs::read_to_string("/proc/self/smaps").unwrap();
            releasable(&smaps).iter().map(|m| m.rss_kib).sum()
        };
        let before = resident();
        assert!(before > 0, "nothing resident to release");
        let released = release_startup_pages();
        assert!(released > 0);
        let after = resident();
        assert!(
            after < before,
            "resident {before} KiB before, {after} KiB after"
        );
        // Code and read-only data come back as they are used: the parser, run again from
        // pages just unmapped, still gives what it gave.
        assert_eq!(releasable(SMAPS).len(), 3);
    }
}
