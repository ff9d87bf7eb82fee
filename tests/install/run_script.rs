//! The README's run command, `hack/run.sh`, pointed at a cluster with `--kubeconfig` and
//! `--context`: kubectl and the operator use the same ones, the sample is installed, converges
//! on the real node and its postgres answers `select 1`, and an interrupt stops the operator
//! cleanly.

use std::process::Stdio;
use std::time::Duration;

use database_operator::api::Database;
use kube_client::api::{Api, DeleteParams};

use crate::common::{client, http_get, wait_until};
use crate::{SERIAL, run, user_command, wait_ready};

#[tokio::test]
async fn the_run_command_uses_the_given_kubeconfig_and_context_for_kubectl_and_the_operator() {
    let _serial = SERIAL.lock().await;
    let client = client().await;
    let kubeconfig = std::env::var("KUBECONFIG").expect("KUBECONFIG");
    let (context, _) = run("kubectl", &["config", "current-context"], None);
    let log = std::env::temp_dir().join(format!("database-operator-run-{:08x}.log", rand::random::<u32>()));
    // KUBECONFIG is left out of the script's environment: only the flags name the cluster. A
    // kubeconfig that names another cluster first would be used if they were ignored.
    let mut script = user_command(concat!(env!("CARGO_MANIFEST_DIR"), "/hack/run.sh"));
    script.env_remove("KUBECONFIG");
    let mut child = script
        .args(["--kubeconfig", &kubeconfig, "--context", context.trim(), "--workers=1", "--workers=2"])
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(&log).unwrap())
        .spawn()
        .unwrap();

    wait_ready(&client, "default", &["orders"]).await;
    let health = "127.0.0.1:8081".parse().unwrap();
    assert_eq!(http_get(health, "/readyz").await.map(|r| r.0), Some(200));
    // The namespace default runs on the real node: postgres itself answers.
    let answered = wait_until("hack/run.sh to report the sample's answer", Duration::from_secs(120), || async {
        let output = std::fs::read_to_string(&log).ok()?;
        output.lines().find(|l| l.contains("'select 1'")).map(str::to_string)
    })
    .await;
    assert!(answered.ends_with("answers 'select 1' with: 1"), "{answered}");
    let pid = child.id().to_string();
    run("kill", &["-INT", &pid], None);
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        assert!(std::time::Instant::now() < deadline, "the operator did not exit within 30 s of SIGINT");
        tokio::time::sleep(Duration::from_millis(200)).await;
    };
    let output = std::fs::read_to_string(&log).unwrap();
    assert!(status.success(), "{output}");
    assert!(output.contains(&format!("using the kubeconfig {kubeconfig}, context {}", context.trim())), "{output}");
    assert!(output.contains("workers=2"), "the last of a repeated flag wins: {output}");
    let _ = Api::<Database>::namespaced(client, "default").delete("orders", &DeleteParams::default()).await;
    let _ = std::fs::remove_file(log);
}
