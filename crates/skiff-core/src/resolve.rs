//! The name-resolution seam: routing and freedom ask a [`Resolve`] for a domain's addresses
//! without knowing whether the answer comes from the system resolver or the configured DNS
//! module (skiff-dns), so neither depends on the other.

use std::io;
use std::net::IpAddr;

use crate::BoxFuture;

/// Which address families a lookup wants.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Family {
    Any,
    V4,
    V6,
}

impl Family {
    pub fn wants_v4(self) -> bool {
        self != Family::V6
    }

    pub fn wants_v6(self) -> bool {
        self != Family::V4
    }

    /// Whether `ip` belongs to this family.
    pub fn admits(self, ip: &IpAddr) -> bool {
        match ip {
            IpAddr::V4(_) => self.wants_v4(),
            IpAddr::V6(_) => self.wants_v6(),
        }
    }
}

/// Resolves a domain to its addresses. Implementations bound their own waits; an empty
/// answer is an error (`NotFound`), so callers never dial nothing.
pub trait Resolve: Send + Sync {
    fn lookup<'a>(
        &'a self,
        name: &'a str,
        family: Family,
    ) -> BoxFuture<'a, io::Result<Vec<IpAddr>>>;
}
