//! Helpers for the CRD schemas generated from the resources' Rust types (the Database's and the
//! DatabaseBackup's).

use serde_json::Value;

/// A schemars transform that turns doc-comment descriptions into what `kubectl explain` shows
/// well, in this schema and all its subschemas.
///
/// schemars keeps a doc comment's line breaks, and `kubectl explain` prints them and wraps at 80
/// columns as well, so a sentence wrapped at 100 columns in the source comes out broken in two
/// odd places. This joins the lines of each paragraph with a space and keeps what is meant to
/// stand on its own line: blank lines (paragraph breaks) and list items (`- ...`).
pub fn rewrap_descriptions(schema: &mut schemars::Schema) {
    if let Some(Value::String(description)) = schema.get_mut("description") {
        *description = rewrap(description);
    }
    schemars::transform::transform_subschemas(&mut rewrap_descriptions, schema);
}

/// Joins the lines of each paragraph of `text`; see [`rewrap_descriptions`].
fn rewrap(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut paragraph_break = false;
    for line in text.lines().map(str::trim) {
        if line.is_empty() {
            paragraph_break = !out.is_empty();
            continue;
        }
        if paragraph_break {
            out.push_str("\n\n");
        } else if line.starts_with("- ") {
            if !out.is_empty() {
                out.push('\n');
            }
        } else if !out.is_empty() {
            out.push(' ');
        }
        paragraph_break = false;
        out.push_str(line);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rewrap_joins_wrapped_lines_and_keeps_list_items_and_paragraphs() {
        let text = "One sentence\nwrapped. One of:\n- a: the\n  first.\n- b.\n\nNext\nparagraph.\n";
        assert_eq!(rewrap(text), "One sentence wrapped. One of:\n- a: the first.\n- b.\n\nNext paragraph.");
        assert_eq!(rewrap("single line"), "single line");
    }
}
