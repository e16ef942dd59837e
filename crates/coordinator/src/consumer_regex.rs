//! Regular-expression subscriptions of consumer-protocol members
//! (KIP-848's `SubscribedTopicRegex`): the pattern must match a whole topic
//! name, as Java's `Matcher.matches` (Kafka uses RE2/J) does, and internal
//! topics are never matched.

use regex::{Regex, RegexBuilder};

/// The largest compiled program a member's pattern may produce: patterns
/// come from the network.
const REGEX_SIZE_LIMIT_BYTES: usize = 1 << 20;

/// Internal topics a pattern never subscribes to.
const INTERNAL_TOPICS: [&str; 2] = ["__consumer_offsets", "__transaction_state"];

/// Compiles a subscription pattern anchored at both ends; `None` if it is
/// not a valid (or too large) regular expression.
pub fn compile_subscription(pattern: &str) -> Option<Regex> {
    RegexBuilder::new(&format!("^(?:{pattern})$"))
        .size_limit(REGEX_SIZE_LIMIT_BYTES)
        .build()
        .ok()
}

/// Whether a compiled subscription selects `topic`.
pub fn subscription_matches(regex: &Regex, topic: &str) -> bool {
    !INTERNAL_TOPICS.contains(&topic) && regex.is_match(topic)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn patterns_match_whole_names_only() {
        let regex = compile_subscription("orders-.*").expect("valid");
        assert!(subscription_matches(&regex, "orders-eu"));
        assert!(!subscription_matches(&regex, "old-orders-eu"));
        let exact = compile_subscription("a|b").expect("valid");
        assert!(subscription_matches(&exact, "b"));
        assert!(!subscription_matches(&exact, "ab"));
    }

    #[test]
    fn internal_topics_and_bad_patterns_are_left_out() {
        let everything = compile_subscription(".*").expect("valid");
        assert!(!subscription_matches(&everything, "__consumer_offsets"));
        assert!(compile_subscription("(unclosed").is_none());
        assert!(compile_subscription("a{1000}{1000}").is_none());
    }
}
