//! The command line of `kubectl database`: one subcommand a verb, each with its own `--help`
//! and examples, and kubectl's connection flags, global (before or after the verb).

use std::ffi::OsString;
use std::time::Duration;

use clap::{Args, Parser, Subcommand, ValueEnum};

use crate::api::Size;

/// The version `--version` prints: the crate's version and the git revision it was built from.
const VERSION: &str = concat!(env!("CARGO_PKG_VERSION"), " (", env!("GIT_REVISION"), ")");

/// Back up, restore, list backups, open a client shell and explain the state of Databases
/// (example.com/v1) managed by database-operator.
#[derive(Debug, Parser)]
#[command(name = "kubectl-database", bin_name = "kubectl database", version = VERSION)]
#[command(after_help = "Examples:
  kubectl database backup orders --verify --wait
  kubectl database backups orders
  kubectl database restore orders-20250101020000 --to orders-copy --wait
  kubectl database shell orders
  kubectl database switchover orders --wait
  kubectl database why orders")]
pub struct Cli {
    /// The verb.
    #[command(subcommand)]
    pub verb: Verb,

    /// The namespace of the Database. Default: the kubeconfig context's namespace, else
    /// "default".
    #[arg(short = 'n', long, global = true)]
    pub namespace: Option<String>,

    /// Path to the kubeconfig file(s), separated by ':' as in KUBECONFIG. Default: KUBECONFIG,
    /// else ~/.kube/config.
    #[arg(long, env = "KUBECONFIG", global = true, hide_env_values = true)]
    pub kubeconfig: Option<OsString>,

    /// The kubeconfig context to use. Default: its current context.
    #[arg(long, global = true)]
    pub context: Option<String>,
}

/// The verbs.
#[derive(Debug, Subcommand)]
pub enum Verb {
    /// Take a backup of a Database now: create a DatabaseBackup.
    #[command(after_help = "Examples:
  # A backup named orders-<UTC time>, like the scheduled ones; returns once it is created
  kubectl database backup orders

  # Wait until it is Completed and verified (restored into a throwaway Database and counted)
  kubectl database backup orders --verify --wait

  # Into the same bucket as an earlier backup, under a name of your own
  kubectl database backup orders --name before-migration --bucket-from orders-20250101020000 --wait")]
    Backup(BackupArgs),

    /// Restore a backup into a new Database.
    #[command(after_help = "Examples:
  # A new Database like the backup's (engine, image, size, volume), restored from it
  kubectl database restore orders-20250101020000 --to orders-copy --wait

  # With another image of the same engine
  kubectl database restore nightly --to orders-18 --image postgres:18 --wait")]
    Restore(RestoreArgs),

    /// List a Database's backups, newest first, with their verification.
    #[command(after_help = "Examples:
  kubectl database backups orders
  kubectl database backups orders -n shop -o yaml")]
    Backups(BackupsArgs),

    /// Open the engine's client (psql, mysql, mariadb, redis-cli) in a Database's pod, logged in
    /// with its credentials.
    #[command(after_help = "The client runs in the database container (kubectl exec), with the password the
container has from the Database's Secret: it is never printed nor on a command line.
Arguments after -- go to the client.

Examples:
  kubectl database shell orders
  kubectl database shell orders -- -c 'select count(*) from lines'
  echo 'select 1;' | kubectl database shell orders")]
    Shell(ShellArgs),

    /// Explain a Database's state: why it is not Ready, its conditions, pods, backups and
    /// recent Warning events.
    #[command(visible_alias = "status")]
    #[command(after_help = "Examples:
  kubectl database why orders
  kubectl database status orders -n shop")]
    Why(WhyArgs),

    /// Make a replica the primary of a Database of several instances (a planned switchover):
    /// the old primary shuts down first, handing the replicas the last of its WAL.
    #[command(after_help = "Examples:
  # To the ready replica least behind, and wait until it is the primary
  kubectl database switchover orders --wait

  # To a given instance
  kubectl database switchover orders --to orders-instance-3")]
    Switchover(SwitchoverArgs),
}

/// The arguments of `backup`.
#[derive(Debug, Args)]
pub struct BackupArgs {
    /// The Database to back up.
    pub database: String,

    /// The DatabaseBackup's name. Default: <database>-<UTC time, YYYYMMDDhhmmss>, as the
    /// scheduled backups are named.
    #[arg(long)]
    pub name: Option<String>,

    /// Verify the backup once it Completes: restore it into a throwaway Database and count its
    /// rows or keys (spec.verify).
    #[arg(long)]
    pub verify: bool,

    /// Keep the dump in the bucket of this DatabaseBackup (its spec.bucket) instead of a claim.
    #[arg(long, value_name = "BACKUP")]
    pub bucket_from: Option<String>,

    /// Wait until the backup is Completed (and verified, with --verify), printing its progress.
    #[arg(long)]
    pub wait: bool,

    /// How long --wait waits.
    #[arg(long, default_value = "15m", value_parser = humantime::parse_duration)]
    pub timeout: Duration,
}

/// The arguments of `restore`.
#[derive(Debug, Args)]
pub struct RestoreArgs {
    /// The DatabaseBackup to restore.
    pub backup: String,

    /// The name of the new Database (it must not exist).
    #[arg(long = "to", value_name = "DATABASE")]
    pub to: String,

    /// The new Database's image. Default: the backed-up Database's image, else the image the
    /// dump ran with.
    #[arg(long)]
    pub image: Option<String>,

    /// The new Database's size: small, medium or large. Default: the backed-up Database's,
    /// else small.
    #[arg(long, value_parser = parse_size)]
    pub size: Option<Size>,

    /// Wait until the new Database is Ready, printing its progress.
    #[arg(long)]
    pub wait: bool,

    /// How long --wait waits.
    #[arg(long, default_value = "15m", value_parser = humantime::parse_duration)]
    pub timeout: Duration,
}

/// The arguments of `backups`.
#[derive(Debug, Args)]
pub struct BackupsArgs {
    /// The Database whose backups to list.
    pub database: String,

    /// The output format: a table (the default), json or yaml (the DatabaseBackups, as a List).
    #[arg(short = 'o', long, value_enum, default_value_t = Output::Table)]
    pub output: Output,
}

/// The output formats of a listing.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Output {
    /// Columns, for people.
    Table,
    /// The objects as JSON.
    Json,
    /// The objects as YAML.
    Yaml,
}

/// The arguments of `shell`.
#[derive(Debug, Args)]
pub struct ShellArgs {
    /// The Database to open a client in.
    pub database: String,

    /// Arguments for the client, after --.
    #[arg(last = true, value_name = "CLIENT_ARGS")]
    pub client_args: Vec<String>,
}

/// The arguments of `why`.
#[derive(Debug, Args)]
pub struct WhyArgs {
    /// The Database to explain.
    pub database: String,

    /// How many recent Warning events to show.
    #[arg(long, default_value_t = 10)]
    pub events: usize,
}

/// The arguments of `switchover`.
#[derive(Debug, Args)]
pub struct SwitchoverArgs {
    /// The Database whose primary changes.
    pub database: String,

    /// The instance to make the primary (a ready replica). Default: the ready replica least
    /// behind.
    #[arg(long = "to", value_name = "INSTANCE")]
    pub to: Option<String>,

    /// Wait until the new primary is Ready, printing its progress.
    #[arg(long)]
    pub wait: bool,

    /// How long --wait waits.
    #[arg(long, default_value = "5m", value_parser = humantime::parse_duration)]
    pub timeout: Duration,
}

fn parse_size(value: &str) -> Result<Size, String> {
    Size::ALL.into_iter().find(|size| size.as_str() == value).ok_or_else(|| "one of small, medium, large".to_string())
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::CommandFactory;

    fn parse(args: &[&str]) -> Cli {
        Cli::try_parse_from(std::iter::once("kubectl-database").chain(args.iter().copied()))
            .unwrap_or_else(|err| panic!("{args:?}: {err}"))
    }

    #[test]
    fn the_command_line_is_consistent() {
        Cli::command().debug_assert();
    }

    #[test]
    fn backup_takes_its_flags_and_the_connection_flags_on_either_side_of_the_verb() {
        let cli =
            parse(&["-n", "shop", "backup", "orders", "--verify", "--wait", "--context", "dev", "--timeout", "2m"]);
        assert_eq!(cli.namespace.as_deref(), Some("shop"));
        assert_eq!(cli.context.as_deref(), Some("dev"));
        let Verb::Backup(args) = cli.verb else { panic!("not backup: {:?}", cli.verb) };
        assert_eq!(args.database, "orders");
        assert!(args.verify && args.wait && args.name.is_none());
        assert_eq!(args.timeout, Duration::from_secs(120));
    }

    #[test]
    fn restore_needs_a_target_and_reads_a_size() {
        let cli = parse(&["restore", "nightly", "--to", "copy", "--size", "medium"]);
        let Verb::Restore(args) = cli.verb else { panic!() };
        assert_eq!((args.backup.as_str(), args.to.as_str(), args.size), ("nightly", "copy", Some(Size::Medium)));
        assert!(Cli::try_parse_from(["kubectl-database", "restore", "nightly"]).is_err());
        assert!(Cli::try_parse_from(["kubectl-database", "restore", "n", "--to", "c", "--size", "huge"]).is_err());
    }

    #[test]
    fn shell_passes_what_follows_the_double_dash_to_the_client() {
        let cli = parse(&["shell", "orders", "--namespace", "shop", "--", "-c", "select 1"]);
        let Verb::Shell(args) = cli.verb else { panic!() };
        assert_eq!(args.client_args, ["-c", "select 1"]);
        assert_eq!(cli.namespace.as_deref(), Some("shop"));
    }

    #[test]
    fn backups_prints_a_table_unless_told_json_or_yaml_and_status_is_why() {
        let Verb::Backups(args) = parse(&["backups", "orders"]).verb else { panic!() };
        assert_eq!(args.output, Output::Table);
        let Verb::Backups(args) = parse(&["backups", "orders", "-o", "yaml"]).verb else { panic!() };
        assert_eq!(args.output, Output::Yaml);
        assert!(matches!(parse(&["status", "orders"]).verb, Verb::Why(_)));
    }

    #[test]
    fn every_verb_has_help_with_examples_that_use_it() {
        let mut command = Cli::command();
        command.build();
        for verb in command.get_subcommands().filter(|verb| verb.get_name() != "help") {
            let name = verb.get_name();
            let examples = verb.get_after_help().map(|h| h.to_string()).unwrap_or_default();
            assert!(examples.contains(&format!("kubectl database {name} ")), "{name}: {examples}");
            assert!(verb.get_about().is_some(), "{name} has no description");
        }
    }
}
