//! The kubectl plugin (`kubectl database`, the `kubectl-database` binary) on the real node, run
//! as a user runs it, against the plane of KUBECONFIG: a backup taken now and waited for, the
//! listing that shows it, a restore into a new Database whose rows are read back, a client
//! shell that answers a query (from arguments and from standard input) without the password
//! appearing anywhere, and `why` naming the reason of a Database whose image does not exist.

use std::process::{Output, Stdio};
use std::time::Duration;

use tokio::io::AsyncWriteExt;
use tokio::process::Command;

use database_operator::api::{Database, DatabaseSpec, EngineKind, Size};
use k8s_openapi::api::core::v1::Secret;
use kube_client::api::{Api, PostParams};

use crate::common::{Nodes, Operator, TestNamespace, client, images, install_crd, psql, wait_until};
use crate::data::ready;

/// The plugin's binary, built with the tests.
const PLUGIN: &str = env!("CARGO_BIN_EXE_kubectl-database");

/// Runs the plugin with `args` (and `stdin`, when given); its output, whatever its exit. Async:
/// the operator under test runs on this test's runtime, which a blocking wait would stop.
async fn plugin(args: &[&str], stdin: Option<&str>) -> Output {
    let mut child = Command::new(PLUGIN)
        .args(args)
        .stdin(if stdin.is_some() { Stdio::piped() } else { Stdio::null() })
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run kubectl-database");
    if let Some(input) = stdin {
        child.stdin.take().unwrap().write_all(input.as_bytes()).await.unwrap();
    }
    child.wait_with_output().await.unwrap()
}

/// The plugin's stdout, once it exited 0; panics with both outputs otherwise.
async fn succeeds(args: &[&str], stdin: Option<&str>) -> (String, String) {
    let output = plugin(args, stdin).await;
    let (stdout, stderr) =
        (String::from_utf8_lossy(&output.stdout).into_owned(), String::from_utf8_lossy(&output.stderr).into_owned());
    assert!(
        output.status.success(),
        "kubectl database {args:?}: {}\nstdout:\n{stdout}\nstderr:\n{stderr}",
        output.status
    );
    println!("$ kubectl database {}\n{stdout}{stderr}", args.join(" "));
    (stdout, stderr)
}

#[tokio::test]
async fn the_plugin_backs_up_now_lists_it_restores_it_into_a_new_database_and_opens_a_shell() {
    let client = client().await;
    install_crd(&client).await;
    let ns = TestNamespace::create_restricted(&client, "plugin", Nodes::Real(2)).await;
    let _operator = Operator::start(&client, &ns.name);
    let databases: Api<Database> = Api::namespaced(client.clone(), &ns.name);
    let db =
        Database::new("orders", DatabaseSpec::new(Size::Small, images::POSTGRES).with_engine(EngineKind::Postgres));
    databases.create(&PostParams::default(), &db).await.unwrap();
    ready(&databases, "orders").await;
    psql(
        &ns.name,
        "orders",
        "CREATE TABLE lines (id int PRIMARY KEY); INSERT INTO lines SELECT generate_series(1, 250)",
    );
    let n = ns.name.as_str();

    let (said, _) =
        succeeds(&["backup", "orders", "--name", "first", "--wait", "--timeout", "5m", "-n", n], None).await;
    assert!(said.starts_with("databasebackup.example.com/first created\n"), "{said}");
    assert!(said.trim_end().ends_with("DatabaseBackup first: Completed in claim first, 250 rows or keys"), "{said}");

    let (listed, _) = succeeds(&["backups", "orders", "-n", n], None).await;
    let row = listed.lines().find(|line| line.starts_with("first ")).unwrap_or_else(|| panic!("{listed}"));
    let cells: Vec<&str> = row.split_whitespace().collect();
    assert_eq!(cells[..2], ["first", "Completed"], "{listed}");
    assert!(row.contains("claim/first") && row.contains(" 250 "), "{listed}");
    assert!(listed.starts_with("NAME "), "{listed}");

    let (restored, _) =
        succeeds(&["restore", "first", "--to", "copy", "--wait", "--timeout", "5m", "-n", n], None).await;
    assert!(restored.trim_end().ends_with("Database copy: Ready, restored from first"), "{restored}");
    assert_eq!(psql(n, "copy", "SELECT count(*) FROM lines"), "250");
    let copy = databases.get("copy").await.unwrap();
    assert_eq!((copy.spec.image.as_str(), copy.spec.size), (images::POSTGRES, Size::Small), "like orders");

    // A shell, without a terminal: a query from its arguments, then from standard input.
    let (answer, printed) = succeeds(
        &["shell", "copy", "-n", n, "--", "--no-align", "--tuples-only", "-c", "SELECT count(*) FROM lines"],
        None,
    )
    .await;
    assert_eq!(answer.trim(), "250");
    assert!(printed.contains("exec -i -n ") && printed.contains(r#"PGPASSWORD="$DATABASE_PASSWORD""#), "{printed}");
    let (piped, _) =
        succeeds(&["shell", "orders", "-n", n, "--", "--no-align", "--tuples-only"], Some("SELECT 41 + 1;\n")).await;
    assert_eq!(piped.trim(), "42");
    // The password is in none of what the plugin printed.
    let secret = Api::<Secret>::namespaced(client.clone(), n).get("copy-credentials").await.unwrap();
    let password = String::from_utf8(secret.data.unwrap()["password"].0.clone()).unwrap();
    assert!(password.len() >= 16 && !printed.contains(&password) && !answer.contains(&password));
}

#[tokio::test]
async fn why_names_the_reason_a_database_whose_image_does_not_exist_is_not_ready() {
    let client = client().await;
    install_crd(&client).await;
    let ns = TestNamespace::create_restricted(&client, "plugin-why", Nodes::Real(1)).await;
    let _operator = Operator::start(&client, &ns.name);
    let databases: Api<Database> = Api::namespaced(client.clone(), &ns.name);
    let db = Database::new("broken", DatabaseSpec::new(Size::Small, images::MISSING).with_engine(EngineKind::Postgres));
    databases.create(&PostParams::default(), &db).await.unwrap();
    // The operator looks at the pod once it has not run for its grace (20 s).
    wait_until("the operator to report the image pull", Duration::from_secs(180), || async {
        let db = databases.get("broken").await.ok()?;
        db.status?.conditions.iter().any(|c| c.type_ == "Degraded" && c.reason == "ImagePullBackOff").then_some(())
    })
    .await;

    let (said, _) = succeeds(&["why", "broken", "-n", &ns.name], None).await;
    assert!(said.starts_with(&format!("Database {}/broken: ", ns.name)), "{said}");
    assert!(said.contains("Why it is not Ready: ImagePullBackOff: pod broken-"), "{said}");
    assert!(said.contains(images::MISSING), "{said}");
    assert!(said.contains("container database waiting: "), "the kubelet's reason for the pod: {said}");
    let (status, _) = succeeds(&["status", "broken", "-n", &ns.name], None).await;
    assert!(status.contains("Why it is not Ready: ImagePullBackOff"), "{status}");

    // A Database that is not there is an error in a kubectl user's words.
    let missing = plugin(&["why", "nothing", "-n", &ns.name], None).await;
    assert!(!missing.status.success());
    assert_eq!(
        String::from_utf8_lossy(&missing.stderr).trim(),
        format!("error: Database nothing not found in namespace {}", ns.name)
    );
}
