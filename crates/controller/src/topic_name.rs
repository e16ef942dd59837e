//! Kafka's topic name rules.

use crate::error::TopicNameProblem;

/// The longest legal topic name, in characters (Kafka's limit).
pub const MAX_TOPIC_NAME_LENGTH: usize = 249;

/// Checks a topic name: 1 to 249 characters from `[a-zA-Z0-9._-]`, and
/// not `.` or `..`.
pub fn validate_topic_name(name: &str) -> Result<(), TopicNameProblem> {
    if name.is_empty() {
        return Err(TopicNameProblem::Empty);
    }
    if name == "." || name == ".." {
        return Err(TopicNameProblem::DotOrDotDot);
    }
    let length = name.chars().count();
    if length > MAX_TOPIC_NAME_LENGTH {
        return Err(TopicNameProblem::TooLong {
            length,
            max_length: MAX_TOPIC_NAME_LENGTH,
        });
    }
    if let Some(character) = name.chars().find(|character| {
        !(character.is_ascii_alphanumeric() || matches!(character, '.' | '_' | '-'))
    }) {
        return Err(TopicNameProblem::IllegalCharacter { character });
    }
    Ok(())
}

/// The name with `.` replaced by `_`: two topics whose names differ only
/// there collide in metric names, so Kafka refuses the second.
pub fn collision_key(name: &str) -> String {
    name.replace('.', "_")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn legal_names_pass() {
        for name in ["a", "orders", "Orders.v2", "a_b-c.d", "0", "..."] {
            assert_eq!(validate_topic_name(name), Ok(()), "{name}");
        }
        assert_eq!(validate_topic_name(&"x".repeat(249)), Ok(()));
    }

    #[test]
    fn empty_dot_and_dot_dot_fail() {
        assert_eq!(validate_topic_name(""), Err(TopicNameProblem::Empty));
        assert_eq!(validate_topic_name("."), Err(TopicNameProblem::DotOrDotDot));
        assert_eq!(
            validate_topic_name(".."),
            Err(TopicNameProblem::DotOrDotDot)
        );
    }

    #[test]
    fn too_long_fails() {
        assert_eq!(
            validate_topic_name(&"x".repeat(250)),
            Err(TopicNameProblem::TooLong {
                length: 250,
                max_length: 249
            })
        );
    }

    #[test]
    fn illegal_characters_fail() {
        for (name, character) in [
            ("a b", ' '),
            ("a/b", '/'),
            ("é", 'é'),
            ("a:b", ':'),
            ("a\0", '\0'),
        ] {
            assert_eq!(
                validate_topic_name(name),
                Err(TopicNameProblem::IllegalCharacter { character }),
                "{name:?}"
            );
        }
    }

    #[test]
    fn dots_and_underscores_collide() {
        assert_eq!(collision_key("a.b_c"), collision_key("a_b.c"));
        assert_ne!(collision_key("a.b"), collision_key("a-b"));
    }
}
