//! `cargo bench -p troupe-gateway`: the cost of a permission check with 100
//! roles and 1,000 tools, and the latency the gateway adds to a `tools/call`
//! compared with calling the same in-process backend directly.

use std::collections::BTreeMap;
use std::hint::black_box;
use std::time::{Duration, Instant};

use troupe_core::rbac::policy::Policy;
use troupe_core::rbac::skill::Skill;

fn policy_100_roles() -> (Policy, Vec<String>) {
    let mut skills = Vec::new();
    for r in 0..100 {
        let tools: Vec<String> = (0..10).map(|t| format!("  - server{}__tool{}", r % 10, r * 10 + t)).collect();
        let text = format!(
            "---\nid: skill{r}\nallowedRoles: [role{r}]\nallowedTools:\n{}\n  - server{}__*\ndeniedTools: [server{}__tool{}]\n---\n",
            tools.join("\n"),
            (r + 1) % 10,
            r % 10,
            r * 10
        );
        skills.push(Skill::parse(&text).expect("bench skill"));
    }
    let tools: Vec<String> = (0..1000).map(|t| format!("server{}__tool{t}", t % 10)).collect();
    (Policy::build(skills, &BTreeMap::new()).expect("bench policy"), tools)
}

fn bench_permission_check() {
    let (policy, tools) = policy_100_roles();
    let roles: Vec<String> = (0..100).map(|r| format!("role{r}")).collect();
    let n = 1_000_000;
    let start = Instant::now();
    let mut allowed = 0usize;
    for i in 0..n {
        let role = &roles[i % roles.len()];
        // Half the calls hit the role's `server__*` grant, half a mostly foreign exact name.
        let t = if i % 2 == 0 { (i * 7) % tools.len() } else { ((i * 13) % 100) * 10 + (i % 100 + 1) % 10 };
        let tool = &tools[t];
        allowed += usize::from(black_box(policy.check_tool(role, tool)).is_allowed());
    }
    let per = start.elapsed() / n as u32;
    println!("permission check (100 roles, 1,000 tools): {} ns per check ({allowed} of {n} allowed)", per.as_nanos());
}

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    sorted[((sorted.len() as f64 - 1.0) * p).round() as usize]
}

fn main() {
    bench_permission_check();
    let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().expect("runtime");
    rt.block_on(proxy::bench());
}

mod proxy {
    use std::sync::Arc;
    use std::time::{Duration, Instant};

    use rmcp::model::{
        CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock, JsonObject, ListToolsResult,
        PaginatedRequestParams, ServerCapabilities, ServerConfig, Tool,
    };
    use rmcp::service::{RequestContext, RunningService};
    use rmcp::{ErrorData, RoleClient, RoleServer, ServerHandler, ServiceExt};
    use troupe_gateway::server::GatewayHandler;
    use troupe_gateway::{Gateway, GatewayParts, Session};

    use super::percentile;

    /// The trivial backend: one tool that answers at once.
    struct Trivial;

    impl ServerHandler for Trivial {
        fn get_info(&self) -> ServerConfig {
            ServerConfig::new(ServerCapabilities::builder().enable_tools().build())
        }

        async fn list_tools(
            &self,
            _r: Option<PaginatedRequestParams>,
            _c: RequestContext<RoleServer>,
        ) -> Result<ListToolsResult, ErrorData> {
            Ok(ListToolsResult::with_all_items(vec![Tool::new("ping", "answers pong", Arc::new(JsonObject::new()))]))
        }

        async fn call_tool(
            &self,
            _r: CallToolRequestParams,
            _c: RequestContext<RoleServer>,
        ) -> Result<CallToolResponse, ErrorData> {
            Ok(CallToolResult::success(vec![ContentBlock::text("pong")]).into())
        }
    }

    async fn serve<S: ServerHandler>(handler: S) -> tokio::io::DuplexStream {
        let (client, server) = tokio::io::duplex(1 << 20);
        tokio::spawn(async move {
            if let Ok(running) = handler.serve(server).await {
                let _ = running.waiting().await;
            }
        });
        client
    }

    async fn timed(client: &RunningService<RoleClient, ()>, name: &str, n: usize) -> Vec<Duration> {
        let mut times = Vec::with_capacity(n);
        for _ in 0..n {
            let start = Instant::now();
            let r = client.peer().call_tool(CallToolRequestParams::new(name.to_string())).await.expect("call");
            times.push(start.elapsed());
            assert_ne!(r.is_error, Some(true), "{r:?}");
        }
        times.sort();
        times
    }

    async fn gateway_client(
        policy: troupe_core::rbac::policy::Policy,
        store: Option<Arc<dyn troupe_store::Store>>,
    ) -> RunningService<RoleClient, ()> {
        gateway_client_with(policy, store, Default::default()).await
    }

    /// A client of a gateway in front of the trivial backend, all in process.
    async fn gateway_client_with(
        policy: troupe_core::rbac::policy::Policy,
        store: Option<Arc<dyn troupe_store::Store>>,
        limits: std::collections::BTreeMap<String, troupe_core::config::RateLimit>,
    ) -> RunningService<RoleClient, ()> {
        let mut gateway = Gateway::new(GatewayParts {
            policy,
            servers: Default::default(),
            limits,
            store,
            memory: None,
            root: None,
            audit_values: false,
            connect_timeout: Duration::from_secs(5),
            call_timeout: Duration::from_secs(5),
        });
        gateway.backends.attach("trivial", serve(Trivial).await).await.expect("attach");
        let handler = GatewayHandler::new(Arc::new(gateway), Arc::new(Session::new("bench-agent", "bench")));
        ().serve(serve(handler).await).await.expect("gateway client")
    }

    pub async fn bench() {
        // Direct: client -> trivial backend.
        let direct = ().serve(serve(Trivial).await).await.expect("direct client");
        // Through the gateway: client -> gateway -> trivial backend, both in process.
        let skill = troupe_core::rbac::skill::Skill::parse(
            "---\nid: b\nallowedRoles: [bench]\nallowedTools: [trivial__ping]\n---\n",
        )
        .expect("skill");
        let policy = troupe_core::rbac::policy::Policy::build(vec![skill], &Default::default()).expect("policy");
        let through = gateway_client(policy.clone(), None).await;
        // As in a project: rate limits counted and calls audited in the store.
        let dir = tempfile::tempdir().expect("temp dir");
        let store: Arc<dyn troupe_store::Store> =
            Arc::new(troupe_store::SqliteStore::open(&dir.path().join("troupe.db")).expect("store"));
        let limits = [(
            "bench".to_string(),
            troupe_core::config::RateLimit { per_minute: Some(u32::MAX), ..Default::default() },
        )];
        let stored = gateway_client_with(policy.clone(), Some(store.clone()), limits.into()).await;
        // The default config: no rate limits, so calls are only audited.
        let audited = gateway_client(policy, Some(store)).await;

        let n = 5_000;
        timed(&direct, "ping", 500).await;
        timed(&through, "trivial__ping", 500).await;
        let d = timed(&direct, "ping", n).await;
        let g = timed(&through, "trivial__ping", n).await;
        timed(&stored, "trivial__ping", 500).await;
        let st = timed(&stored, "trivial__ping", n).await;
        timed(&audited, "trivial__ping", 500).await;
        let au = timed(&audited, "trivial__ping", n).await;
        let us = |x: Duration| x.as_secs_f64() * 1e6;
        println!(
            "tools/call direct:          p50 {:.1} µs  p99 {:.1} µs",
            us(percentile(&d, 0.5)),
            us(percentile(&d, 0.99))
        );
        println!(
            "tools/call via gateway:     p50 {:.1} µs  p99 {:.1} µs",
            us(percentile(&g, 0.5)),
            us(percentile(&g, 0.99))
        );
        println!("added latency (p50):        {:.1} µs", us(percentile(&g, 0.5)) - us(percentile(&d, 0.5)));
        println!(
            "via gateway, audited only:  p50 {:.1} µs  p99 {:.1} µs (no rate limits: the audit row in SQLite)",
            us(percentile(&au, 0.5)),
            us(percentile(&au, 0.99))
        );
        println!(
            "via gateway with a store:   p50 {:.1} µs  p99 {:.1} µs (calls counted and audited in SQLite)",
            us(percentile(&st, 0.5)),
            us(percentile(&st, 0.99))
        );

        // Sustained calls per second through one connection, 16 in flight.
        let through = Arc::new(through);
        let total = 20_000;
        let start = Instant::now();
        let mut tasks = Vec::new();
        for _ in 0..16 {
            let client = through.clone();
            tasks.push(tokio::spawn(async move {
                for _ in 0..total / 16 {
                    client.peer().call_tool(CallToolRequestParams::new("trivial__ping")).await.expect("call");
                }
            }));
        }
        for t in tasks {
            t.await.expect("task");
        }
        let rate = (total / 16 * 16) as f64 / start.elapsed().as_secs_f64();
        println!("sustained through one connection (16 in flight): {rate:.0} calls/s");
    }
}
