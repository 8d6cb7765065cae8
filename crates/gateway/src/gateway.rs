//! mcpgate as a library: [`Gateway::builder`] takes a [`Config`] (from a file, the
//! environment or code), Rust tools, prompts and resources are added to it, and the built
//! gateway serves a listener until a shutdown future resolves. Upstream servers from the
//! config and the Rust tools share one catalog; every replica built the same way serves the
//! same catalog, so tasks started on one run on any.
//!
//! Invariant: a config built in code is validated exactly as a loaded one before anything
//! starts.

use std::future::Future;
use std::net::SocketAddr;

use axum::Router;
use tokio::net::TcpListener;

use mcpgate_runtime::catalog::{CatalogBuilder, PromptHandler, ResourceHandler, Tool};

use crate::config::Config;
use crate::error::StartupError;
use crate::state::AppState;

/// A gateway ready to serve (see the module docs).
///
/// ```no_run
/// use mcpgate::{Config, Gateway, ToolError, typed_tool};
///
/// #[derive(serde::Deserialize, schemars::JsonSchema)]
/// struct Greet {
///     /// Who to greet.
///     name: String,
/// }
///
/// async fn greet(args: Greet) -> Result<String, ToolError> {
///     Ok(format!("Hello, {}!", args.name))
/// }
///
/// # async fn run() -> Result<(), Box<dyn std::error::Error>> {
/// let config = Config { toolset: vec![], ..Config::default() };
/// let gateway = Gateway::builder(config).tool(typed_tool("greet", "Greet someone.", greet)).build().await?;
/// let listener = tokio::net::TcpListener::bind("127.0.0.1:8080").await?;
/// gateway.serve(listener, mcpgate::shutdown::signal()).await?;
/// # Ok(())
/// # }
/// ```
#[derive(Debug, Clone)]
pub struct Gateway {
    state: AppState,
}

/// Collects a gateway's config and Rust tools (see [`Gateway::builder`]).
pub struct GatewayBuilder {
    config: Config,
    catalog: CatalogBuilder,
}

impl std::fmt::Debug for GatewayBuilder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("GatewayBuilder").field("config", &self.config).finish_non_exhaustive()
    }
}

impl Gateway {
    /// Starts building a gateway from `config`. Its `toolset` list still applies (the default
    /// serves the `demo` toolset; set `toolset: vec![]` to serve only what you add).
    pub fn builder(config: Config) -> GatewayBuilder {
        GatewayBuilder { config, catalog: CatalogBuilder::default() }
    }

    /// The replica's shared state (its store, catalog, metrics).
    pub fn state(&self) -> &AppState {
        &self.state
    }

    /// The HTTP router (`/mcp`, health and metrics endpoints), to mount or test in process.
    pub fn router(&self) -> Router {
        crate::serve::app(self.state.clone())
    }

    /// Serves `listener` until `shutdown` resolves, then shuts down gracefully: stops
    /// accepting, lets requests and task runs finish within `shutdown.grace_secs`, and hands
    /// the tasks still running to other replicas.
    pub async fn serve(
        self,
        listener: TcpListener,
        shutdown: impl Future<Output = ()> + Send + 'static,
    ) -> std::io::Result<()> {
        crate::serve::serve(listener, self.state, shutdown).await
    }

    /// Binds the configured `listen` address; returns the listener and the address bound (which
    /// differs from the configured one when its port is 0).
    pub async fn bind(&self) -> std::io::Result<(TcpListener, SocketAddr)> {
        let listener = TcpListener::bind(self.state.config.listen).await?;
        let addr = listener.local_addr()?;
        Ok((listener, addr))
    }
}

impl GatewayBuilder {
    /// Adds a tool: a [`typed_tool`](crate::typed_tool), a
    /// [`background_tool`](crate::background_tool), or any [`Tool`] (a resumable tool that asks
    /// for input returns `Outcome::NeedInput`).
    #[must_use]
    pub fn tool(mut self, tool: impl Tool) -> Self {
        self.catalog.tool(tool);
        self
    }

    /// Adds a prompt.
    #[must_use]
    pub fn prompt(mut self, prompt: impl PromptHandler) -> Self {
        self.catalog.prompt(prompt);
        self
    }

    /// Adds a resource or a resource template.
    #[must_use]
    pub fn resource(mut self, resource: impl ResourceHandler) -> Self {
        self.catalog.resource(resource);
        self
    }

    /// Validates the config, connects the store (Redis when `redis_url` or `store.sentinel` is set), starts the
    /// upstream connections and task workers, and builds the catalog. Fails on an invalid
    /// config, a store that cannot be reached, or two entries of one name.
    pub async fn build(self) -> Result<Gateway, StartupError> {
        self.config.validate()?;
        let catalog = self.catalog;
        let state = AppState::with_tools(self.config, move |builder| {
            builder.append(catalog);
        })
        .await?;
        Ok(Gateway { state })
    }
}
