//! Broker start-up failures keep their cause: the error says which step
//! failed and its source chain names the underlying problem.

use std::error::Error as _;

use strom_broker::StartError;

use crate::common;

use common::config;

/// The error and every source below it, one message each.
fn chain(error: &StartError) -> Vec<String> {
    let mut messages = vec![error.to_string()];
    let mut source = error.source();
    while let Some(cause) = source {
        messages.push(cause.to_string());
        source = cause.source();
    }
    messages
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_log_directory_that_cannot_be_loaded_names_the_cause() {
    let dir = tempfile::tempdir().unwrap();
    // A segment that is a directory: the partition's log cannot be read.
    std::fs::create_dir_all(dir.path().join("broken-0/00000000000000000000.log")).unwrap();
    let error = match strom_broker::start(config(dir.path(), &[])).await {
        Ok(broker) => {
            broker.shutdown().await;
            panic!("an unreadable partition must stop the start");
        }
        Err(error) => error,
    };
    assert!(matches!(error, StartError::Storage(_)), "{error:?}");
    let messages = chain(&error);
    assert_eq!(messages[0], "cannot open the partition logs");
    assert!(
        messages.iter().any(|message| message.contains("broken-0")),
        "{messages:#?}"
    );
    assert!(
        !messages
            .iter()
            .any(|message| message.contains("registration")),
        "{messages:#?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unusable_listener_host_names_the_key_and_the_problem() {
    let dir = tempfile::tempdir().unwrap();
    let error = match strom_broker::start(config(
        dir.path(),
        &[("listeners", "PLAINTEXT://example.invalid:0")],
    ))
    .await
    {
        Ok(broker) => {
            broker.shutdown().await;
            panic!("a host name that is not an address must stop the start");
        }
        Err(error) => error,
    };
    assert!(
        matches!(
            &error,
            StartError::Config(strom_broker::ConfigError::Invalid {
                key,
                problem: strom_broker::error::ValueProblem::ListenerHost,
                ..
            }) if key == "listeners"
        ),
        "{error:?}"
    );
}
