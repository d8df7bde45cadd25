//! Datagrams carried inside one proxy stream: the halves live in skiff-core (inbounds hand
//! them to the dispatcher); re-exported here for the protocols that frame them.

pub use skiff_core::datagram::*;
