//! V2Ray's routing data files (`geoip.dat` / `geosite.dat`, protobuf `GeoIPList` /
//! `GeoSiteList`) and the matchers routing rules use for domains and IPs. Sans-IO: the caller
//! reads a file into a buffer, asks for the codes its config names and drops the buffer.
//!
//! Why a hand-written protobuf wire scanner ([`wire`]) instead of prost: a geosite.dat holds
//! ~1500 lists and a config names a handful. A generated decoder decodes the whole
//! `GeoSiteList` (every domain string of every list allocated, then thrown away). The scanner
//! walks the top-level entries by their length prefixes, reads each entry's `code` and decodes
//! only the entries asked for; the others cost a varint read and a compare.
//!
//! Modules: [`wire`] (varints and fields), [`list`] (finding entries by code), [`site`] and
//! [`ip`] (decoding one entry), [`domain_set`] and [`ip_set`] (the matchers), [`encode`]
//! (writing .dat files, for tests, fuzzing and benches).

pub mod domain_set;
pub mod encode;
pub mod ip;
pub mod ip_set;
pub mod list;
pub mod site;
pub mod wire;

pub use domain_set::DomainSet;
pub use ip_set::{IpMatcher, IpSet};
pub use list::{GeoError, find_entries};
pub use site::{Domain, DomainKind};
