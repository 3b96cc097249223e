//! The script languages, and which one a file is. Adding a language: its file beside
//! `python.rs`, and a row here.

use std::ffi::OsStr;
use std::path::Path;

use super::language::Language;
use super::powershell::PowerShell;
use super::python::Python;
use crate::error::{Error, Result};

/// Every language, in the order messages name them.
pub static ALL: &[&dyn Language] = &[&Python, &PowerShell];

/// The language of a script by its extension, or an error naming the supported ones.
pub fn of(path: &Path) -> Result<&'static dyn Language> {
    let ext = path
        .extension()
        .and_then(OsStr::to_str)
        .map(str::to_ascii_lowercase);
    if let Some(ext) = ext.as_deref() {
        if let Some(found) = ALL.iter().find(|l| l.extensions().contains(&ext)) {
            return Ok(*found);
        }
    }
    let expected: Vec<String> = ALL
        .iter()
        .flat_map(|l| l.extensions().iter().map(|e| format!(".{e}")))
        .collect();
    Err(Error::Invalid(format!(
        "{} is not a script tool: expected a {} file",
        path.display(),
        expected.join(" or ")
    )))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kinds() {
        assert_eq!(of(Path::new("a/b.py")).unwrap().name(), "python");
        assert_eq!(of(Path::new("a/b.PS1")).unwrap().name(), "powershell");
        let Err(err) = of(Path::new("a/b.rb")) else {
            panic!("a .rb file is no script tool")
        };
        assert!(
            matches!(&err, Error::Invalid(m) if m.contains(".py or .ps1")),
            "{err:?}"
        );
    }
}
