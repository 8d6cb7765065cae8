//! JWT auth for test clusters: every replica accepts HS256 tokens signed with one shared
//! secret, and tests mint tokens for any subject.

use serde_json::json;

use mcpgate_e2e::{ClusterBuilder, GatewayBuilder};

const SECRET: &str = "e2e-shared-secret-of-at-least-32-bytes!";
pub(crate) const ISSUER: &str = "https://auth.example.com";
const RESOURCE: &str = "https://mcp.example.com/mcp";

/// The settings of a gateway that requires a JWT from [`bearer`].
const JWT_ENV: [(&str, &str); 6] = [
    ("MCPGATE_AUTH_MODE", "jwt"),
    ("MCPGATE_AUTH_RESOURCE", RESOURCE),
    ("MCPGATE_AUTH_AUTHORIZATION_SERVERS", ISSUER),
    ("MCPGATE_AUTH_JWT_ISSUER", ISSUER),
    ("MCPGATE_AUTH_JWT_ALGORITHMS", "HS256"),
    ("MCPGATE_AUTH_JWT_HS256_SECRETS", SECRET),
];

/// Replicas that require a JWT from [`bearer`].
pub(crate) fn with_jwt(builder: ClusterBuilder) -> ClusterBuilder {
    JWT_ENV.iter().fold(builder, |builder, (key, value)| builder.env(key, value))
}

/// One gateway that requires a JWT from [`bearer`].
pub(crate) fn gateway_with_jwt(builder: GatewayBuilder) -> GatewayBuilder {
    JWT_ENV.iter().fold(builder, |builder, (key, value)| builder.env(key, value))
}

/// An `Authorization` header value for `sub`, valid for ten minutes.
pub(crate) fn bearer(sub: &str) -> anyhow::Result<String> {
    use jsonwebtoken::{Algorithm, EncodingKey, Header, encode};
    let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH)?.as_secs();
    let claims = json!({"iss": ISSUER, "aud": RESOURCE, "sub": sub, "exp": now + 600});
    let token = encode(&Header::new(Algorithm::HS256), &claims, &EncodingKey::from_secret(SECRET.as_bytes()))?;
    Ok(format!("Bearer {token}"))
}

/// An `Authorization` header value for `sub` with `extra` claims (say, a role), valid for ten
/// minutes.
pub(crate) fn bearer_with(sub: &str, extra: &serde_json::Value) -> anyhow::Result<String> {
    use jsonwebtoken::{Algorithm, EncodingKey, Header, encode};
    let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH)?.as_secs();
    let mut claims = json!({"iss": ISSUER, "aud": RESOURCE, "sub": sub, "exp": now + 600});
    if let (Some(all), Some(more)) = (claims.as_object_mut(), extra.as_object()) {
        all.extend(more.iter().map(|(k, v)| (k.clone(), v.clone())));
    }
    let token = encode(&Header::new(Algorithm::HS256), &claims, &EncodingKey::from_secret(SECRET.as_bytes()))?;
    Ok(format!("Bearer {token}"))
}
