//! Gateway tokens: one per agent, a new launch's replacing the last, and a
//! token's hash leading back to its agent only.

use crate::conformance;

conformance! {
    fn a_token_hash_names_its_agent_and_a_new_launch_replaces_it(s) {
        s.set_gateway_token("builder-1", "hash-a").unwrap();
        s.set_gateway_token("builder-2", "hash-b").unwrap();
        assert_eq!(s.gateway_token("builder-1").unwrap().as_deref(), Some("hash-a"));
        assert_eq!(s.gateway_agent("hash-b").unwrap().as_deref(), Some("builder-2"));
        s.set_gateway_token("builder-1", "hash-c").unwrap();
        assert_eq!(s.gateway_agent("hash-a").unwrap(), None, "the old launch's token no longer acts");
        assert_eq!(s.gateway_agent("hash-c").unwrap().as_deref(), Some("builder-1"));
        assert_eq!(s.gateway_agent("unknown").unwrap(), None);
        assert_eq!(s.gateway_token("nobody").unwrap(), None);
    }
}

conformance! {
    fn an_agent_s_gateway_calls_are_counted_over_its_life(s) {
        let total = |agent: &str| {
            let seen = std::cell::Cell::new(None);
            let refused = s
                .count_call(agent, "troupe__board_list", &|c| {
                    seen.set(Some(c.total));
                    (c.total >= 3).then(|| format!("{} calls", c.total))
                })
                .unwrap();
            (seen.get().unwrap(), refused)
        };
        assert_eq!(total("builder-1"), (0, None));
        assert_eq!(total("builder-1"), (1, None));
        assert_eq!(total("builder-2"), (0, None), "each agent has its own count");
        assert_eq!(total("builder-1"), (2, None));
        assert_eq!(total("builder-1"), (3, Some("3 calls".into())), "a budget of 3 refuses the fourth");
        assert_eq!(total("builder-1"), (3, Some("3 calls".into())), "a refused call is not counted");
    }
}
