//! The security part of the metadata image: SCRAM credentials by user and
//! mechanism, and the set of ACL bindings.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use crate::error::ApplyError;
use crate::records::{MetadataRecord, Record};
use crate::security_records::{
    AccessControlEntryRecord, RemoveAccessControlEntryRecord, RemoveUserScramCredentialRecord,
    UserScramCredentialRecord,
};

/// SCRAM credentials and ACLs, as the metadata log left them.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SecurityImage {
    scram: Arc<BTreeMap<(String, i32), UserScramCredentialRecord>>,
    acls: Arc<BTreeSet<AccessControlEntryRecord>>,
}

impl SecurityImage {
    /// The credential of `user` for a mechanism code.
    pub fn scram_credential(
        &self,
        user: &str,
        mechanism: i32,
    ) -> Option<&UserScramCredentialRecord> {
        self.scram.get(&(user.to_owned(), mechanism))
    }

    /// Every SCRAM credential, by user then mechanism.
    pub fn scram_credentials(&self) -> impl Iterator<Item = &UserScramCredentialRecord> {
        self.scram.values()
    }

    /// Every ACL binding.
    pub fn acls(&self) -> impl Iterator<Item = &AccessControlEntryRecord> {
        self.acls.iter()
    }

    /// Whether the binding exists.
    pub fn has_acl(&self, acl: &AccessControlEntryRecord) -> bool {
        self.acls.contains(acl)
    }

    pub(crate) fn set_scram(
        &mut self,
        record: &UserScramCredentialRecord,
    ) -> Result<(), ApplyError> {
        Arc::make_mut(&mut self.scram)
            .insert((record.name.clone(), record.mechanism), record.clone());
        Ok(())
    }

    pub(crate) fn remove_scram(
        &mut self,
        record: &RemoveUserScramCredentialRecord,
    ) -> Result<(), ApplyError> {
        Arc::make_mut(&mut self.scram).remove(&(record.name.clone(), record.mechanism));
        Ok(())
    }

    pub(crate) fn add_acl(&mut self, record: &AccessControlEntryRecord) -> Result<(), ApplyError> {
        Arc::make_mut(&mut self.acls).insert(record.clone());
        Ok(())
    }

    pub(crate) fn remove_acl(
        &mut self,
        record: &RemoveAccessControlEntryRecord,
    ) -> Result<(), ApplyError> {
        if let Some(entry) = &record.entry {
            Arc::make_mut(&mut self.acls).remove(entry);
        }
        Ok(())
    }

    /// The records that rebuild this part of an image.
    pub(crate) fn snapshot_records(&self) -> impl Iterator<Item = MetadataRecord> + '_ {
        self.scram
            .values()
            .map(|record| MetadataRecord::new(Record::UserScramCredential(record.clone())))
            .chain(
                self.acls
                    .iter()
                    .map(|acl| MetadataRecord::new(Record::AccessControlEntry(acl.clone()))),
            )
    }
}
