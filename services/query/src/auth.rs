//! Who is reading: the caller's key, narrowed by the signed-in person's token when a bot
//! passes one (`X-Casement-User`, a JSON Web Token verified with `[auth.jwt]`).
//!
//! A reader ([`Reader`]) is an operator (every document) or a set of groups (public
//! documents and those naming one of its groups). It is worked out once per request here
//! and travels into every store read: the search's payload filter, the document routes'
//! and `min_revision`'s state checks (`Access::readable_by`).

use std::collections::HashMap;
use std::path::Path;

use anyhow::{Context, bail};
use axum::http::HeaderMap;
use casement_text::Reader;
use jsonwebtoken::jwk::JwkSet;
use jsonwebtoken::{Algorithm, DecodingKey, Validation};
use serde_json::Value;

use crate::config::JwtConfig;
use crate::error::ApiError;
use crate::http::Principal;

/// The header a bot passes the person's token in.
pub const USER_HEADER: &str = "x-casement-user";

/// The verifier of `[auth.jwt]`, built once at start (a bad key set fails the start).
pub struct UserTokens {
    keys: Keys,
    issuer: Option<String>,
    audience: Option<String>,
    groups_claim: String,
    leeway: u64,
}

impl std::fmt::Debug for UserTokens {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("UserTokens")
            .field("issuer", &self.issuer)
            .field("audience", &self.audience)
            .field("groups_claim", &self.groups_claim)
            .finish_non_exhaustive()
    }
}

enum Keys {
    /// HS256 with the shared secret.
    Secret(DecodingKey),
    /// Public keys by `kid` (a set of one key also verifies a token without `kid`).
    Set(HashMap<Option<String>, (Algorithm, DecodingKey)>),
}

impl UserTokens {
    pub fn load(config: &JwtConfig) -> anyhow::Result<Self> {
        let keys = match &config.jwks_file {
            None => Keys::Secret(
                DecodingKey::from_secret(config.secret.expose().as_bytes())
                    .context("auth.jwt.secret")?,
            ),
            Some(path) => Keys::Set(load_jwks(path)?),
        };
        Ok(Self {
            keys,
            issuer: config.issuer.clone(),
            audience: config.audience.clone(),
            groups_claim: config.groups_claim.clone(),
            leeway: config.leeway_secs,
        })
    }

    /// The person's groups, from a token whose signature, `exp` (required), `nbf`, and the
    /// configured `iss` and `aud` hold.
    pub fn verify(&self, token: &str) -> Result<Reader, ApiError> {
        let bad = |what: &str| ApiError::UserToken(what.to_owned());
        let header = jsonwebtoken::decode_header(token)
            .map_err(|_| bad("not a JSON Web Token (header.payload.signature)"))?;
        let (algorithm, key) = match &self.keys {
            Keys::Secret(key) => (Algorithm::HS256, key),
            Keys::Set(keys) => {
                let found = keys
                    .get(&header.kid)
                    .or_else(|| (keys.len() == 1).then(|| keys.values().next()).flatten());
                let (algorithm, key) =
                    found.ok_or_else(|| bad("signed by a key (kid) not in auth.jwt.jwks_file"))?;
                (*algorithm, key)
            }
        };
        if header.alg != algorithm {
            return Err(bad(&format!(
                "signed with {:?}; this key verifies {algorithm:?}",
                header.alg
            )));
        }
        let mut validation = Validation::new(algorithm);
        validation.leeway = self.leeway;
        validation.validate_nbf = true;
        validation.set_required_spec_claims(&["exp"]);
        match &self.issuer {
            Some(issuer) => validation.set_issuer(&[issuer]),
            None => validation.iss = None,
        }
        match &self.audience {
            Some(audience) => validation.set_audience(&[audience]),
            None => validation.validate_aud = false,
        }
        let data = jsonwebtoken::decode::<Value>(token, key, &validation).map_err(|e| {
            use jsonwebtoken::errors::ErrorKind;
            bad(match e.kind() {
                ErrorKind::ExpiredSignature => "expired",
                ErrorKind::ImmatureSignature => "not valid yet (nbf)",
                ErrorKind::InvalidSignature => "the signature does not verify",
                ErrorKind::InvalidIssuer => "issued by another issuer than auth.jwt.issuer",
                ErrorKind::InvalidAudience => "not for this audience (auth.jwt.audience)",
                ErrorKind::MissingRequiredClaim(_) => "without a required claim (exp)",
                ErrorKind::InvalidAlgorithm => "signed with another algorithm",
                _ => "cannot be verified",
            })
        })?;
        let groups = match data.claims.get(&self.groups_claim) {
            None | Some(Value::Null) => Vec::new(),
            Some(Value::Array(items)) => items
                .iter()
                .map(|v| v.as_str().map(str::to_owned))
                .collect::<Option<Vec<_>>>()
                .ok_or_else(|| bad("the groups claim holds something other than strings"))?,
            Some(Value::String(text)) => text
                .split([' ', ','])
                .filter(|g| !g.is_empty())
                .map(str::to_owned)
                .collect(),
            Some(_) => return Err(bad("the groups claim is neither an array nor a string")),
        };
        Ok(Reader::groups(groups))
    }
}

/// A JSON Web Key Set of RS256/ES256 public keys.
fn load_jwks(path: &Path) -> anyhow::Result<HashMap<Option<String>, (Algorithm, DecodingKey)>> {
    let text = std::fs::read_to_string(path)
        .with_context(|| format!("auth.jwt.jwks_file: reading {}", path.display()))?;
    let set: JwkSet = serde_json::from_str(&text).with_context(|| {
        format!(
            "auth.jwt.jwks_file: {} is not a JSON Web Key Set",
            path.display()
        )
    })?;
    let mut keys = HashMap::new();
    for jwk in &set.keys {
        let algorithm = match &jwk.algorithm {
            jsonwebtoken::jwk::AlgorithmParameters::RSA(_) => Algorithm::RS256,
            jsonwebtoken::jwk::AlgorithmParameters::EllipticCurve(_) => Algorithm::ES256,
            _ => bail!(
                "auth.jwt.jwks_file: key {:?} is neither RSA nor EC (RS256 and ES256 are verified)",
                jwk.common.key_id
            ),
        };
        let key = DecodingKey::from_jwk(jwk)
            .with_context(|| format!("auth.jwt.jwks_file: key {:?}", jwk.common.key_id))?;
        keys.insert(jwk.common.key_id.clone(), (algorithm, key));
    }
    if keys.is_empty() {
        bail!("auth.jwt.jwks_file: {} holds no key", path.display());
    }
    Ok(keys)
}

/// The reader of a request: the key's reader, narrowed by a person's token when the
/// request carries one. A token without `[auth.jwt]` is refused, never ignored.
pub fn reader(
    principal: &Principal,
    users: Option<&UserTokens>,
    headers: &HeaderMap,
) -> Result<Reader, ApiError> {
    let Some(value) = headers.get(USER_HEADER) else {
        return Ok(principal.reader.clone());
    };
    let users = users.ok_or_else(|| {
        ApiError::UserToken("no [auth.jwt] is configured to verify it; leave the header out".into())
    })?;
    let token = value
        .to_str()
        .map_err(|_| ApiError::UserToken("not ASCII".into()))?
        .trim();
    let token = token
        .strip_prefix("Bearer ")
        .or_else(|| token.strip_prefix("bearer "))
        .unwrap_or(token);
    let person = users.verify(token)?;
    Ok(principal.reader.intersect(&person))
}
