//! Process limits a proxy needs: every connection costs two sockets (and two pipes while it
//! splices), so the default 1024 open files would cap Skiff at a few hundred connections.

/// Raises the soft open-file limit to the hard limit. Returns the new soft limit.
pub fn raise_open_file_limit() -> Option<u64> {
    #[cfg(unix)]
    {
        // SAFETY: getrlimit/setrlimit with a valid, initialised struct.
        unsafe {
            let mut lim: libc::rlimit = std::mem::zeroed();
            if libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim) != 0 {
                return None;
            }
            if lim.rlim_cur < lim.rlim_max {
                lim.rlim_cur = lim.rlim_max;
                if libc::setrlimit(libc::RLIMIT_NOFILE, &lim) != 0 {
                    return None;
                }
            }
            Some(lim.rlim_cur as u64)
        }
    }
    #[cfg(not(unix))]
    {
        None
    }
}
