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
