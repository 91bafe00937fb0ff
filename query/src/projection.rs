//! Projection paths: checked once per query, before any document is read.

use crate::error::{Error, Result};

/// Checks every projection path: dot-separated field names, none empty (so
/// no leading, trailing or doubled dot) and none starting with `$` (an
/// operator, which projections do not take). A bad path is an
/// [`Error::InvalidQuery`] naming it, where it used to match nothing.
pub fn check_projection(paths: Option<&[String]>) -> Result<()> {
    for path in paths.unwrap_or_default() {
        let why = if path.is_empty() {
            Some("is empty")
        } else if path.split('.').any(str::is_empty) {
            Some("has an empty field name (a leading, trailing or doubled '.')")
        } else if path.split('.').any(|name| name.starts_with('$')) {
            Some("has a field name starting with '$'")
        } else {
            None
        };
        if let Some(why) = why {
            return Err(Error::InvalidQuery {
                reason: format!("projection path {path:?} {why}"),
            });
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn check(paths: &[&str]) -> Result<()> {
        let paths: Vec<String> = paths.iter().map(|p| (*p).to_owned()).collect();
        check_projection(Some(&paths))
    }

    #[test]
    fn good_paths_pass_and_bad_ones_are_named() {
        assert!(check(&["name", "a.b.c", "_id", "x1"]).is_ok());
        assert!(check_projection(None).is_ok());
        for bad in ["", ".a", "a.", "a..b", "$x", "a.$b"] {
            match check(&["ok", bad]) {
                Err(Error::InvalidQuery { reason }) => {
                    assert!(reason.contains(&format!("{bad:?}")), "{reason}");
                }
                other => panic!("{bad:?}: expected InvalidQuery, got {other:?}"),
            }
        }
    }
}
