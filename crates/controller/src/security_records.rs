//! Metadata records of security: SCRAM credentials and ACLs (record tags
//! 12 to 15 of [`Record`](crate::records::Record)). Only salted
//! credentials are recorded, never a password.

/// A user's SCRAM credential for one mechanism was set.
#[derive(Clone, PartialEq, Eq, ::prost::Message, serde::Serialize, serde::Deserialize)]
pub struct UserScramCredentialRecord {
    /// The user name.
    #[prost(string, tag = "1")]
    pub name: String,
    /// Kafka's mechanism code: 1 SCRAM-SHA-256, 2 SCRAM-SHA-512.
    #[prost(int32, tag = "2")]
    pub mechanism: i32,
    /// The salt.
    #[prost(bytes = "vec", tag = "3")]
    pub salt: Vec<u8>,
    /// `H(ClientKey)`.
    #[prost(bytes = "vec", tag = "4")]
    pub stored_key: Vec<u8>,
    /// `HMAC(SaltedPassword, "Server Key")`.
    #[prost(bytes = "vec", tag = "5")]
    pub server_key: Vec<u8>,
    /// PBKDF2 iterations.
    #[prost(uint32, tag = "6")]
    pub iterations: u32,
}

/// A user's SCRAM credential for one mechanism was deleted.
#[derive(Clone, PartialEq, Eq, ::prost::Message)]
pub struct RemoveUserScramCredentialRecord {
    /// The user name.
    #[prost(string, tag = "1")]
    pub name: String,
    /// Kafka's mechanism code.
    #[prost(int32, tag = "2")]
    pub mechanism: i32,
}

/// One access control entry on a resource pattern (a Kafka ACL binding).
/// The numbers are Kafka's `ResourceType`, `PatternType`, `AclOperation`
/// and `AclPermissionType` codes.
#[derive(
    Clone,
    PartialEq,
    Eq,
    Hash,
    PartialOrd,
    Ord,
    ::prost::Message,
    serde::Serialize,
    serde::Deserialize,
)]
pub struct AccessControlEntryRecord {
    /// Resource type (2 topic, 3 group, 4 cluster, 5 transactional id).
    #[prost(int32, tag = "1")]
    pub resource_type: i32,
    /// Resource name (or prefix); `*` is every resource of the type.
    #[prost(string, tag = "2")]
    pub resource_name: String,
    /// Pattern type (3 literal, 4 prefixed).
    #[prost(int32, tag = "3")]
    pub pattern_type: i32,
    /// Principal, `User:alice` (or `User:*`).
    #[prost(string, tag = "4")]
    pub principal: String,
    /// Host (`*` for any).
    #[prost(string, tag = "5")]
    pub host: String,
    /// Operation (2 ALL, 3 READ, 4 WRITE, ...).
    #[prost(int32, tag = "6")]
    pub operation: i32,
    /// Permission (2 DENY, 3 ALLOW).
    #[prost(int32, tag = "7")]
    pub permission_type: i32,
}

/// An ACL binding was removed (the same fields as when it was added).
#[derive(Clone, PartialEq, Eq, ::prost::Message)]
pub struct RemoveAccessControlEntryRecord {
    /// The binding removed.
    #[prost(message, optional, tag = "1")]
    pub entry: Option<AccessControlEntryRecord>,
}
