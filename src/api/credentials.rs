//! The credentials section of a Database: `spec.credentials`, a Secret of the user's own. The
//! generated Secret is `crate::resources::secret`.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// Where a Database's credentials are.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(transform = ::operator_runtime::schema::rewrap_descriptions)]
pub struct Credentials {
    /// A Secret of your own, in the Database's namespace, with the keys "username" and
    /// "password" (and "root-password" for mysql and mariadb). Without it the operator
    /// generates "<name>-credentials" once.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(
        length(min = 1, max = 253),
        regex(pattern = r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
    )]
    pub secret_name: Option<String>,
}
