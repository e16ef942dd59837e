//! `strom configs describe|alter` for client quotas (kafka-configs.sh's
//! `--entity-type users|clients`, `--user`, `--client`), through
//! DescribeClientQuotas and AlterClientQuotas (KIP-546).

use strom_client::admin_quotas::{QuotaAlteration, QuotaEntityParts, QuotaEntry, QuotaMatch};
use strom_client::{AdminClient, ClientError};

use crate::cli::{ConfigsCommand, QuotaEntityArgs, QuotaEntityType};
use crate::context::parse_key_values;
use crate::error::ToolError;
use crate::output::Output;

const USER: &str = "user";
const CLIENT_ID: &str = "client-id";

/// Runs a `configs` command that names a client quota entity; `None` for
/// one that names a topic or broker.
pub async fn run(
    admin: &AdminClient,
    command: &ConfigsCommand,
    out: &mut Output,
) -> Option<Result<(), ToolError>> {
    Some(match command {
        ConfigsCommand::Describe { quota, json, .. } if given(quota) => {
            describe(admin, quota, *json, out).await
        }
        ConfigsCommand::Alter {
            quota,
            add_config,
            delete_config,
            ..
        } if given(quota) => alter(admin, quota, add_config, delete_config, out).await,
        _ => return None,
    })
}

/// Whether the arguments name a quota entity.
pub fn given(args: &QuotaEntityArgs) -> bool {
    matches!(
        args.entity_type,
        Some(QuotaEntityType::Users | QuotaEntityType::Clients)
    ) || args.user.is_some()
        || args.user_defaults
        || args.client.is_some()
        || args.client_defaults
}

/// One part of the entity: its type and how its name was given (`None`:
/// not given, which `describe` takes as "every entity of the type").
type Part = (&'static str, Option<Option<String>>);

/// The parts the arguments name, user first.
fn parts(args: &QuotaEntityArgs) -> Vec<Part> {
    let named = |name: &Option<String>, default: bool| match (name, default) {
        (Some(name), _) => Some(Some(name.clone())),
        (None, true) => Some(None),
        (None, false) => None,
    };
    match args.entity_type {
        Some(QuotaEntityType::Users) => vec![(USER, named(&args.entity_name, args.entity_default))],
        Some(QuotaEntityType::Clients) => {
            vec![(CLIENT_ID, named(&args.entity_name, args.entity_default))]
        }
        None | Some(QuotaEntityType::Brokers) => {
            let mut parts = Vec::with_capacity(2);
            if args.user.is_some() || args.user_defaults {
                parts.push((USER, named(&args.user, args.user_defaults)));
            }
            if args.client.is_some() || args.client_defaults {
                parts.push((CLIENT_ID, named(&args.client, args.client_defaults)));
            }
            parts
        }
    }
}

/// Kafka's words for an entity: `user-principal 'alice', client-id 'app'`.
pub fn describe_entity(entity: &QuotaEntityParts) -> String {
    entity
        .iter()
        .map(|(entity_type, name)| {
            let kind = if entity_type == USER {
                "user-principal"
            } else {
                entity_type.as_str()
            };
            match name {
                Some(name) => format!("{kind} '{name}'"),
                None => format!("the default {kind}"),
            }
        })
        .collect::<Vec<_>>()
        .join(", ")
}

fn refused(operation: &'static str, entity: &str, error: ClientError) -> ToolError {
    match error {
        ClientError::Broker { code } => ToolError::rejected(operation, entity, code),
        other => ToolError::client(operation, other),
    }
}

/// Shows the quotas of the entity (or, without a name, of every entity
/// of the type: named ones and the default).
pub async fn describe(
    admin: &AdminClient,
    args: &QuotaEntityArgs,
    json: bool,
    out: &mut Output,
) -> Result<(), ToolError> {
    let parts = parts(args);
    let mut filters: Vec<Vec<(String, QuotaMatch)>> = vec![Vec::new()];
    for (entity_type, name) in &parts {
        let matches = match name {
            Some(Some(name)) => vec![QuotaMatch::Exact(name.clone())],
            Some(None) => vec![QuotaMatch::Default],
            None => vec![QuotaMatch::Specified, QuotaMatch::Default],
        };
        filters = filters
            .into_iter()
            .flat_map(|filter| {
                matches.iter().map(move |matching| {
                    let mut filter = filter.clone();
                    filter.push(((*entity_type).to_owned(), matching.clone()));
                    filter
                })
            })
            .collect();
    }
    let mut entries: Vec<QuotaEntry> = Vec::new();
    for filter in &filters {
        let found = admin
            .describe_client_quotas(filter, true)
            .await
            .map_err(|error| refused("describe client quotas of", "the entity", error))?;
        entries.extend(found);
    }
    if json {
        let list: Vec<serde_json::Value> = entries.iter().map(entry_json).collect();
        return out.line(&serde_json::Value::Array(list).to_string());
    }
    entries.iter().try_for_each(|entry| {
        let values: Vec<String> = entry
            .values
            .iter()
            .map(|(key, value)| format!("{key}={value:?}"))
            .collect();
        out.line(&format!(
            "Quota configs for {} are {}",
            describe_entity(&entry.entity),
            values.join(", ")
        ))
    })
}

fn entry_json(entry: &QuotaEntry) -> serde_json::Value {
    let entity: serde_json::Map<String, serde_json::Value> = entry
        .entity
        .iter()
        .map(|(entity_type, name)| (entity_type.clone(), serde_json::json!(name)))
        .collect();
    serde_json::json!({ "entity": entity, "values": entry.values })
}

/// Sets and removes quotas of one entity.
pub async fn alter(
    admin: &AdminClient,
    args: &QuotaEntityArgs,
    add_config: &[String],
    delete_config: &[String],
    out: &mut Output,
) -> Result<(), ToolError> {
    let alteration = alteration(args, add_config, delete_config)?;
    let entity = describe_entity(&alteration.entity);
    let results = admin
        .alter_client_quotas(std::slice::from_ref(&alteration), false)
        .await
        .map_err(|error| refused("alter client quotas of", &entity, error))?;
    for result in results {
        result.map_err(|error| refused("alter client quotas of", &entity, error))?;
    }
    out.line(&format!("Completed updating config for {entity}."))
}

/// The alteration the arguments ask for: every part named, values numbers.
pub fn alteration(
    args: &QuotaEntityArgs,
    add_config: &[String],
    delete_config: &[String],
) -> Result<QuotaAlteration, ToolError> {
    let entity = parts(args)
        .into_iter()
        .map(|(entity_type, name)| {
            name.map(|name| (entity_type.to_owned(), name))
                .ok_or(ToolError::InvalidArgument {
                    what: "client quota entity",
                    text: entity_type.to_owned(),
                    expected: "a name or the default (--entity-name or --entity-default, --user-defaults, --client-defaults)",
                })
        })
        .collect::<Result<Vec<_>, _>>()?;
    let mut ops = Vec::new();
    for (key, value) in parse_key_values("--add-config", add_config)? {
        let number = value
            .trim()
            .parse::<f64>()
            .map_err(|_| ToolError::InvalidArgument {
                what: "--add-config",
                text: format!("{key}={value}"),
                expected: "a number for a client quota",
            })?;
        ops.push((key, Some(number)));
    }
    ops.extend(delete_config.iter().map(|key| (key.clone(), None)));
    if ops.is_empty() {
        return Err(ToolError::InvalidArgument {
            what: "configs alter",
            text: String::new(),
            expected: "--add-config or --delete-config",
        });
    }
    Ok(QuotaAlteration { entity, ops })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn entities_are_read_from_either_form() {
        let users = QuotaEntityArgs {
            entity_type: Some(QuotaEntityType::Users),
            entity_default: true,
            ..QuotaEntityArgs::default()
        };
        assert!(given(&users));
        let set = alteration(&users, &["producer_byte_rate=1048576".into()], &[]).expect("valid");
        assert_eq!(set.entity, vec![(USER.to_owned(), None)]);
        assert_eq!(
            set.ops,
            vec![("producer_byte_rate".to_owned(), Some(1_048_576.0))]
        );
        let both = QuotaEntityArgs {
            user: Some("alice".into()),
            client: Some("app".into()),
            ..QuotaEntityArgs::default()
        };
        let removal = alteration(&both, &[], &["consumer_byte_rate".into()]).expect("valid");
        assert_eq!(
            describe_entity(&removal.entity),
            "user-principal 'alice', client-id 'app'"
        );
        assert_eq!(removal.ops, vec![("consumer_byte_rate".to_owned(), None)]);
        assert!(!given(&QuotaEntityArgs::default()));
    }

    #[test]
    fn bad_alterations_are_refused_before_sending() {
        let clients = QuotaEntityArgs {
            entity_type: Some(QuotaEntityType::Clients),
            ..QuotaEntityArgs::default()
        };
        assert!(alteration(&clients, &["producer_byte_rate=1".into()], &[]).is_err());
        let named = QuotaEntityArgs {
            entity_name: Some("app".into()),
            ..clients
        };
        assert!(alteration(&named, &["producer_byte_rate=fast".into()], &[]).is_err());
        assert!(alteration(&named, &[], &[]).is_err());
    }
}
