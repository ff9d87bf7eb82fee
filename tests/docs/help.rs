//! Reading what the binary prints for `--help` (clap's long help).

use std::collections::BTreeMap;
use std::process::Command;

/// A flag as `--help` prints it.
#[derive(Debug, PartialEq)]
pub(crate) struct Flag {
    /// `[env: NAME=]`.
    pub(crate) env: Option<String>,
    /// `[default: VALUE]`.
    pub(crate) default: Option<String>,
    /// It takes a value (`--workers <WORKERS>`), as opposed to a switch (`--leader-elect`).
    pub(crate) takes_value: bool,
}

/// Runs the binary with `args` in an empty environment (clap prints the value of a set
/// environment variable in `[env: NAME=value]`) and returns what it printed.
fn binary(args: &[&str]) -> String {
    let output = Command::new(env!("CARGO_BIN_EXE_database-operator"))
        .args(args)
        .env_clear()
        .output()
        .expect("run database-operator");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "database-operator {}: {stderr}", args.join(" "));
    String::from_utf8(output.stdout).expect("help is UTF-8")
}

/// The long flags of `database-operator <args> --help`, but clap's own `--help` and `--version`.
///
/// clap's long help prints each flag on a line indented by at most 6 spaces (`  -h, --help`,
/// `      --workers <WORKERS>`), then its description and its `[env: ...]` and `[default: ...]`
/// lines indented by 10.
pub(crate) fn flags(args: &[&str]) -> BTreeMap<String, Flag> {
    let mut command: Vec<&str> = args.to_vec();
    command.push("--help");
    let help = binary(&command);
    let mut flags = BTreeMap::new();
    let mut current: Option<(String, Flag)> = None;
    for line in help.lines() {
        let indent = line.len() - line.trim_start().len();
        let trimmed = line.trim();
        if indent <= 6 && trimmed.starts_with('-') {
            flags.extend(current.take());
            let long = trimmed.split_whitespace().find(|word| word.starts_with("--")).expect("a long flag");
            let flag = Flag { env: None, default: None, takes_value: trimmed.contains('<') };
            current = Some((long.trim_end_matches(',').to_string(), flag));
        } else if let Some((_, flag)) = current.as_mut() {
            let attribute = |prefix: &str| Some(trimmed.strip_prefix(prefix)?.strip_suffix(']')?.to_string());
            if let Some(env) = attribute("[env: ") {
                flag.env = Some(env.split('=').next().unwrap().to_string());
            } else if let Some(default) = attribute("[default: ") {
                flag.default = Some(default);
            }
        }
    }
    flags.extend(current);
    flags.remove("--help");
    flags.remove("--version");
    flags
}

/// The subcommands `database-operator --help` lists under "Commands:", but clap's `help`.
pub(crate) fn subcommands() -> Vec<String> {
    let help = binary(&["--help"]);
    let commands = help.split("\nCommands:\n").nth(1).expect("--help lists the subcommands");
    commands
        .lines()
        .take_while(|line| !line.trim().is_empty())
        .filter_map(|line| line.split_whitespace().next())
        .filter(|name| *name != "help")
        .map(str::to_string)
        .collect()
}
