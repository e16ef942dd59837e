//! SCRAM credentials and ACLs: each change is one record; the broker
//! validates requests and decides which bindings a filter matches.

use super::{Controller, ControllerResult, Pending};
use crate::error::ApplyError;
use crate::image::MetadataImage;
use crate::records::{MetadataRecord, Record};
use crate::security_records::{
    AccessControlEntryRecord, RemoveAccessControlEntryRecord, RemoveUserScramCredentialRecord,
    UserScramCredentialRecord,
};

/// One change of AlterUserScramCredentials.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub enum ScramChange {
    /// Set a credential (already salted and derived).
    Upsert(UserScramCredentialRecord),
    /// Delete a user's credential for a mechanism code.
    Delete {
        /// The user.
        name: String,
        /// The mechanism code.
        mechanism: i32,
    },
}

impl Controller {
    /// Applies SCRAM credential changes in order; each result says whether
    /// the change applied (deleting a credential that does not exist does
    /// not).
    pub fn alter_scram_credentials(
        &mut self,
        image: &MetadataImage,
        changes: &[ScramChange],
    ) -> Result<ControllerResult<Vec<bool>>, ApplyError> {
        let mut pending = Pending::new(image);
        let mut applied = Vec::with_capacity(changes.len());
        for change in changes {
            let record = match change {
                ScramChange::Upsert(record) => Record::UserScramCredential(record.clone()),
                ScramChange::Delete { name, mechanism } => {
                    if pending
                        .image
                        .security()
                        .scram_credential(name, *mechanism)
                        .is_none()
                    {
                        applied.push(false);
                        continue;
                    }
                    Record::RemoveUserScramCredential(RemoveUserScramCredentialRecord {
                        name: name.clone(),
                        mechanism: *mechanism,
                    })
                }
            };
            pending.push(vec![MetadataRecord::new(record)])?;
            applied.push(true);
        }
        Ok(pending.finish(applied, false))
    }

    /// Adds and removes ACL bindings. Adding a binding that exists, or
    /// removing one that does not, writes nothing.
    pub fn alter_acls(
        &mut self,
        image: &MetadataImage,
        additions: &[AccessControlEntryRecord],
        removals: &[AccessControlEntryRecord],
    ) -> Result<ControllerResult<()>, ApplyError> {
        let mut pending = Pending::new(image);
        for acl in additions {
            if !pending.image.security().has_acl(acl) {
                pending.push(vec![MetadataRecord::new(Record::AccessControlEntry(
                    acl.clone(),
                ))])?;
            }
        }
        for acl in removals {
            if pending.image.security().has_acl(acl) {
                pending.push(vec![MetadataRecord::new(Record::RemoveAccessControlEntry(
                    RemoveAccessControlEntryRecord {
                        entry: Some(acl.clone()),
                    },
                ))])?;
            }
        }
        Ok(pending.finish((), false))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::controller::ControllerConfig;
    use strom_clock::SeededRandom;

    fn credential(name: &str, mechanism: i32) -> UserScramCredentialRecord {
        UserScramCredentialRecord {
            name: name.to_owned(),
            mechanism,
            salt: vec![1, 2],
            stored_key: vec![3],
            server_key: vec![4],
            iterations: 4096,
        }
    }

    fn acl(name: &str) -> AccessControlEntryRecord {
        AccessControlEntryRecord {
            resource_type: 2,
            resource_name: name.to_owned(),
            pattern_type: 3,
            principal: "User:alice".to_owned(),
            host: "*".to_owned(),
            operation: 3,
            permission_type: 3,
        }
    }

    fn apply(image: &MetadataImage, records: &[MetadataRecord]) -> MetadataImage {
        let base = image.next_offset();
        image
            .clone()
            .into_applied(
                records
                    .iter()
                    .enumerate()
                    .map(|(index, record)| (base + index as u64, record)),
            )
            .expect("applies")
    }

    #[test]
    fn credentials_are_set_replaced_and_deleted_and_survive_a_snapshot() {
        let mut controller = Controller::new(
            ControllerConfig::default(),
            std::sync::Arc::new(SeededRandom::new(1)),
        );
        let image = MetadataImage::empty();
        let result = controller
            .alter_scram_credentials(
                &image,
                &[
                    ScramChange::Upsert(credential("alice", 1)),
                    ScramChange::Upsert(credential("alice", 2)),
                    ScramChange::Delete {
                        name: "bob".into(),
                        mechanism: 1,
                    },
                ],
            )
            .expect("planned");
        assert_eq!(result.response, vec![true, true, false]);
        let image = apply(&image, &result.records);
        assert_eq!(
            image.security().scram_credential("alice", 2),
            Some(&credential("alice", 2))
        );
        let rebuilt = MetadataImage::from_snapshot_records(9, image.to_snapshot_records().iter())
            .expect("rebuilt");
        assert_eq!(rebuilt.security(), image.security());
        let result = controller
            .alter_scram_credentials(
                &image,
                &[ScramChange::Delete {
                    name: "alice".into(),
                    mechanism: 1,
                }],
            )
            .expect("planned");
        let image = apply(&image, &result.records);
        assert!(image.security().scram_credential("alice", 1).is_none());
        assert!(image.security().scram_credential("alice", 2).is_some());
    }

    #[test]
    fn acls_are_added_once_and_removed() {
        let mut controller = Controller::new(
            ControllerConfig::default(),
            std::sync::Arc::new(SeededRandom::new(1)),
        );
        let image = MetadataImage::empty();
        let result = controller
            .alter_acls(&image, &[acl("a"), acl("a"), acl("b")], &[])
            .expect("planned");
        assert_eq!(result.records.len(), 2);
        let image = apply(&image, &result.records);
        assert_eq!(image.security().acls().count(), 2);
        let rebuilt = MetadataImage::from_snapshot_records(9, image.to_snapshot_records().iter())
            .expect("rebuilt");
        assert_eq!(rebuilt.security(), image.security());
        let result = controller
            .alter_acls(&image, &[], &[acl("a"), acl("c")])
            .expect("planned");
        assert_eq!(result.records.len(), 1);
        let image = apply(&image, &result.records);
        assert_eq!(
            image.security().acls().cloned().collect::<Vec<_>>(),
            vec![acl("b")]
        );
    }
}
