//! The user's folders: the home folder (`~`) and `$CMDC_HOME`. The one rule for everything that
//! reads user files (discovery, the trust list, MCP configs, caches), here and, through
//! `home_check`, in `CMDC.Tool.Home`.
//!
//! Both must be absolute. A relative or empty one would be read relative to whatever folder the
//! agent runs in, so a cloned repository's `trusted.json`, `mcp.json`, tools and plugins would
//! become the user's own: it is refused with a reason and not used (the default `~/.cmdc` still
//! applies when only `$CMDC_HOME` is refused). `$CMDC_HOME` may be written `~` or `~/…`.

use std::path::{Path, PathBuf};

use crate::fs::expand;

/// The home folder, or why it is not used (unset, empty, relative).
pub fn user_home(raw: Option<&str>) -> Result<PathBuf, String> {
    match raw {
        Some(text) if Path::new(text).is_absolute() => {
            Ok(expand(text, Path::new("/"), Path::new("/")))
        }
        _ => Err(format!(
            "the home folder is {}, not an absolute path: user folders, plugins, the trust list \
             and user MCP configs are not read (set HOME to an absolute path)",
            quoted(raw)
        )),
    }
}

/// `$CMDC_HOME` as an absolute path: `Ok(None)` when unset, an error when it is neither absolute
/// nor `~`/`~/…` under an absolute home folder.
pub fn cmdc_home(raw: Option<&str>, home: &Path) -> Result<Option<PathBuf>, String> {
    let Some(text) = raw else {
        return Ok(None);
    };
    let tilde = text == "~" || text.starts_with("~/");
    if Path::new(text).is_absolute() || (tilde && home.is_absolute()) {
        return Ok(Some(expand(text, Path::new("/"), home)));
    }
    Err(format!(
        "CMDC_HOME is {}, not an absolute path: ignored (a relative one would be read from the \
         project folder, making a repository's files the user's). Set it to an absolute path or \
         unset it",
        quoted(raw)
    ))
}

/// The user's cmdc folders, most specific first: `$CMDC_HOME` (when usable) and `~/.cmdc`
/// (when the home folder is absolute). The first is where the user's files are written.
pub fn cmdc_dirs(raw: Option<&str>, home: &Path) -> Vec<PathBuf> {
    let mut dirs = Vec::new();
    if let Ok(Some(dir)) = cmdc_home(raw, home) {
        dirs.push(dir);
    }
    let default = home.join(".cmdc");
    if home.is_absolute() && !dirs.contains(&default) {
        dirs.push(default);
    }
    dirs
}

/// A value as a JSON string literal (`"x"`), or `nil` when unset, for messages.
fn quoted(raw: Option<&str>) -> String {
    match raw {
        Some(text) => serde_json::Value::String(text.to_string()).to_string(),
        None => "unset".to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const HOME: &str = "/home/u";

    #[test]
    fn cmdc_home_is_unset_absolute_tilde_or_refused() {
        let home = Path::new(HOME);
        assert_eq!(cmdc_home(None, home), Ok(None));
        assert_eq!(cmdc_home(Some("/opt/c"), home), Ok(Some("/opt/c".into())));
        assert_eq!(
            cmdc_home(Some("/opt/c/../d/."), home),
            Ok(Some("/opt/d".into()))
        );
        assert_eq!(cmdc_home(Some("~"), home), Ok(Some(HOME.into())));
        assert_eq!(cmdc_home(Some("~/c"), home), Ok(Some("/home/u/c".into())));
        for bad in ["", ".cmdc", "cmdc/x", "~user/x"] {
            let reason = cmdc_home(Some(bad), home).unwrap_err();
            assert!(reason.starts_with("CMDC_HOME is \""), "{reason}");
        }
        assert!(cmdc_home(Some("~/c"), Path::new("rel")).is_err());
    }

    #[test]
    fn the_home_folder_must_be_absolute() {
        assert_eq!(user_home(Some("/home/u/")), Ok(HOME.into()));
        for bad in [None, Some(""), Some("home")] {
            assert!(user_home(bad).unwrap_err().contains("not an absolute path"));
        }
    }

    #[test]
    fn cmdc_dirs_put_a_usable_cmdc_home_first() {
        let home = Path::new(HOME);
        let dirs = |raw| cmdc_dirs(raw, home);
        assert_eq!(dirs(None), vec![PathBuf::from("/home/u/.cmdc")]);
        assert_eq!(dirs(Some(".cmdc")), vec![PathBuf::from("/home/u/.cmdc")]);
        assert_eq!(
            dirs(Some("/c")),
            vec![PathBuf::from("/c"), "/home/u/.cmdc".into()]
        );
        assert_eq!(dirs(Some("~/.cmdc")), vec![PathBuf::from("/home/u/.cmdc")]);
        assert!(cmdc_dirs(Some(".cmdc"), Path::new("rel")).is_empty());
    }
}
