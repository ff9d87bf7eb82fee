//! Reading Markdown as the docs write it: sections, tables, code, links. Enough for our own
//! docs (GitHub's flavour, tables with a leading `|`), not a general parser.

/// The text under the heading line `heading` (e.g. "## Flags") up to the next heading of the
/// same level or above; a `#` line in a fenced code block (a shell comment) is not a heading.
pub(crate) fn section<'a>(markdown: &'a str, heading: &str, document: &str) -> &'a str {
    let level = heading.chars().take_while(|&c| c == '#').count();
    let mut start = None;
    let mut in_fence = false;
    let mut offset = 0;
    for line in markdown.split_inclusive('\n') {
        let at = offset;
        offset += line.len();
        if line.trim_start().starts_with("```") {
            in_fence = !in_fence;
        }
        if in_fence {
            continue;
        }
        let hashes = line.chars().take_while(|&c| c == '#').count();
        let is_heading = hashes > 0 && line[hashes..].starts_with(' ');
        match start {
            None if line.trim_end() == heading => start = Some(offset),
            Some(start) if is_heading && hashes <= level => return &markdown[start..at],
            _ => {}
        }
    }
    let start = start.unwrap_or_else(|| panic!("{document} has no section \"{heading}\""));
    &markdown[start..]
}

/// A table: its header cells and its rows of cells, trimmed.
pub(crate) type Table = (Vec<String>, Vec<Vec<String>>);

/// The tables in `text`.
pub(crate) fn tables(text: &str) -> Vec<Table> {
    let cells = |line: &str| -> Vec<String> {
        let inner = line.trim().trim_start_matches('|').trim_end_matches('|');
        inner.split('|').map(|cell| cell.trim().to_string()).collect()
    };
    let is_row = |line: &str| line.trim_start().starts_with('|');
    let is_separator = |line: &str| line.trim().starts_with("|-") || line.trim().starts_with("|:-");
    let mut found = Vec::new();
    let mut lines = text.lines().peekable();
    while let Some(line) = lines.next() {
        if !is_row(line) || !lines.peek().is_some_and(|next| is_separator(next)) {
            continue;
        }
        lines.next();
        let mut rows = Vec::new();
        while let Some(row) = lines.next_if(|line| is_row(line)) {
            rows.push(cells(row));
        }
        found.push((cells(line), rows));
    }
    found
}

/// The rows of the one table in `text` whose header starts with `columns`; each row has at
/// least that many cells.
pub(crate) fn table(text: &str, columns: &[&str], where_: &str) -> Vec<Vec<String>> {
    let starts_with_columns = |(header, _): &Table| {
        header.len() >= columns.len() && header.iter().zip(columns).all(|(cell, column)| cell == column)
    };
    let mut matching = tables(text).into_iter().filter(starts_with_columns);
    let (_, rows) = matching.next().unwrap_or_else(|| panic!("{where_} has no table with the columns {columns:?}"));
    assert!(matching.next().is_none(), "{where_} has two tables with the columns {columns:?}");
    for row in &rows {
        assert!(row.len() >= columns.len(), "{where_}: a row with fewer cells than {columns:?}: {row:?}");
    }
    rows
}

/// The inline code spans of `text`, and the lines of its fenced code blocks.
pub(crate) fn code(text: &str) -> (Vec<&str>, Vec<&str>) {
    let (mut spans, mut fenced) = (Vec::new(), Vec::new());
    let mut in_fence = false;
    for line in text.lines() {
        if line.trim_start().starts_with("```") {
            in_fence = !in_fence;
        } else if in_fence {
            fenced.push(line);
        } else {
            spans.extend(line.split('`').skip(1).step_by(2));
        }
    }
    (spans, fenced)
}

/// The contents of the inline code spans (`...`) of `text`, fenced code blocks left out.
pub(crate) fn code_spans(text: &str) -> Vec<&str> {
    code(text).0
}

/// The text of a cell that is one code span, without its backticks.
pub(crate) fn unquoted(cell: &str) -> Option<&str> {
    cell.strip_prefix('`')?.strip_suffix('`').filter(|inner| !inner.contains('`'))
}

/// The targets of the relative links `[...](target)` in `text`, without their `#anchor`.
pub(crate) fn relative_links(text: &str) -> Vec<&str> {
    text.match_indices("](")
        .filter_map(|(at, _)| {
            let rest = &text[at + 2..];
            let target = &rest[..rest.find(')')?];
            let path = target.split('#').next().unwrap();
            let external = target.contains("://") || target.starts_with("mailto:");
            (!external && !path.is_empty()).then_some(path)
        })
        .collect()
}
