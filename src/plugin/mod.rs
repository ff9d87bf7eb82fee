//! `kubectl database`: the kubectl plugin for what users of the operator do by hand, built as
//! the package's second binary (`kubectl-database`, `src/bin/kubectl-database.rs`), installed
//! by copying it onto PATH. One verb a file:
//!
//! | verb | what it does | file |
//! |---|---|---|
//! | `backup DATABASE` | creates a DatabaseBackup now (`--verify`, `--wait`) | `backup.rs` |
//! | `restore BACKUP --to NEW` | creates a new Database restored from a backup (`--wait`) | `restore.rs` |
//! | `backups DATABASE` | lists its backups with their verification, newest first | `list.rs` |
//! | `shell DATABASE` | opens the engine's client in its pod, logged in | `shell.rs` |
//! | `switchover DATABASE` | makes a replica the primary (`--to`, `--wait`) | `switchover.rs` |
//! | `why DATABASE` | explains its state: conditions, pods, backups, Warning events | `why.rs` |
//!
//! What it promises:
//!
//! - **It only asks, creates and names.** It reads what the operator wrote (status,
//!   conditions, events) and creates DatabaseBackups and Databases as a user would with
//!   `kubectl apply`; the one thing it changes is the annotation that names a Database's
//!   primary (`switchover`, what a user would `kubectl annotate`). It never writes a status,
//!   never deletes anything, and decides nothing the operator decides. What it shows is as fresh as one read of the apiserver.
//! - **It never shows a secret.** No verb reads a Secret. `shell` runs the engine's client in
//!   the database container with the password the container already has in its environment
//!   (from the Database's Secret), handed to the client through the variable the client reads
//!   (PGPASSWORD, MYSQL_PWD, REDISCLI_AUTH): the command it runs, which it prints, holds
//!   names of variables, never a value.
//! - **kubectl's conventions.** `-n/--namespace` (default: the kubeconfig context's namespace,
//!   else `default`), `--kubeconfig` (or KUBECONFIG), `--context`; `-o json|yaml` where a verb
//!   lists; errors on stderr in a kubectl user's words and a non-zero exit. `--wait` polls
//!   once a second up to `--timeout`, printing each change once.
//! - **Pure where it can be.** What a verb builds or prints (the backup's name, the restored
//!   Database, the table, the explanation, the exec command) is a function of the objects read
//!   and the time, tested without a cluster; the rest is one read or one create.
//!
//! It stands beside the operator, not on it: it may use the API types, the engines and the
//! names of the objects the operator makes, and nothing imports it (tests/layout.rs).

mod args;
mod backup;
mod error;
mod format;
mod list;
mod restore;
mod run;
mod shell;
mod switchover;
mod target;
mod why;

pub use args::{BackupArgs, BackupsArgs, Cli, Output, RestoreArgs, ShellArgs, SwitchoverArgs, Verb, WhyArgs};
pub use error::Error;
pub use run::run;
