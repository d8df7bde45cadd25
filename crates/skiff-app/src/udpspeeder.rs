//! The udpspeeder plan → the protocol's runtime config (both sides share it).

use skiff_config::plan_udpspeeder::UdpspeederTuning;
use skiff_proto::udpspeeder::UdpspeederConfig;

pub fn config(tuning: &UdpspeederTuning) -> UdpspeederConfig {
    UdpspeederConfig {
        params: tuning.params.clone(),
        cook: tuning.cook.clone(),
        decode_buf: tuning.decode_buf,
    }
}
