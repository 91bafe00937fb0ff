//! Projection paths: checked once per query, before any document is read.

use crate::error::{Error, Result};

/// The most paths a projection may name.
pub const MAX_PROJECTION_PATHS: usize = 100;

/// The most fields a sort may name (MongoDB's limit too).
pub const MAX_SORT_FIELDS: usize = 32;

/// Refuses a sort of more than [`MAX_SORT_FIELDS`] fields, or one naming a
/// path twice: each kept document holds a copy of every sort value.
pub fn check_sort(sort: &[crate::SortField]) -> Result<()> {
    if sort.len() > MAX_SORT_FIELDS {
        return Err(Error::InvalidQuery {
            reason: format!("{} sort fields, at most {MAX_SORT_FIELDS}", sort.len()),
        });
    }
    for (i, field) in sort.iter().enumerate() {
        if sort[..i].iter().any(|f| f.path.as_str() == field.path.as_str()) {
            return Err(Error::InvalidQuery {
                reason: format!("sort field {:?} named twice", field.path.as_str()),
            });
        }
    }
    Ok(())
}

/// Checks every projection path: dot-separated field names, none empty (so
/// no leading, trailing or doubled dot) and none starting with `$` (an
/// operator, which projections do not take). A bad path is an
/// [`Error::InvalidQuery`] naming it, where it used to match nothing; so
/// is a projection of more than [`MAX_PROJECTION_PATHS`] paths.
pub fn check_projection(paths: Option<&[String]>) -> Result<()> {
    let paths = paths.unwrap_or_default();
    // Each document's projection compares its paths pairwise (about 10^4
    // comparisons a document at 100 paths, 10^6 at 1,000): bounded, so that
    // no request pins a core for hours on a large collection.
    if paths.len() > MAX_PROJECTION_PATHS {
        return Err(Error::InvalidQuery {
            reason: format!("{} projection paths, at most {MAX_PROJECTION_PATHS}", paths.len()),
        });
    }
    for path in paths {
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
