//! Catalog changes announced to every replica: a list (tools, prompts, resources) changed, or
//! one resource's contents did. Carried on one store-wide channel (a Redis pub/sub channel,
//! or in-process for the memory store) and fanned out to every local listener.
//!
//! Invariant: the wire form is a short string that round-trips through `encode`/`decode`;
//! anything unrecognised decodes to `None` and is dropped (a newer replica's kind of change).

/// One change, as every replica's listeners see it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Change {
    /// The merged tool list changed.
    ToolsListChanged,
    /// The merged prompt list changed.
    PromptsListChanged,
    /// The merged resource (or template) list changed.
    ResourcesListChanged,
    /// The contents of the resource with this URI changed.
    ResourceUpdated(String),
    /// Changes may have been missed here (a reconnect, or a listener that fell behind): a
    /// listener should assume every list it follows changed.
    Missed,
}

impl Change {
    /// The payload published on the change channel.
    pub fn encode(&self) -> String {
        match self {
            Self::ToolsListChanged => "tools".to_owned(),
            Self::PromptsListChanged => "prompts".to_owned(),
            Self::ResourcesListChanged => "resources".to_owned(),
            Self::ResourceUpdated(uri) => format!("updated:{uri}"),
            Self::Missed => "missed".to_owned(),
        }
    }

    /// Reads a payload; `None` for anything this replica does not know.
    pub fn decode(payload: &str) -> Option<Self> {
        match payload {
            "tools" => Some(Self::ToolsListChanged),
            "prompts" => Some(Self::PromptsListChanged),
            "resources" => Some(Self::ResourcesListChanged),
            "missed" => Some(Self::Missed),
            other => {
                other.strip_prefix("updated:").filter(|u| !u.is_empty()).map(|u| Self::ResourceUpdated(u.to_owned()))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_change_round_trips() {
        for change in [
            Change::ToolsListChanged,
            Change::PromptsListChanged,
            Change::ResourcesListChanged,
            Change::ResourceUpdated("file:///a b?c:d".to_owned()),
            Change::Missed,
        ] {
            assert_eq!(Change::decode(&change.encode()), Some(change));
        }
        assert_eq!(Change::decode("updated:"), None);
        assert_eq!(Change::decode("something-new"), None);
    }
}
