//! Who may read the secure metrics endpoint: controller-runtime's
//! `filters.WithAuthenticationAndAuthorization`, which kubebuilder projects serve `/metrics`
//! behind.
//!
//! - **Authentication**: the request's `Authorization: Bearer <token>` is checked with a
//!   TokenReview. No token, or one the apiserver does not accept, is answered 401.
//! - **Authorization**: the authenticated user is checked with a SubjectAccessReview for the
//!   request's verb (the HTTP method in lower case) on its path as a non-resource URL: `get` on
//!   `/metrics`, which the `database-operator-metrics-reader` ClusterRole grants. Refused: 403.
//!   A review that fails (the apiserver unreachable) is answered 500 and logged.
//!
//! Decisions are cached as the apiserver's delegating authenticator and authorizer cache them
//! for controller-runtime: an authentication (accepted or not) for 1 minute, an allowed
//! decision for 5 minutes, a refusal for 30 seconds. A scraper every 15 s thus costs two
//! reviews every few minutes, not two a scrape. Tokens are kept only as SHA-256 digests; the
//! caches hold at most [`CACHE_ENTRIES`] entries each (expired ones are dropped first, then all).

use std::collections::{BTreeMap, HashMap};
use std::hash::Hash;
use std::sync::Mutex;
use std::time::Duration;

use http::{HeaderMap, Method, StatusCode, header};
use k8s_openapi::api::authentication::v1::{TokenReview, TokenReviewSpec, UserInfo};
use k8s_openapi::api::authorization::v1::{NonResourceAttributes, SubjectAccessReview, SubjectAccessReviewSpec};
use kube_client::Client;
use kube_client::api::{Api, PostParams};
use tokio::time::Instant;
use tracing::{debug, warn};

/// How long an authentication is trusted (controller-runtime's `CacheTTL`).
const AUTHENTICATION_TTL: Duration = Duration::from_secs(60);
/// How long an allowed decision is trusted (`AllowCacheTTL`).
const ALLOWED_TTL: Duration = Duration::from_secs(5 * 60);
/// How long a refusal is trusted (`DenyCacheTTL`): short, so a newly granted role works soon.
const DENIED_TTL: Duration = Duration::from_secs(30);
/// Entries per cache: far more than the scrapers of one operator.
pub const CACHE_ENTRIES: usize = 1024;

/// The answer to a request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Decision {
    /// Serve it.
    Allowed,
    /// 401: no bearer token, or the apiserver does not accept it.
    Unauthenticated,
    /// 403: authenticated, but not allowed this verb on this path.
    Forbidden {
        /// The user, for the answer's body (never the token).
        user: String,
    },
    /// 500: a review could not be made.
    Failed,
}

impl Decision {
    /// The HTTP status that answers it.
    pub fn status(&self) -> StatusCode {
        match self {
            Self::Allowed => StatusCode::OK,
            Self::Unauthenticated => StatusCode::UNAUTHORIZED,
            Self::Forbidden { .. } => StatusCode::FORBIDDEN,
            Self::Failed => StatusCode::INTERNAL_SERVER_ERROR,
        }
    }
}

/// Authenticates and authorizes requests through the apiserver; cheap to share behind an `Arc`.
pub struct Authorizer {
    token_reviews: Api<TokenReview>,
    access_reviews: Api<SubjectAccessReview>,
    authenticated: Mutex<Cache<[u8; 32], Option<UserInfo>>>,
    authorized: Mutex<Cache<Access, bool>>,
}

impl std::fmt::Debug for Authorizer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Authorizer").finish_non_exhaustive()
    }
}

/// What a SubjectAccessReview asks: this user, this verb, this path.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
struct Access {
    user: String,
    uid: Option<String>,
    groups: Vec<String>,
    extra: BTreeMap<String, Vec<String>>,
    verb: String,
    path: String,
}

impl Authorizer {
    /// An authorizer asking the apiserver of `client`.
    pub fn new(client: Client) -> Self {
        Self {
            token_reviews: Api::all(client.clone()),
            access_reviews: Api::all(client),
            authenticated: Mutex::new(Cache::default()),
            authorized: Mutex::new(Cache::default()),
        }
    }

    /// Decides whether a request with these `headers` may `method` on `path`.
    ///
    /// # Cancellation safety
    ///
    /// Safe: a cancelled check leaves the caches as they were or with a complete entry.
    pub async fn check(&self, headers: &HeaderMap, method: &Method, path: &str) -> Decision {
        let Some(token) = bearer_token(headers) else { return Decision::Unauthenticated };
        let user = match self.authenticate(token).await {
            Ok(Some(user)) => user,
            Ok(None) => return Decision::Unauthenticated,
            Err(err) => {
                // client-go's authentication filter answers 401 when a review fails, too.
                warn!(error = %err, "metrics: the TokenReview failed");
                return Decision::Unauthenticated;
            }
        };
        let access = Access {
            user: user.username.clone().unwrap_or_default(),
            uid: user.uid.clone(),
            groups: user.groups.clone().unwrap_or_default(),
            extra: user.extra.clone().unwrap_or_default(),
            verb: method.as_str().to_ascii_lowercase(),
            path: path.to_string(),
        };
        match self.authorize(&access).await {
            Ok(true) => Decision::Allowed,
            Ok(false) => {
                debug!(user = %access.user, verb = %access.verb, path = %access.path, "metrics: access refused");
                Decision::Forbidden { user: access.user }
            }
            Err(err) => {
                warn!(error = %err, "metrics: the SubjectAccessReview failed");
                Decision::Failed
            }
        }
    }

    async fn authenticate(&self, token: &str) -> Result<Option<UserInfo>, kube_client::Error> {
        let digest: [u8; 32] = ring::digest::digest(&ring::digest::SHA256, token.as_bytes())
            .as_ref()
            .try_into()
            .expect("SHA-256 is 32 bytes");
        if let Some(user) = lock(&self.authenticated).get(&digest) {
            return Ok(user);
        }
        let review = TokenReview {
            spec: TokenReviewSpec { token: Some(token.to_string()), ..Default::default() },
            ..Default::default()
        };
        let status = self.token_reviews.create(&PostParams::default(), &review).await?.status.unwrap_or_default();
        let user = if status.authenticated == Some(true) { status.user } else { None };
        lock(&self.authenticated).insert(digest, user.clone(), AUTHENTICATION_TTL);
        Ok(user)
    }

    async fn authorize(&self, access: &Access) -> Result<bool, kube_client::Error> {
        if let Some(allowed) = lock(&self.authorized).get(access) {
            return Ok(allowed);
        }
        let review = SubjectAccessReview {
            spec: SubjectAccessReviewSpec {
                user: Some(access.user.clone()),
                uid: access.uid.clone(),
                groups: Some(access.groups.clone()),
                extra: Some(access.extra.clone()),
                non_resource_attributes: Some(NonResourceAttributes {
                    path: Some(access.path.clone()),
                    verb: Some(access.verb.clone()),
                }),
                ..Default::default()
            },
            ..Default::default()
        };
        let status = self.access_reviews.create(&PostParams::default(), &review).await?.status.unwrap_or_default();
        let allowed = status.allowed && status.denied != Some(true);
        lock(&self.authorized).insert(access.clone(), allowed, if allowed { ALLOWED_TTL } else { DENIED_TTL });
        Ok(allowed)
    }
}

/// The token of an `Authorization: Bearer <token>` header (the scheme in any case, as HTTP
/// says), if there is one.
fn bearer_token(headers: &HeaderMap) -> Option<&str> {
    let value = headers.get(header::AUTHORIZATION)?.to_str().ok()?;
    let (scheme, token) = value.split_once(' ')?;
    let token = token.trim();
    (scheme.eq_ignore_ascii_case("bearer") && !token.is_empty()).then_some(token)
}

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// A map whose entries expire, bounded to [`CACHE_ENTRIES`].
#[derive(Debug)]
struct Cache<K, V> {
    entries: HashMap<K, (Instant, V)>,
}

impl<K, V> Default for Cache<K, V> {
    fn default() -> Self {
        Self { entries: HashMap::new() }
    }
}

impl<K: Eq + Hash, V: Clone> Cache<K, V> {
    fn get(&mut self, key: &K) -> Option<V> {
        match self.entries.get(key) {
            Some((expires, value)) if Instant::now() < *expires => Some(value.clone()),
            Some(_) => {
                self.entries.remove(key);
                None
            }
            None => None,
        }
    }

    fn insert(&mut self, key: K, value: V, ttl: Duration) {
        if self.entries.len() >= CACHE_ENTRIES {
            let now = Instant::now();
            self.entries.retain(|_, (expires, _)| now < *expires);
            if self.entries.len() >= CACHE_ENTRIES {
                self.entries.clear();
            }
        }
        self.entries.insert(key, (Instant::now() + ttl, value));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use http::HeaderValue;

    fn headers(authorization: &str) -> HeaderMap {
        let mut headers = HeaderMap::new();
        headers.insert(header::AUTHORIZATION, HeaderValue::from_str(authorization).unwrap());
        headers
    }

    #[test]
    fn a_bearer_token_is_read_whatever_the_case_of_the_scheme() {
        assert_eq!(bearer_token(&headers("Bearer abc.def")), Some("abc.def"));
        assert_eq!(bearer_token(&headers("bearer abc")), Some("abc"));
        assert_eq!(bearer_token(&headers("Basic dXNlcjpwYXNz")), None);
        assert_eq!(bearer_token(&headers("Bearer ")), None);
        assert_eq!(bearer_token(&HeaderMap::new()), None);
    }

    #[tokio::test(start_paused = true)]
    async fn cache_entries_expire_after_their_ttl() {
        let mut cache = Cache::default();
        cache.insert("allowed", true, ALLOWED_TTL);
        cache.insert("denied", false, DENIED_TTL);
        tokio::time::advance(DENIED_TTL).await;
        assert_eq!(cache.get(&"allowed"), Some(true));
        assert_eq!(cache.get(&"denied"), None, "a refusal is forgotten after 30 s");
        tokio::time::advance(ALLOWED_TTL).await;
        assert_eq!(cache.get(&"allowed"), None);
    }

    #[tokio::test(start_paused = true)]
    async fn a_full_cache_drops_expired_entries_first_and_never_grows_past_its_bound() {
        let mut cache = Cache::default();
        for i in 0..CACHE_ENTRIES / 2 {
            cache.insert(i, (), DENIED_TTL);
        }
        tokio::time::advance(DENIED_TTL).await;
        for i in CACHE_ENTRIES / 2..CACHE_ENTRIES {
            cache.insert(i, (), ALLOWED_TTL);
        }
        cache.insert(CACHE_ENTRIES, (), ALLOWED_TTL);
        assert_eq!(cache.entries.len(), CACHE_ENTRIES / 2 + 1, "the expired half was dropped");
        assert_eq!(cache.get(&(CACHE_ENTRIES - 1)), Some(()), "live entries stay");
        for i in 0..2 * CACHE_ENTRIES {
            cache.insert(CACHE_ENTRIES + 1 + i, (), ALLOWED_TTL);
            assert!(cache.entries.len() <= CACHE_ENTRIES);
        }
    }

    #[test]
    fn each_decision_has_the_status_controller_runtime_answers() {
        assert_eq!(Decision::Allowed.status(), StatusCode::OK);
        assert_eq!(Decision::Unauthenticated.status(), StatusCode::UNAUTHORIZED);
        assert_eq!(Decision::Forbidden { user: "u".into() }.status(), StatusCode::FORBIDDEN);
        assert_eq!(Decision::Failed.status(), StatusCode::INTERNAL_SERVER_ERROR);
    }
}
