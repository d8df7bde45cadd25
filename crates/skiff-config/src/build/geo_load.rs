//! Loading the geoip/geosite lists a config names while it is built, so `skiff check` reports
//! a missing file or code. Each file is read once into a buffer, only the named entries are
//! decoded (see skiff-geodata), and the buffers are dropped with the loader when routing is
//! built: only the matchers stay.

use std::collections::HashMap;
use std::net::IpAddr;
use std::path::PathBuf;

use skiff_geodata::ip::decode_ip;
use skiff_geodata::site::decode_site;
use skiff_geodata::{Domain, GeoError, find_entries};

use super::assets::find_asset;

pub struct GeoLoader {
    dirs: Vec<PathBuf>,
    files: HashMap<String, Result<(PathBuf, Vec<u8>), String>>,
}

impl GeoLoader {
    pub fn new(dirs: Vec<PathBuf>) -> GeoLoader {
        GeoLoader {
            dirs,
            files: HashMap::new(),
        }
    }

    /// The entry `code` of asset `file`, handed to `decode`; errors name the file and code.
    fn entry<T>(
        &mut self,
        file: &str,
        code: &str,
        decode: impl FnOnce(&[u8]) -> Result<T, String>,
    ) -> Result<T, String> {
        let dirs = &self.dirs;
        let loaded = self.files.entry(file.to_owned()).or_insert_with(|| {
            let path = find_asset(file, dirs)?;
            std::fs::read(&path)
                .map(|bytes| (path.clone(), bytes))
                .map_err(|e| format!("cannot read `{}`: {e}", path.display()))
        });
        let (path, bytes) = loaded.as_ref().map_err(Clone::clone)?;
        let shown = path.display();
        match find_entries(bytes, &[code]) {
            Ok(entries) => {
                decode(entries[0]).map_err(|e| format!("`{file}` ({shown}), list `{code}`: {e}"))
            }
            Err(GeoError::NoCode(_)) => {
                Err(format!("`{file}` ({shown}) has no list with code `{code}`"))
            }
            Err(e) => Err(format!("`{file}` ({shown}): {e}")),
        }
    }

    /// The domains of geosite list `code` having every attribute in `attrs`.
    pub fn site(
        &mut self,
        file: &str,
        code: &str,
        attrs: &[String],
    ) -> Result<Vec<Domain>, String> {
        let attrs: Vec<&str> = attrs.iter().map(String::as_str).collect();
        self.entry(file, code, |e| {
            decode_site(e, &attrs).map_err(|e| e.to_string())
        })
    }

    /// The CIDRs of geoip list `code`.
    pub fn ip(&mut self, file: &str, code: &str) -> Result<Vec<(IpAddr, u8)>, String> {
        self.entry(file, code, |e| decode_ip(e).map_err(|e| e.to_string()))
    }
}
