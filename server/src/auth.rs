//! Authentication (PROTOCOL.md section 14): turns a request's bearer token into the
//! principal it stands for, by the operator's settings (AUTH-5).
//!
//! Only verification lives here, because only the broker holds the key. Which level a
//! route needs and whether a principal reaches it are the wire layer's
//! (`queen_reference::wire::{required, admit}`), shared with the conformance checker,
//! so the server refuses exactly what the model predicts.

use jsonwebtoken::{Algorithm, DecodingKey, Validation};
use queen_reference::wire::{Caller, Principal, RoleNames, DEFAULT_PUBLIC_PATHS};
use serde_json::{Map, Value};

/// The operator's authentication settings; the names are those of existing Queen
/// deployments, so their environment carries over.
#[derive(Clone, Debug, clap::Args)]
pub struct AuthConfig {
    /// Require a JWT on every route but the public ones (section 14).
    #[arg(long, env = "JWT_ENABLED", default_value_t = false, action = clap::ArgAction::Set,
          value_parser = clap::builder::BoolishValueParser::new())]
    pub jwt_enabled: bool,
    /// HS256 (with JWT_SECRET), RS256 or EdDSA (with JWT_PUBLIC_KEY).
    #[arg(long, env = "JWT_ALGORITHM", default_value = "HS256")]
    pub jwt_algorithm: String,
    /// The HS256 shared secret.
    #[arg(long, env = "JWT_SECRET", hide_env_values = true)]
    pub jwt_secret: Option<String>,
    /// The RS256 or EdDSA public key: PEM text, or the path of a PEM file.
    #[arg(long, env = "JWT_PUBLIC_KEY")]
    pub jwt_public_key: Option<String>,
    /// When set, a token's `iss` must be this.
    #[arg(long, env = "JWT_ISSUER")]
    pub jwt_issuer: Option<String>,
    /// When set, a token's `aud` must include this.
    #[arg(long, env = "JWT_AUDIENCE")]
    pub jwt_audience: Option<String>,
    /// Seconds of leeway on `exp` and `nbf`.
    #[arg(long, env = "JWT_CLOCK_SKEW", default_value_t = 30)]
    pub jwt_clock_skew: u64,
    /// Paths served without a token, comma separated.
    #[arg(
        long,
        env = "JWT_SKIP_PATHS",
        value_delimiter = ',',
        default_value = "/health,/metrics,/metrics/prometheus"
    )]
    pub jwt_skip_paths: Vec<String>,
    /// The one-valued role claim.
    #[arg(long, env = "JWT_ROLES_CLAIM", default_value = "role")]
    pub jwt_roles_claim: String,
    /// The array-valued role claim.
    #[arg(long, env = "JWT_ROLES_ARRAY_CLAIM", default_value = "roles")]
    pub jwt_roles_array_claim: String,
    #[arg(long, env = "JWT_ROLE_ADMIN", default_value = "admin")]
    pub jwt_role_admin: String,
    #[arg(long, env = "JWT_ROLE_READ_WRITE", default_value = "read-write")]
    pub jwt_role_read_write: String,
    #[arg(long, env = "JWT_ROLE_READ_ONLY", default_value = "read-only")]
    pub jwt_role_read_only: String,
}

/// Verifies tokens; built once at start-up from [`AuthConfig`].
pub struct Authenticator {
    key: DecodingKey,
    validation: Validation,
    roles_claim: String,
    roles_array_claim: String,
    names: RoleNames,
    /// The paths served without a token.
    pub public: Vec<String>,
}

impl Authenticator {
    /// `None` when authentication is off. A setting that cannot work (no key, an
    /// unknown algorithm, a key that does not parse) is an error: the broker must not
    /// start open when its operator asked for it closed.
    pub fn from_config(c: &AuthConfig) -> Result<Option<Authenticator>, String> {
        if !c.jwt_enabled {
            return Ok(None);
        }
        let (alg, key) = decoding_key(c)?;
        let mut validation = Validation::new(alg);
        validation.leeway = c.jwt_clock_skew;
        validation.validate_nbf = true;
        // A configured issuer or audience is required, not only checked when present.
        let mut required = vec!["exp"];
        match &c.jwt_issuer {
            Some(iss) => {
                validation.set_issuer(&[iss]);
                required.push("iss");
            }
            None => validation.iss = None,
        }
        match &c.jwt_audience {
            Some(aud) => {
                validation.set_audience(&[aud]);
                required.push("aud");
            }
            None => validation.validate_aud = false,
        }
        validation.set_required_spec_claims(&required);
        let public = if c.jwt_skip_paths.is_empty() {
            DEFAULT_PUBLIC_PATHS.map(String::from).to_vec()
        } else {
            c.jwt_skip_paths
                .iter()
                .map(|p| p.trim().to_string())
                .filter(|p| !p.is_empty())
                .collect()
        };
        Ok(Some(Authenticator {
            key,
            validation,
            roles_claim: c.jwt_roles_claim.clone(),
            roles_array_claim: c.jwt_roles_array_claim.clone(),
            names: RoleNames {
                admin: c.jwt_role_admin.clone(),
                read_write: c.jwt_role_read_write.clone(),
                read_only: c.jwt_role_read_only.clone(),
            },
            public,
        }))
    }

    /// The principal of an `Authorization` header's bearer token; `None` when there is
    /// none or it is not valid (the reason is logged at debug level, never sent).
    pub fn principal(&self, authorization: Option<&str>) -> Option<Principal> {
        let token = authorization?.strip_prefix("Bearer ")?.trim();
        match jsonwebtoken::decode::<Map<String, Value>>(token, &self.key, &self.validation) {
            Ok(data) => Some(self.principal_of(&data.claims)),
            Err(e) => {
                tracing::debug!("a token was refused: {e}");
                None
            }
        }
    }

    fn principal_of(&self, claims: &Map<String, Value>) -> Principal {
        let one = claims.get(&self.roles_claim).and_then(Value::as_str);
        let many = claims
            .get(&self.roles_array_claim)
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .filter_map(Value::as_str);
        Principal {
            access: self.names.access(one.into_iter().chain(many)),
            sub: claims
                .get("sub")
                .and_then(Value::as_str)
                .map(str::to_string),
        }
    }
}

/// A request's caller once its token is checked: the owned side of the wire layer's
/// [`Caller`], kept from admission until the pushed items are stamped.
pub enum Verified {
    /// Authentication is off.
    Open,
    /// No valid token.
    Anonymous,
    Token(Principal),
}

impl Verified {
    pub fn caller(&self) -> Caller<'_> {
        match self {
            Verified::Open => Caller::Open,
            Verified::Anonymous => Caller::Anonymous,
            Verified::Token(p) => Caller::Token(p),
        }
    }
}

impl Authenticator {
    /// The caller of a request with this `Authorization` header.
    pub fn verify(&self, authorization: Option<&str>) -> Verified {
        match self.principal(authorization) {
            Some(p) => Verified::Token(p),
            None => Verified::Anonymous,
        }
    }
}

/// The algorithm and its key. Only the three the settings name: a token must be signed
/// with the configured one (`Validation` refuses every other, `none` included).
/// AUTH-5: the shortest HS256 secret accepted, 256 bits.
pub const MIN_HS256_SECRET_BYTES: usize = 32;

fn decoding_key(c: &AuthConfig) -> Result<(Algorithm, DecodingKey), String> {
    let pem = || -> Result<Vec<u8>, String> {
        let v = c.jwt_public_key.as_deref().ok_or_else(|| {
            format!(
                "JWT_ALGORITHM={} needs JWT_PUBLIC_KEY (PEM text or a file)",
                c.jwt_algorithm
            )
        })?;
        if v.trim_start().starts_with("-----BEGIN") {
            Ok(v.as_bytes().to_vec())
        } else {
            std::fs::read(v).map_err(|e| format!("cannot read JWT_PUBLIC_KEY file {v}: {e}"))
        }
    };
    let bad_key = |e: jsonwebtoken::errors::Error| format!("JWT_PUBLIC_KEY is not usable: {e}");
    match c.jwt_algorithm.to_ascii_uppercase().as_str() {
        "HS256" => match c.jwt_secret.as_deref() {
            // RFC 7518 3.2: an HS256 key has at least as many bits as the hash, 256.
            Some(s) if s.len() >= MIN_HS256_SECRET_BYTES => {
                Ok((Algorithm::HS256, DecodingKey::from_secret(s.as_bytes())))
            }
            Some(s) if !s.is_empty() => Err(format!(
                "JWT_SECRET has {} bytes; HS256 needs at least {MIN_HS256_SECRET_BYTES} (256 \
                 bits), or a token can be forged by guessing it (`openssl rand -hex 32` makes one)",
                s.len()
            )),
            _ => Err("JWT_ENABLED with HS256 needs a non-empty JWT_SECRET".into()),
        },
        "RS256" => Ok((
            Algorithm::RS256,
            DecodingKey::from_rsa_pem(&pem()?).map_err(bad_key)?,
        )),
        "EDDSA" => Ok((
            Algorithm::EdDSA,
            DecodingKey::from_ed_pem(&pem()?).map_err(bad_key)?,
        )),
        other => Err(format!(
            "JWT_ALGORITHM {other} is not supported: HS256, RS256 or EdDSA"
        )),
    }
}
