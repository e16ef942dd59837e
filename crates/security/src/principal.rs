//! Principals: who a connection is (`User:alice`), from SASL or from a
//! client certificate's subject through `ssl.principal.mapping.rules`.

use regex::Regex;

/// A Kafka principal, `TYPE:NAME` (`User:alice`).
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Principal {
    /// The type, `User` for every principal Strom makes.
    pub principal_type: String,
    /// The name.
    pub name: String,
}

impl Principal {
    /// A `User:` principal.
    pub fn user(name: impl Into<String>) -> Principal {
        Principal {
            principal_type: "User".to_owned(),
            name: name.into(),
        }
    }

    /// `User:ANONYMOUS`, the principal of unauthenticated connections.
    pub fn anonymous() -> Principal {
        Principal::user("ANONYMOUS")
    }

    /// Parses `TYPE:NAME` (the name may hold colons).
    pub fn parse(text: &str) -> Option<Principal> {
        let (principal_type, name) = text.split_once(':')?;
        (!principal_type.is_empty() && !name.is_empty()).then(|| Principal {
            principal_type: principal_type.to_owned(),
            name: name.to_owned(),
        })
    }
}

impl std::fmt::Display for Principal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}:{}", self.principal_type, self.name)
    }
}

/// One rule of `ssl.principal.mapping.rules`.
#[derive(Debug, Clone)]
enum Rule {
    /// The whole distinguished name.
    Default,
    /// `RULE:pattern/replacement/[LU]`: applies when the pattern matches the
    /// whole name.
    Replace {
        pattern: Regex,
        replacement: String,
        case: Option<char>,
    },
}

/// `ssl.principal.mapping.rules`: the first rule that applies maps a
/// certificate subject to a user name.
#[derive(Debug, Clone)]
pub struct MappingRules {
    text: String,
    rules: Vec<Rule>,
}

impl PartialEq for MappingRules {
    fn eq(&self, other: &Self) -> bool {
        self.text == other.text
    }
}

impl Eq for MappingRules {}

impl MappingRules {
    /// Parses the rules (`DEFAULT` and `RULE:...` items separated by commas).
    pub fn parse(text: &str) -> Result<MappingRules, &'static str> {
        let mut rules = Vec::new();
        let mut rest = text.trim_start_matches([',', ' ', '\t', '\n']);
        while !rest.is_empty() {
            if let Some(after) = rest.strip_prefix("DEFAULT") {
                rules.push(Rule::Default);
                rest = after;
            } else if let Some(after) = rest.strip_prefix("RULE:") {
                let (pattern, after) =
                    until_slash(after).ok_or("a RULE needs /pattern/replacement/")?;
                let (replacement, after) =
                    until_slash(after).ok_or("a RULE needs /pattern/replacement/")?;
                let (case, after) = match after.chars().next() {
                    Some(letter @ ('L' | 'U')) => (Some(letter), &after[1..]),
                    _ => (None, after),
                };
                let pattern = Regex::new(&format!("^(?:{pattern})$"))
                    .map_err(|_| "a RULE's pattern is not a valid regular expression")?;
                rules.push(Rule::Replace {
                    pattern,
                    replacement: replacement.replace("\\/", "/"),
                    case,
                });
                rest = after;
            } else {
                return Err("expected DEFAULT or RULE:pattern/replacement/[LU]");
            }
            rest = rest.trim_start_matches([',', ' ', '\t', '\n']);
        }
        if rules.is_empty() {
            return Err("at least one rule is required");
        }
        Ok(MappingRules {
            text: text.to_owned(),
            rules,
        })
    }

    /// The user name for a subject, or `None` when no rule applies.
    pub fn apply(&self, distinguished_name: &str) -> Option<String> {
        self.rules.iter().find_map(|rule| match rule {
            Rule::Default => Some(distinguished_name.to_owned()),
            Rule::Replace {
                pattern,
                replacement,
                case,
            } => {
                let captures = pattern.captures(distinguished_name)?;
                let mut name = String::new();
                captures.expand(replacement, &mut name);
                Some(match case {
                    Some('L') => name.to_lowercase(),
                    Some('U') => name.to_uppercase(),
                    _ => name,
                })
            }
        })
    }
}

/// The text up to the first unescaped `/`, and what follows it.
fn until_slash(text: &str) -> Option<(&str, &str)> {
    let bytes = text.as_bytes();
    let mut index = 0;
    while index < bytes.len() {
        match bytes[index] {
            b'\\' => index += 2,
            b'/' => return Some((&text[..index], &text[index + 1..])),
            _ => index += 1,
        }
    }
    None
}

/// One DER element: tag, contents, and what follows.
fn der_element(input: &[u8]) -> Option<(u8, &[u8], &[u8])> {
    let (&tag, rest) = input.split_first()?;
    let (&first, rest) = rest.split_first()?;
    let (length, rest) = if first < 0x80 {
        (usize::from(first), rest)
    } else {
        let count = usize::from(first & 0x7f);
        if count == 0 || count > 4 || rest.len() < count {
            return None;
        }
        let (digits, rest) = rest.split_at(count);
        let length = digits
            .iter()
            .fold(0usize, |length, &digit| (length << 8) | usize::from(digit));
        (length, rest)
    };
    if rest.len() < length {
        return None;
    }
    let (contents, rest) = rest.split_at(length);
    Some((tag, contents, rest))
}

/// The subject of a DER certificate in RFC 2253 form (`CN=a,O=b`, most
/// specific first), as Java's `X500Principal.getName()` gives it.
pub fn certificate_subject(certificate: &[u8]) -> Option<String> {
    let (_, certificate, _) = der_element(certificate)?;
    let (_, tbs, _) = der_element(certificate)?;
    let mut fields = tbs;
    let (tag, _, rest) = der_element(fields)?;
    if tag == 0xa0 {
        fields = rest; // [0] version
    }
    // serial, signature algorithm, issuer, validity, then the subject.
    for _ in 0..4 {
        fields = der_element(fields)?.2;
    }
    let (_, subject, _) = der_element(fields)?;
    let mut names = Vec::new();
    let mut rdns = subject;
    while !rdns.is_empty() {
        let (_, set, rest) = der_element(rdns)?;
        rdns = rest;
        let mut attributes = Vec::new();
        let mut items = set;
        while !items.is_empty() {
            let (_, pair, rest) = der_element(items)?;
            items = rest;
            let (_, oid, value) = der_element(pair)?;
            let (value_tag, value, _) = der_element(value)?;
            attributes.push(format!(
                "{}={}",
                attribute_name(oid),
                attribute_value(value_tag, value)
            ));
        }
        names.push(attributes.join("+"));
    }
    names.reverse();
    Some(names.join(","))
}

fn attribute_name(oid: &[u8]) -> String {
    match oid {
        [0x55, 0x04, 0x03] => "CN".to_owned(),
        [0x55, 0x04, 0x06] => "C".to_owned(),
        [0x55, 0x04, 0x07] => "L".to_owned(),
        [0x55, 0x04, 0x08] => "ST".to_owned(),
        [0x55, 0x04, 0x09] => "STREET".to_owned(),
        [0x55, 0x04, 0x0a] => "O".to_owned(),
        [0x55, 0x04, 0x0b] => "OU".to_owned(),
        [0x09, 0x92, 0x26, 0x89, 0x93, 0xf2, 0x2c, 0x64, 0x01, 0x19] => "DC".to_owned(),
        [0x09, 0x92, 0x26, 0x89, 0x93, 0xf2, 0x2c, 0x64, 0x01, 0x01] => "UID".to_owned(),
        _ => dotted_oid(oid),
    }
}

fn dotted_oid(oid: &[u8]) -> String {
    let mut parts = Vec::new();
    let mut value: u64 = 0;
    for (index, &byte) in oid.iter().enumerate() {
        value = (value << 7) | u64::from(byte & 0x7f);
        if byte & 0x80 == 0 {
            if index == 0 || parts.is_empty() {
                let first = (value / 40).min(2);
                parts.push(first.to_string());
                parts.push((value - first * 40).to_string());
            } else {
                parts.push(value.to_string());
            }
            value = 0;
        }
    }
    parts.join(".")
}

fn attribute_value(tag: u8, value: &[u8]) -> String {
    // UTF8String, PrintableString, IA5String, TeletexString, BMPString is rare.
    let text = match tag {
        0x0c | 0x13 | 0x16 | 0x14 => std::str::from_utf8(value).ok(),
        _ => None,
    };
    match text {
        Some(text) => escape_value(text),
        None => std::iter::once('#'.to_string())
            .chain(std::iter::once(format!("{tag:02x}{:02x}", value.len())))
            .chain(value.iter().map(|byte| format!("{byte:02x}")))
            .collect(),
    }
}

fn escape_value(text: &str) -> String {
    let mut escaped = String::with_capacity(text.len());
    for (index, character) in text.chars().enumerate() {
        let leading = index == 0 && (character == ' ' || character == '#');
        let trailing = index + 1 == text.chars().count() && character == ' ';
        if leading || trailing || ",+\"\\<>;".contains(character) {
            escaped.push('\\');
        }
        escaped.push(character);
    }
    escaped
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn default_keeps_the_whole_name() {
        let rules = MappingRules::parse("DEFAULT").expect("valid");
        assert_eq!(rules.apply("CN=a,O=b").as_deref(), Some("CN=a,O=b"));
    }

    #[test]
    fn the_first_matching_rule_applies() {
        let rules = MappingRules::parse(
            "RULE:^CN=(.*?),OU=ServiceUsers.*$/$1/,RULE:^CN=(.*?),O=(.*)$/$1@$2/L, DEFAULT",
        )
        .expect("valid");
        assert_eq!(
            rules.apply("CN=kafka,OU=ServiceUsers,O=Org").as_deref(),
            Some("kafka")
        );
        assert_eq!(rules.apply("CN=Bob,O=Org").as_deref(), Some("bob@org"));
        assert_eq!(rules.apply("OU=x").as_deref(), Some("OU=x"));
        let strict = MappingRules::parse("RULE:^CN=(.*)$/$1/U").expect("valid");
        assert_eq!(strict.apply("O=x"), None);
        assert_eq!(strict.apply("CN=ab").as_deref(), Some("AB"));
    }

    #[test]
    fn malformed_rules_are_refused() {
        for text in ["", "RULE:abc", "RULE:(/x/", "SOMETHING"] {
            assert!(MappingRules::parse(text).is_err(), "{text}");
        }
    }

    #[test]
    fn principals_parse_and_print() {
        let principal = Principal::parse("User:CN=a:b").expect("valid");
        assert_eq!(principal.name, "CN=a:b");
        assert_eq!(principal.to_string(), "User:CN=a:b");
        assert_eq!(Principal::parse("alice"), None);
    }

    #[test]
    fn subjects_read_from_generated_certificates() {
        let mut params = rcgen::CertificateParams::new(vec!["localhost".to_owned()]).expect("p");
        let mut name = rcgen::DistinguishedName::new();
        name.push(rcgen::DnType::CountryName, "US");
        name.push(rcgen::DnType::OrganizationName, "Strom, Inc");
        name.push(rcgen::DnType::CommonName, "client-1");
        params.distinguished_name = name;
        let key = rcgen::KeyPair::generate().expect("key");
        let certificate = params.self_signed(&key).expect("certificate");
        assert_eq!(
            certificate_subject(certificate.der()).as_deref(),
            Some("CN=client-1,O=Strom\\, Inc,C=US")
        );
        assert_eq!(certificate_subject(&certificate.der()[..40]), None);
        assert_eq!(
            dotted_oid(&[0x2a, 0x86, 0x48, 0x86, 0xf7, 0x0d]),
            "1.2.840.113549"
        );
    }
}
