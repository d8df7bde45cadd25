//! `skiff bench`: the lab that reproduces the community's proxy benchmark (source A → proxy
//! client B → proxy server C → sink D) for Skiff and the peers installed on the machine.

pub mod args;
pub mod bench;
pub mod cgroup;
pub mod combos;
pub mod fair_cc;
pub mod faketcp;
pub mod impls;
pub mod iperf;
pub mod link;
pub mod model;
pub mod netlab;
pub mod plan;
pub mod process;
pub mod reality;
pub mod report;
pub mod runner;
pub mod singbox;
pub mod stats;
pub mod tls;
pub mod traffic;
pub mod turns;
pub mod udp_fec;
pub mod verdict;

pub use args::BenchArgs;
pub use bench::main;
