//! A string that must not be printed: API keys, tokens, passwords.

use std::fmt;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// What [`Secret`] prints and serialises in place of its value (`check-config`, logs).
pub const REDACTED: &str = "<redacted>";

/// A secret from the configuration. `Debug` and `Serialize` (so `check-config` and any log
/// of a config) show [`REDACTED`] instead of the value; only [`Secret::expose`] gives it.
/// An empty secret shows as empty, so "not set" stays visible. Reading [`REDACTED`] back
/// (a `check-config` output used as a config file) is refused with a message, instead of
/// sending the placeholder as a credential.
#[derive(Clone, Default, PartialEq, Eq, Hash)]
pub struct Secret(String);

impl Secret {
    pub fn new(value: impl Into<String>) -> Self {
        Self(value.into())
    }

    /// The value, for the one place that sends it (an HTTP header, a client builder).
    pub fn expose(&self) -> &str {
        &self.0
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    fn shown(&self) -> &str {
        if self.0.is_empty() { "" } else { REDACTED }
    }
}

impl fmt::Debug for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:?}", self.shown())
    }
}

impl Serialize for Secret {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(self.shown())
    }
}

impl<'de> Deserialize<'de> for Secret {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let value = String::deserialize(deserializer)?;
        if value == REDACTED {
            return Err(serde::de::Error::custom(format!(
                "{REDACTED} is what check-config prints in place of a secret; set the real value (preferably from the environment)"
            )));
        }
        Ok(Self(value))
    }
}

impl From<&str> for Secret {
    fn from(value: &str) -> Self {
        Self::new(value)
    }
}

impl From<String> for Secret {
    fn from(value: String) -> Self {
        Self(value)
    }
}
