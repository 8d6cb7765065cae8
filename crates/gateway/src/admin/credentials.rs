//! The admin routes of users' connections to `oauth` upstreams: listing them (metadata only:
//! principal, upstream, issuer, scope, expiry, when connected) and revoking one.
//!
//! GET  /admin/credentials?principal=&upstream=&limit=&cursor=   list
//! POST /admin/credentials/revoke {"principal", "upstream"}       forget one connection
//!
//! Invariant: no token, no sealed value is ever read here (the vault lists metadata only);
//! revoking deletes the record, so that user's next call asks them to connect again, and
//! (through the connector, `connections::revocation`) revokes its tokens at the
//! authorization server where it offers that.

use axum::extract::{Query, State};
use axum::routing::{get, post};
use axum::{Json, Router};
use serde::Deserialize;
use serde_json::{Value, json};

use mcpgate_store::{Vault as _, VaultKind};

use mcpgate_runtime::Principal;

use super::Failed;
use super::view::page_limit;
use crate::connections::connection_key;
use crate::error::GatewayError;
use crate::state::AppState;

pub(super) fn routes() -> Router<AppState> {
    Router::new().route("/admin/credentials", get(list)).route("/admin/credentials/revoke", post(revoke))
}

#[derive(Deserialize)]
struct ListQuery {
    principal: Option<String>,
    upstream: Option<String>,
    limit: Option<usize>,
    cursor: Option<String>,
}

async fn list(
    State(state): State<AppState>,
    query: Result<Query<ListQuery>, axum::extract::rejection::QueryRejection>,
) -> Result<Json<Value>, Failed> {
    // Text by design: the admin client is answered with the rejection as it is.
    let Query(query) = query.map_err(|e| GatewayError::AdminInvalid { detail: e.body_text() })?;
    let limit = page_limit(query.limit)?;
    let page = state
        .store
        .vault_list(VaultKind::Connection, query.principal.as_deref(), query.cursor.as_deref(), limit)
        .await?;
    let credentials: Vec<Value> = page
        .entries
        .iter()
        .filter(|e| query.upstream.as_deref().is_none_or(|u| u == e.name))
        .map(|e| {
            let meta: Value = serde_json::from_str(&e.meta).unwrap_or(Value::Null);
            let (issuer, subject) = Principal::parse_key(&e.scope).map_or(("", ""), |o| (o.issuer, o.subject));
            json!({
                "principal": e.scope, "issuer": issuer, "subject": subject, "upstream": e.name,
                "tokenIssuer": meta["issuer"], "scope": meta["scope"], "expiresAt": meta["expires_at"],
                "connectedAt": meta["connected_at"], "updatedAt": e.updated_ms, "version": e.version,
            })
        })
        .collect();
    Ok(Json(json!({ "credentials": credentials, "nextCursor": page.next })))
}

#[derive(Deserialize)]
struct RevokeBody {
    principal: String,
    upstream: String,
}

async fn revoke(State(state): State<AppState>, body: axum::body::Bytes) -> Result<Json<Value>, Failed> {
    // Text by design: the admin client is told what in its body does not decode.
    let body: RevokeBody = serde_json::from_slice(&body)
        .map_err(|e| GatewayError::AdminInvalid { detail: format!("expected {{\"principal\", \"upstream\"}}: {e}") })?;
    // Through the connector where the upstream is an oauth one here (its tokens are then
    // revoked at the authorization server too, RFC 7009); else the record alone.
    let revoked = match &state.connections {
        Some(connector) if connector.knows(&body.upstream) => {
            connector.disconnect(&body.principal, &body.upstream).await?
        }
        _ => state.store.vault_delete(&connection_key(&body.principal, &body.upstream)).await?,
    };
    if revoked {
        tracing::info!(upstream = %body.upstream, "an operator revoked a user's upstream connection");
    }
    Ok(Json(json!({ "revoked": revoked })))
}
