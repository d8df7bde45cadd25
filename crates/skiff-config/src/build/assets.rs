//! Where geoip.dat / geosite.dat live, found as Xray finds them: the directory in
//! `SKIFF_LOCATION_ASSET` (skiff's own, checked first), else the one in `xray.location.asset`
//! or `XRAY_LOCATION_ASSET` (in that order), else the executable's directory; then
//! `/usr/local/share/xray`, `/usr/share/xray` and `/opt/share/xray`.

use std::ffi::OsString;
use std::path::{Component, Path, PathBuf};

/// The directories to search, in order. `env` reads an environment variable; `exe_dir` is the
/// running binary's directory.
pub fn asset_dirs(
    env: impl Fn(&str) -> Option<OsString>,
    exe_dir: Option<PathBuf>,
) -> Vec<PathBuf> {
    let mut dirs = Vec::new();
    if let Some(d) = env("SKIFF_LOCATION_ASSET") {
        dirs.push(PathBuf::from(d));
    }
    match env("xray.location.asset").or_else(|| env("XRAY_LOCATION_ASSET")) {
        Some(d) => dirs.push(PathBuf::from(d)),
        None => dirs.extend(exe_dir),
    }
    dirs.extend(
        [
            "/usr/local/share/xray",
            "/usr/share/xray",
            "/opt/share/xray",
        ]
        .map(PathBuf::from),
    );
    dirs
}

/// The process's own search list.
pub fn process_asset_dirs() -> Vec<PathBuf> {
    let exe_dir = std::env::current_exe()
        .ok()
        .and_then(|p| p.parent().map(Path::to_path_buf));
    asset_dirs(|name| std::env::var_os(name), exe_dir)
}

/// The first regular file named `file` in `dirs`. Like Xray, `file` must be a relative path
/// that stays inside the asset directory.
pub fn find_asset(file: &str, dirs: &[PathBuf]) -> Result<PathBuf, String> {
    let local = Path::new(file);
    let is_local = !file.is_empty()
        && local
            .components()
            .all(|c| matches!(c, Component::Normal(_)));
    if !is_local {
        return Err(format!(
            "asset file `{file}` must be a plain relative path inside the asset directory"
        ));
    }
    for dir in dirs {
        let path = dir.join(local);
        if path.is_file() {
            return Ok(path);
        }
    }
    let searched: Vec<String> = dirs.iter().map(|d| d.display().to_string()).collect();
    Err(format!(
        "cannot find `{file}` (searched {}; set SKIFF_LOCATION_ASSET or XRAY_LOCATION_ASSET to its directory)",
        searched.join(", ")
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn order_as_xray_with_skiff_first() {
        let env = |vars: &'static [(&'static str, &'static str)]| {
            move |name: &str| {
                vars.iter()
                    .find(|(k, _)| *k == name)
                    .map(|(_, v)| OsString::from(v))
            }
        };
        let exe = Some(PathBuf::from("/opt/skiff/bin"));
        let tail = [
            "/usr/local/share/xray",
            "/usr/share/xray",
            "/opt/share/xray",
        ]
        .map(PathBuf::from);
        let dirs = asset_dirs(env(&[]), exe.clone());
        assert_eq!(dirs[0], PathBuf::from("/opt/skiff/bin"));
        assert_eq!(dirs[1..], tail);
        let dirs = asset_dirs(
            env(&[
                ("XRAY_LOCATION_ASSET", "/b"),
                ("xray.location.asset", "/a"),
                ("SKIFF_LOCATION_ASSET", "/s"),
            ]),
            exe.clone(),
        );
        assert_eq!(dirs[..2], [PathBuf::from("/s"), PathBuf::from("/a")]);
        assert_eq!(dirs[2..], tail);
        let dirs = asset_dirs(env(&[("XRAY_LOCATION_ASSET", "/b")]), exe);
        assert_eq!(dirs[0], PathBuf::from("/b"));
    }

    #[test]
    fn finds_the_first_and_refuses_escapes() {
        let base = std::env::temp_dir().join(format!("skiff-assets-{}", std::process::id()));
        let (a, b) = (base.join("a"), base.join("b"));
        std::fs::create_dir_all(&a).unwrap();
        std::fs::create_dir_all(&b).unwrap();
        std::fs::write(b.join("geoip.dat"), b"").unwrap();
        std::fs::create_dir_all(a.join("geosite.dat")).unwrap(); // a directory: skipped
        std::fs::write(b.join("geosite.dat"), b"").unwrap();
        let dirs = [a.clone(), b.clone()];
        assert_eq!(find_asset("geoip.dat", &dirs), Ok(b.join("geoip.dat")));
        assert_eq!(find_asset("geosite.dat", &dirs), Ok(b.join("geosite.dat")));
        let missing = find_asset("nope.dat", &dirs).unwrap_err();
        assert!(missing.contains("`nope.dat`") && missing.contains(&a.display().to_string()));
        for bad in ["../geoip.dat", "/etc/passwd", ""] {
            assert!(
                find_asset(bad, &dirs)
                    .unwrap_err()
                    .contains("relative path"),
                "{bad}"
            );
        }
        std::fs::remove_dir_all(&base).unwrap();
    }
}
