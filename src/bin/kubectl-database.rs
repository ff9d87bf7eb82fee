//! `kubectl-database`: the kubectl plugin (`kubectl database ...`). Copied onto PATH, kubectl
//! finds it by its name. The verbs are `database_operator::plugin`.

use std::process::ExitCode;

use clap::Parser;
use database_operator::plugin;

fn main() -> ExitCode {
    plugin::run(plugin::Cli::parse())
}
