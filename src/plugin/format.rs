//! How the plugin writes times, sizes and tables: as kubectl writes them (an age of `5m`, a
//! table of left-aligned columns three spaces apart, `<none>` for nothing).

use k8s_openapi::jiff::Timestamp;

/// What a cell says when there is nothing to say (kubectl writes `<none>`; a dash reads
/// better in a table of numbers).
pub(crate) const NOTHING: &str = "-";

/// The time from `then` to `now`, as kubectl's AGE column writes it: `45s`, `12m`, `5h`, `3d`.
/// A time in the future (clocks apart) is `0s`.
pub(crate) fn age(then: Timestamp, now: Timestamp) -> String {
    let seconds = now.duration_since(then).as_secs().max(0);
    match seconds {
        s if s < 120 => format!("{s}s"),
        s if s < 120 * 60 => format!("{}m", s / 60),
        s if s < 48 * 3600 => format!("{}h", s / 3600),
        s => format!("{}d", s / 86_400),
    }
}

/// A number of bytes in binary units, one decimal: `512B`, `1.5KiB`, `20.0MiB`.
pub(crate) fn bytes(size: i64) -> String {
    const UNITS: [&str; 5] = ["KiB", "MiB", "GiB", "TiB", "PiB"];
    if size < 1024 {
        return format!("{size}B");
    }
    let mut value = size as f64 / 1024.0;
    let mut unit = 0;
    while value >= 1024.0 && unit < UNITS.len() - 1 {
        value /= 1024.0;
        unit += 1;
    }
    format!("{value:.1}{}", UNITS[unit])
}

/// `rows` under `headers`, each column as wide as its widest cell, three spaces apart (as
/// kubectl's printer), the last column unpadded; one line each, ending in a newline.
pub(crate) fn table<const N: usize>(headers: [&str; N], rows: &[[String; N]]) -> String {
    let mut widths = headers.map(str::len);
    for row in rows {
        for (width, cell) in widths.iter_mut().zip(row) {
            *width = (*width).max(cell.chars().count());
        }
    }
    let line = |cells: [&str; N]| {
        let mut line = String::new();
        for (i, cell) in cells.iter().enumerate() {
            if i + 1 == N {
                line.push_str(cell);
            } else {
                line.push_str(&format!("{cell:<width$}   ", width = widths[i]));
            }
        }
        line.trim_end().to_string() + "\n"
    };
    let mut out = line(headers);
    for row in rows {
        out.push_str(&line(std::array::from_fn(|i| row[i].as_str())));
    }
    out
}

/// A single-quoted word for a POSIX shell, when it needs quoting: how a printed command is
/// written so that it can be pasted back.
pub(crate) fn shell_quoted(word: &str) -> String {
    let plain = !word.is_empty() && word.chars().all(|c| c.is_ascii_alphanumeric() || "-_./=:,@%+".contains(c));
    if plain { word.to_string() } else { format!("'{}'", word.replace('\'', r"'\''")) }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(seconds: i64) -> Timestamp {
        Timestamp::from_second(seconds).unwrap()
    }

    #[test]
    fn ages_read_as_kubectl_s() {
        let now = at(1_000_000);
        let ago = |s: i64| age(at(1_000_000 - s), now);
        assert_eq!(
            [ago(0), ago(119), ago(120), ago(7199), ago(7200), ago(172_799), ago(172_800)],
            ["0s", "119s", "2m", "119m", "2h", "47h", "2d"]
        );
        assert_eq!(age(at(1_000_010), now), "0s", "a clock ahead is no negative age");
    }

    #[test]
    fn sizes_are_in_binary_units() {
        assert_eq!([bytes(0), bytes(1023), bytes(1536), bytes(20 * 1024 * 1024)], ["0B", "1023B", "1.5KiB", "20.0MiB"]);
    }

    #[test]
    fn a_table_aligns_its_columns_three_spaces_apart() {
        let rows = [["orders-1".to_string(), "Completed".to_string()], ["b".to_string(), "-".to_string()]];
        assert_eq!(table(["NAME", "PHASE"], &rows), "NAME       PHASE\norders-1   Completed\nb          -\n");
    }

    #[test]
    fn words_are_quoted_only_when_a_shell_would_split_or_expand_them() {
        assert_eq!(shell_quoted("deployment/orders"), "deployment/orders");
        assert_eq!(shell_quoted("select 1"), "'select 1'");
        assert_eq!(shell_quoted(r#"PGPASSWORD="$X" exec psql"#), r#"'PGPASSWORD="$X" exec psql'"#);
        assert_eq!(shell_quoted("it's"), r"'it'\''s'");
        assert_eq!(shell_quoted(""), "''");
    }
}
