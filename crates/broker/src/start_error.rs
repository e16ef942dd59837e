//! Why a broker could not start, and the steps of its registration that a
//! start-up error names.

use std::net::SocketAddr;
use std::path::PathBuf;

use strom_config::meta_properties;
use strom_observability::BindError;

/// Why a broker could not start.
#[derive(Debug, thiserror::Error)]
pub enum StartError {
    /// A data directory could not be created.
    #[error("cannot create data directory {path}")]
    CreateDirectory {
        /// The directory.
        path: PathBuf,
        /// The cause.
        #[source]
        source: std::io::Error,
    },
    /// `meta.properties` problems.
    #[error(transparent)]
    MetaProperties(#[from] meta_properties::MetaPropertiesError),
    /// The metadata log could not be opened.
    #[error("cannot open the metadata log")]
    Metadata(#[source] strom_controller::error::LogError),
    /// The node's member of the metadata quorum did not start.
    #[error("cannot start the metadata quorum member")]
    Quorum {
        /// Why.
        #[source]
        source: Box<strom_controller::quorum::QuorumStartError>,
    },
    /// `process.roles` has no broker role: such a node is started with
    /// [`crate::cluster_node::RunningController::start`] (the launcher
    /// does so).
    #[error("process.roles has no broker role")]
    NotABroker,
    /// The controller refused a step of the broker's registration.
    #[error("the controller refused the broker's {step}")]
    ControllerRefused {
        /// The step.
        step: RegistrationStep,
        /// The controller's answer.
        #[source]
        source: strom_controller::error::ControllerError,
    },
    /// The controller failed (its log or task) during a step of the
    /// broker's registration.
    #[error("the controller failed during the broker's {step}")]
    ControllerFailed {
        /// The step.
        step: RegistrationStep,
        /// The controller's failure.
        #[source]
        source: strom_controller::error::RuntimeError,
    },
    /// The partition logs could not be opened.
    #[error("cannot open the partition logs")]
    Storage(#[source] strom_storage::error::ManagerError),
    /// Opening the partition logs panicked (or its task was cancelled).
    #[error("opening the partition logs panicked")]
    StoragePanicked(#[source] tokio::task::JoinError),
    /// Tiered storage is on but its settings or its remote store are unusable.
    #[error("cannot start tiered storage")]
    RemoteStorage(#[source] strom_storage::error::RemoteStorageError),
    /// The configuration is unusable (for example a listener host).
    #[error(transparent)]
    Config(#[from] crate::error::ConfigError),
    /// The producer id counter could not be loaded.
    #[error(transparent)]
    ProducerIds(#[from] strom_controller::error::ProducerIdError),
    /// A listener's TLS could not be set up.
    #[error(transparent)]
    Security(#[from] strom_security::SecurityError),
    /// Binding a listener failed.
    #[error("cannot listen on {address}")]
    Bind {
        /// The address.
        address: SocketAddr,
        /// The cause.
        #[source]
        source: std::io::Error,
    },
}

impl From<BindError> for StartError {
    fn from(error: BindError) -> StartError {
        StartError::Bind {
            address: error.address,
            source: error.source,
        }
    }
}

/// A step of a broker's registration with the controller.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RegistrationStep {
    /// The BrokerRegistration request.
    Registration,
    /// Catching up with the metadata log (joining the quorum as an
    /// observer, then applying the log up to the registration).
    CatchUp,
    /// The first heartbeat, which unfences the broker.
    FirstHeartbeat,
}

impl std::fmt::Display for RegistrationStep {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            RegistrationStep::Registration => "registration",
            RegistrationStep::CatchUp => "catch-up with the metadata log",
            RegistrationStep::FirstHeartbeat => "first heartbeat",
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn start_errors_name_their_step_and_keep_their_cause() {
        use std::error::Error as _;
        let join = tokio::task::spawn_blocking(|| panic!("segment unreadable"))
            .await
            .unwrap_err();
        let error = StartError::StoragePanicked(join);
        assert_eq!(error.to_string(), "opening the partition logs panicked");
        assert!(error
            .source()
            .is_some_and(|source| source.to_string().contains("panic")));
        let error = StartError::ControllerRefused {
            step: RegistrationStep::FirstHeartbeat,
            source: strom_controller::error::ControllerError::BrokerNotRegistered { broker_id: 3 },
        };
        assert_eq!(
            error.to_string(),
            "the controller refused the broker's first heartbeat"
        );
        assert_eq!(
            error.source().map(ToString::to_string).as_deref(),
            Some("broker 3 is not registered")
        );
    }
}
