//! The README's way on the local plane, as a user types it: `helm install`, then
//! `hack/kubelet.sh start` runs the operator's Pod that kwok only pretends to run, the operator
//! converges a Database, and `hack/kubelet.sh stop` stops it as the kubelet would.

use std::time::Duration;

use database_operator::database::{Database, DatabaseSpec, Size};
use kube_client::api::{Api, PostParams};

use crate::chart::{helm, install};
use crate::common::{TestNamespace, client, free_address, http_get, wait_until};
use crate::{SERIAL, kubelet, run, user_command, wait_ready};

const RELEASE: &str = "e2e-kubelet";
const SELECTOR: &str = "app.kubernetes.io/name=database-operator";

/// Runs `hack/kubelet.sh args` as a user's shell would; its stdout (trimmed) and stderr.
fn kubelet_script(args: &[&str]) -> (String, String) {
    let output = user_command(concat!(env!("CARGO_MANIFEST_DIR"), "/hack/kubelet.sh")).args(args).output().unwrap();
    let (stdout, stderr) = (String::from_utf8_lossy(&output.stdout), String::from_utf8_lossy(&output.stderr));
    assert!(output.status.success(), "hack/kubelet.sh {}: {stderr}{stdout}", args.join(" "));
    (stdout.trim().to_string(), stderr.into_owned())
}

/// Removes what hack/kubelet.sh started in a namespace when the test ends, passed or failed.
struct Cleanup<'a>(&'a str);

impl Drop for Cleanup<'_> {
    fn drop(&mut self) {
        for container in kubelet::RunningContainer::list(Some(self.0)).unwrap_or_default() {
            let _ = container.remove();
        }
    }
}

#[tokio::test]
async fn the_kubelet_script_runs_the_operator_pod_of_a_helm_install_until_it_is_stopped() {
    let _serial = SERIAL.lock().await;
    let client = client().await;
    let namespace = TestNamespace::create_restricted(&client, "kubelet").await;
    let ns = namespace.name.as_str();
    let (metrics, health) = (free_address(), free_address());
    install(ns, RELEASE, metrics.port(), health.port());
    let _cleanup = Cleanup(ns);

    let (name, progress) = kubelet_script(&["start", "-n", ns, "-l", SELECTOR]);
    assert!(name.starts_with(&format!("{ns}_")) && name.ends_with("_manager"), "{name}: {progress}");
    let (again, progress) = kubelet_script(&["start", "--namespace", ns, "--selector", SELECTOR]);
    assert_eq!(again, name, "{progress}");
    assert!(progress.contains("already running"), "{progress}");

    wait_until("/readyz of the started operator to answer 200", Duration::from_secs(60), || async {
        (http_get(health, "/readyz").await?.0 == 200).then_some(())
    })
    .await;
    let databases = TestNamespace::create(&client, "kubelet-db").await;
    let db = Database::new("orders", DatabaseSpec::new(Size::Small, "postgres:17"));
    Api::<Database>::namespaced(client.clone(), &databases.name).create(&PostParams::default(), &db).await.unwrap();
    wait_ready(&client, &databases.name, &["orders"]).await;

    let (stopped, progress) = kubelet_script(&["stop", "-n", ns, "-l", SELECTOR]);
    assert_eq!(stopped, name, "{progress}");
    assert!(progress.contains("exited with code 0"), "a stop within the grace period exits 0: {progress}");
    assert!(kubelet::RunningContainer::list(Some(ns)).unwrap().is_empty(), "stop removes the container");
    let (_, progress) = kubelet_script(&["stop", "-n", ns]);
    assert!(progress.contains("nothing to stop"), "{progress}");
    run(&helm(), &["uninstall", RELEASE, "--namespace", ns], None);
}
