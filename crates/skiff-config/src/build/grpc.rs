//! `grpcSettings`, as Xray reads them (infra/conf transport_method.go `GRPCConfig`): every key
//! optional, negative timeouts and window sizes taken as 0 (unset), and values beyond int32
//! an error, as Go's JSON decoder refuses them.

use serde::Deserialize;

use super::error_count;
use crate::diag::Diagnostic;
use crate::plan::GrpcPlan;
use crate::raw::values::{Int, out_of_range};
use crate::source::Loc;

/// The keys exactly as Xray spells them: the three in snake_case are snake_case in Xray too.
#[derive(Clone, Debug, Default, Deserialize)]
pub struct RawGrpcSettings {
    pub authority: Option<String>,
    #[serde(rename = "serviceName")]
    pub service_name: Option<String>,
    #[serde(rename = "multiMode")]
    pub multi_mode: Option<bool>,
    pub idle_timeout: Option<Int>,
    pub health_check_timeout: Option<Int>,
    pub permit_without_stream: Option<bool>,
    pub initial_windows_size: Option<Int>,
    pub user_agent: Option<String>,
}

pub fn grpc_plan(g: RawGrpcSettings, loc: &Loc, diags: &mut Vec<Diagnostic>) -> Option<GrpcPlan> {
    let before = error_count(diags);
    let mut int32 = |key: &str, value: Option<Int>| -> u32 {
        let Some(value) = value else { return 0 };
        match value.within(i64::from(i32::MIN), i64::from(i32::MAX)) {
            // Xray's Build turns a negative value into 0: unset.
            Some(v) => u32::try_from(v).unwrap_or(0),
            None => {
                diags.push(loc.key(key).error(out_of_range(
                    format_int(value),
                    "a 32-bit signed integer (Xray's int32)",
                )));
                0
            }
        }
    };
    let idle_timeout = int32("idle_timeout", g.idle_timeout);
    let health_check_timeout = int32("health_check_timeout", g.health_check_timeout);
    let initial_windows_size = int32("initial_windows_size", g.initial_windows_size);
    let service_name = g.service_name.unwrap_or_default();
    if service_name
        .bytes()
        .any(|b| b.is_ascii_control() || b == b' ')
    {
        // Escaped, they would still be a path no one configures on purpose; Xray accepts
        // them, so this only warns.
        diags.push(
            loc.key("serviceName")
                .warning("serviceName contains spaces or control characters (sent %-escaped)"),
        );
    }
    (error_count(diags) == before).then_some(GrpcPlan {
        service_name,
        authority: g.authority.filter(|a| !a.is_empty()),
        multi_mode: g.multi_mode.unwrap_or(false),
        idle_timeout,
        health_check_timeout,
        permit_without_stream: g.permit_without_stream.unwrap_or(false),
        initial_windows_size,
        user_agent: g.user_agent.unwrap_or_default(),
    })
}

fn format_int(value: Int) -> String {
    match value {
        Int::Exact(v) => v.to_string(),
        Int::Huge(f) => format!("{f:e}"),
    }
}

#[cfg(test)]
mod tests {
    use crate::{GrpcPlan, Source, StreamNetwork, load_sources};

    /// The plan of an outbound with these `grpcSettings`, or every diagnostic as
    /// `path: message`.
    fn outbound(settings: &str) -> Result<GrpcPlan, String> {
        let text = format!(
            r#"{{"outbounds":[{{"protocol":"vless","settings":{{"vnext":[{{"address":"127.0.0.1","port":1,"users":[{{"id":"27848739-7e62-4138-9fd3-098a63964b6b","encryption":"none"}}]}}]}},
            "streamSettings":{{"network":"grpc","grpcSettings":{settings}}}}}]}}"#
        );
        let loaded = load_sources(&[Source {
            name: "t.json".into(),
            text,
        }])
        .map_err(|diags| {
            diags
                .iter()
                .map(|d| format!("{}: {}", d.path, d.message))
                .collect::<Vec<_>>()
                .join("; ")
        })?;
        match &loaded.plan.outbounds[0].stream.network {
            StreamNetwork::Grpc(g) => Ok(g.clone()),
            other => Err(format!("{other:?}")),
        }
    }

    #[test]
    fn decodes_xray_keys() {
        let g = outbound(
            r#"{"serviceName":"/a/b|c","multiMode":true,"idle_timeout":60,"health_check_timeout":-5,
            "permit_without_stream":true,"initial_windows_size":65536,"user_agent":"firefox","authority":"x.example"}"#,
        )
        .unwrap();
        assert_eq!(g.service_name, "/a/b|c");
        assert!(g.multi_mode && g.permit_without_stream);
        assert_eq!((g.idle_timeout, g.health_check_timeout), (60, 0));
        assert_eq!(g.initial_windows_size, 65536);
        assert_eq!(g.user_agent, "firefox");
        assert_eq!(g.authority.as_deref(), Some("x.example"));
        let d = outbound("{}").unwrap();
        assert_eq!((d.service_name.as_str(), d.multi_mode), ("", false));
    }

    #[test]
    fn errors_carry_the_path() {
        let e = outbound(r#"{"idle_timeout":4294967296}"#).unwrap_err();
        assert!(
            e.contains("grpcSettings.idle_timeout: 4294967296 is out of range"),
            "{e}"
        );
        let e = outbound(r#"{"multiMode":"yes"}"#).unwrap_err();
        assert!(e.contains("grpcSettings.multiMode"), "{e}");
    }
}
