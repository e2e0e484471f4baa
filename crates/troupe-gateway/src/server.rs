//! The MCP face of the gateway: an rmcp [`ServerHandler`] per client
//! connection, over a shared [`Gateway`] and the connection's [`Session`].

use std::sync::Arc;

use rmcp::model::{
    CallToolRequestParams, CallToolResponse, Implementation, ListToolsResult, PaginatedRequestParams,
    ServerCapabilities, ServerConfig, SubscriptionFilter,
};
use rmcp::service::{RequestContext, SubscriptionContext};
use rmcp::{ErrorData as McpError, RoleServer, ServerHandler};

use crate::gateway::Gateway;
use crate::session::Session;

/// One client connection.
#[derive(Clone)]
pub struct GatewayHandler {
    gateway: Arc<Gateway>,
    session: Arc<Session>,
}

impl GatewayHandler {
    /// A handler for `session` on `gateway`.
    pub fn new(gateway: Arc<Gateway>, session: Arc<Session>) -> GatewayHandler {
        GatewayHandler { gateway, session }
    }

    /// Watches the backends' tool lists for the life of the session and tells
    /// the client when what it sees changed.
    pub fn watch_backends(&self) -> tokio::task::JoinHandle<()> {
        let gateway = self.gateway.clone();
        let session = self.session.clone();
        let mut changes = gateway.backends.subscribe_changes();
        tokio::spawn(async move {
            while let Ok(_) | Err(tokio::sync::broadcast::error::RecvError::Lagged(_)) = changes.recv().await {
                gateway.refresh(&session).await;
            }
        })
    }
}

impl ServerHandler for GatewayHandler {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(ServerCapabilities::builder().enable_tools().enable_tool_list_changed().build())
            .with_server_info(Implementation::new("troupe", env!("CARGO_PKG_VERSION")))
            .with_instructions(
                "troupe's MCP gateway. Tools are filtered by your role; `set_role` switches role within the one you were started with.",
            )
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, McpError> {
        self.session.remember_peer(&context.peer);
        let tools = self.gateway.visible_tools(&self.session.role()).await;
        self.session.update_visible(tools.iter().map(|t| t.name.to_string()).collect());
        Ok(ListToolsResult::with_all_items(tools))
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, McpError> {
        self.session.remember_peer(&context.peer);
        Ok(self.gateway.call(&self.session, &request.name, request.arguments).await.into())
    }

    fn accepted_subscription_filter(&self, requested: &SubscriptionFilter) -> Option<SubscriptionFilter> {
        let mut accepted = SubscriptionFilter::new();
        accepted.tools_list_changed = requested.tools_list_changed;
        Some(accepted)
    }

    async fn listen(&self, context: SubscriptionContext) -> Result<(), McpError> {
        self.session.add_sink(context.sink().clone()).await;
        context.cancelled().await;
        Ok(())
    }
}
