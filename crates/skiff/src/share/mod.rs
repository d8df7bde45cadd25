//! `skiff share`: the links (and QR codes, and client configs) that let a client reach the
//! users of a config's inbounds.

mod client_config;
mod endpoint;
mod link;
mod qr;

pub use endpoint::Selection;

use skiff_config::Plan;

/// How `skiff share` prints.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, clap::ValueEnum)]
pub enum Format {
    /// Each link, then its QR code.
    #[default]
    Text,
    /// Only the links, one per line (for scripts).
    Links,
    /// A ready client config (Xray's JSON) for the one endpoint selected.
    Json,
}

/// What `skiff share` prints for the selection, with a note for each inbound it left out
/// (for stderr), or why it cannot.
pub fn render(
    plan: &Plan,
    selection: &Selection,
    format: Format,
) -> Result<(String, Vec<String>), String> {
    let (endpoints, skipped) = endpoint::endpoints(plan, selection)?;
    let mut out = String::new();
    match format {
        Format::Links => {
            for e in &endpoints {
                out.push_str(&link::link(e));
                out.push('\n');
            }
        }
        Format::Text => {
            for e in &endpoints {
                let link = link::link(e);
                out.push_str(&format!("{} (inbound `{}`)\n{link}\n", e.remark(), e.tag));
                out.push_str(&qr::terminal_qr(&link)?);
                out.push('\n');
            }
        }
        Format::Json => {
            let [e] = endpoints.as_slice() else {
                let names: Vec<String> = endpoints
                    .iter()
                    .map(|e| format!("{} (inbound `{}`)", e.remark(), e.tag))
                    .collect();
                return Err(format!(
                    "--format json makes one client config, and {} endpoints match: {}; pick one with --inbound and --user",
                    endpoints.len(),
                    names.join(", ")
                ));
            };
            let config = client_config::client_config(e);
            out = serde_json::to_string_pretty(&config).map_err(|e| e.to_string())?;
            out.push('\n');
        }
    }
    Ok((out, skipped))
}
