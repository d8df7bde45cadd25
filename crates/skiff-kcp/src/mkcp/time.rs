//! Millisecond clocks that wrap: every comparison is on the wrapping difference.

/// `a` comes before `b`.
pub(super) fn before(a: u32, b: u32) -> bool {
    (a.wrapping_sub(b) as i32) < 0
}

/// `deadline` has come at `now`.
pub(super) fn due(now: u32, deadline: u32) -> bool {
    !before(now, deadline)
}
