//! Kafka through `rdkafka`: the consumer-group source, the dead-letter producer, and the
//! replay publisher.

pub mod consumer;
pub mod producer;

use rdkafka::ClientConfig;
use rdkafka::config::RDKafkaLogLevel;

use crate::config::KafkaConfig;

/// Client settings shared by consumers and producers: ours first, then the pass-through
/// `kafka.properties` (which win).
pub fn client_config(config: &KafkaConfig, defaults: &[(&str, &str)]) -> ClientConfig {
    let mut client = ClientConfig::new();
    client.set("bootstrap.servers", &config.bootstrap_servers);
    for (key, value) in defaults {
        client.set(*key, *value);
    }
    for (key, value) in config.property_strings() {
        client.set(key, value);
    }
    client.set_log_level(RDKafkaLogLevel::Warning);
    client
}

/// librdkafka's log lines, into `tracing`.
pub(crate) fn log(level: RDKafkaLogLevel, facility: &str, message: &str) {
    use RDKafkaLogLevel::*;
    match level {
        Emerg | Alert | Critical | Error => {
            tracing::error!(target: "rdkafka", facility, "{message}")
        }
        Warning => tracing::warn!(target: "rdkafka", facility, "{message}"),
        Notice | Info => tracing::info!(target: "rdkafka", facility, "{message}"),
        Debug => tracing::debug!(target: "rdkafka", facility, "{message}"),
    }
}
