//! Safe upgrades on the real plane: a new image rolls and becomes the Database's current one;
//! one that never becomes Ready times out and, with `policy: Rollback`, goes back, except
//! across a major version; a new major version of the engine is refused unless allowed.
//!
//! The rollouts run on the real node: the new server starts on the old one's data directory,
//! and an image that no registry serves here never starts, as a broken or mistyped image does
//! on a cluster. The major-version refusal runs on kwok: it is decided before any pod, and
//! `allowMajor` rolls postgres 17 onto postgres 16's files, which only an image that migrates
//! its data itself can read (the official ones, and ours, do not: on the real node the pod
//! would never turn Ready).

use std::time::Duration;

use database_operator::api::{
    Database, DatabaseSpec, EngineKind, Phase, Size, UpgradePolicy, UpgradeSpec, UpgradeState,
};
use k8s_openapi::api::apps::v1::Deployment;
use kube_client::api::{Api, Patch, PatchParams, PostParams};
use serde_json::json;
use tokio_util::sync::CancellationToken;

use crate::common::{Nodes, TestNamespace, client, images, install_crd, wait_until};

/// Long enough for a real database's first start on a busy two-core machine.
const CONVERGE: Duration = Duration::from_secs(180);

struct Fixture {
    databases: Api<Database>,
    deployments: Api<Deployment>,
    cancel: CancellationToken,
    _ns: TestNamespace,
}

impl Drop for Fixture {
    fn drop(&mut self) {
        self.cancel.cancel();
    }
}

async fn fixture(prefix: &str, nodes: Nodes) -> Fixture {
    let client = client().await;
    install_crd(&client).await;
    let ns = TestNamespace::create_restricted(&client, prefix, nodes).await;
    let cancel = CancellationToken::new();
    let options = database_operator::operator::Options::new(Some(ns.name.clone()), 2);
    tokio::spawn(database_operator::operator::run(client.clone(), options, cancel.clone()));
    Fixture {
        databases: Api::namespaced(client.clone(), &ns.name),
        deployments: Api::namespaced(client, &ns.name),
        cancel,
        _ns: ns,
    }
}

impl Fixture {
    async fn create(&self, image: &str, upgrade: Option<UpgradeSpec>) {
        let mut db = Database::new("orders", DatabaseSpec::new(Size::Small, image).with_engine(EngineKind::Postgres));
        db.spec.upgrade = upgrade.map(Box::new);
        self.databases.create(&PostParams::default(), &db).await.unwrap();
        self.current_image(image).await;
    }

    /// Waits until `image` is the image that last became Ready.
    async fn current_image(&self, image: &str) -> Database {
        wait_until(&format!("{image} to be the current image"), CONVERGE, || async {
            let db = self.databases.get("orders").await.ok()?;
            let status = db.status.as_ref()?;
            (status.current_image.as_deref() == Some(image)
                && status.phase == Some(Phase::Ready)
                && status.upgrade.is_none())
            .then_some(db)
        })
        .await
    }

    async fn set_image(&self, image: &str) {
        let patch = json!({"spec": {"image": image}});
        self.databases.patch("orders", &PatchParams::default(), &Patch::Merge(&patch)).await.unwrap();
    }

    async fn upgrade_state(&self, state: UpgradeState) -> Database {
        wait_until(&format!("the upgrade to be {state:?}"), CONVERGE, || async {
            let db = self.databases.get("orders").await.ok()?;
            (db.status.as_ref()?.upgrade.as_ref()?.state == state).then_some(db)
        })
        .await
    }

    async fn deployment_image(&self) -> String {
        let deployment = self.deployments.get("orders").await.unwrap();
        deployment.spec.unwrap().template.spec.unwrap().containers.remove(0).image.unwrap()
    }
}

fn degraded_reason(db: &Database) -> String {
    let status = db.status.as_ref().unwrap();
    status
        .conditions
        .iter()
        .find(|c| c.type_ == "Degraded" && c.status == "True")
        .map(|c| c.reason.clone())
        .unwrap_or_default()
}

#[tokio::test]
async fn a_new_image_rolls_and_becomes_the_current_one() {
    let f = fixture("upgrade", Nodes::Real(1)).await;
    f.create(images::POSTGRES, None).await;
    f.set_image(images::POSTGRES_TRIXIE).await;
    f.current_image(images::POSTGRES_TRIXIE).await;
    assert_eq!(f.deployment_image().await, images::POSTGRES_TRIXIE);
}

#[tokio::test]
async fn an_upgrade_that_never_becomes_ready_times_out_and_rolls_back() {
    let f = fixture("rollback", Nodes::Real(1)).await;
    let upgrade =
        UpgradeSpec { timeout: Some("5s".into()), policy: Some(UpgradePolicy::Rollback), ..Default::default() };
    f.create(images::POSTGRES, Some(upgrade)).await;
    f.set_image(images::MISSING).await;
    let upgrading = f.upgrade_state(UpgradeState::Upgrading).await;
    let progressing = upgrading.status.unwrap().conditions.into_iter().find(|c| c.type_ == "Progressing").unwrap();
    assert_eq!((progressing.status.as_str(), progressing.reason.as_str()), ("True", "Upgrading"));

    let rolled_back = f.upgrade_state(UpgradeState::RolledBack).await;
    assert_eq!(degraded_reason(&rolled_back), "UpgradeFailed");
    let status = rolled_back.status.as_ref().unwrap();
    assert_eq!(status.phase, Some(Phase::Degraded));
    assert_eq!(status.current_image.as_deref(), Some(images::POSTGRES), "the image that was Ready");
    assert_eq!(f.deployment_image().await, images::POSTGRES, "the Deployment went back");
    // The old image serves again: Ready=True while Degraded says the spec is not what runs.
    wait_until("the rolled-back pod to be Ready", CONVERGE, || async {
        let db = f.databases.get("orders").await.ok()?;
        let status = db.status?;
        status.conditions.iter().any(|c| c.type_ == "Ready" && c.status == "True").then_some(())
    })
    .await;
}

#[tokio::test]
async fn a_failed_upgrade_without_rollback_keeps_the_new_image() {
    let f = fixture("no-rollback", Nodes::Real(1)).await;
    f.create(images::POSTGRES, Some(UpgradeSpec { timeout: Some("5s".into()), ..Default::default() })).await;
    f.set_image(images::MISSING).await;
    let failed = f.upgrade_state(UpgradeState::Failed).await;
    assert_eq!(degraded_reason(&failed), "UpgradeFailed");
    assert_eq!(f.deployment_image().await, images::MISSING);
}

#[tokio::test]
async fn a_new_major_version_is_refused_with_its_reason_unless_allowed() {
    let f = fixture("major", Nodes::Kwok).await;
    f.create("postgres:16", None).await;
    f.set_image("postgres:17").await;
    let refused = f.upgrade_state(UpgradeState::Refused).await;
    assert_eq!(degraded_reason(&refused), "MajorVersionUpgrade");
    let degraded = refused.status.unwrap().conditions.into_iter().find(|c| c.type_ == "Degraded").unwrap();
    assert!(degraded.message.contains("restore it into a new Database"), "{}", degraded.message);
    assert_eq!(f.deployment_image().await, "postgres:16", "not rolled");

    let allow = json!({"spec": {"upgrade": {"allowMajor": true}}});
    f.databases.patch("orders", &PatchParams::default(), &Patch::Merge(&allow)).await.unwrap();
    f.current_image("postgres:17").await;
}

/// `allowMajor` rolls postgres 17 onto postgres 15's data directory, which postgres 17 cannot
/// read, so it never turns Ready; with `policy: Rollback` the upgrade still does not go back:
/// across a major version the old server must not start on data the new one may have touched.
#[tokio::test]
async fn a_failed_upgrade_across_a_major_version_is_not_rolled_back() {
    let f = fixture("major-rollback", Nodes::Real(1)).await;
    let upgrade = UpgradeSpec {
        timeout: Some("30s".into()),
        policy: Some(UpgradePolicy::Rollback),
        allow_major: Some(true),
        ..Default::default()
    };
    f.create(images::POSTGRES_15, Some(upgrade)).await;
    f.set_image(images::POSTGRES).await;
    let failed = f.upgrade_state(UpgradeState::NotRolledBack).await;
    assert_eq!(degraded_reason(&failed), "UpgradeFailed");
    let degraded = failed.status.as_ref().unwrap().conditions.iter().find(|c| c.type_ == "Degraded").unwrap();
    assert!(degraded.message.contains("was not rolled back"), "{}", degraded.message);
    assert_eq!(f.deployment_image().await, images::POSTGRES, "the Deployment keeps the new major");
    assert_eq!(failed.status.unwrap().current_image.as_deref(), Some(images::POSTGRES_15));
}
