//! Pagination: the params of `*/list` methods, the page every list result is, and the params
//! of methods that carry nothing but `_meta`.
//!
//! Invariant: a [`ListResult`] is written exactly as the per-list structs it replaced were:
//! the items under the list's own member (`tools`, `prompts`, `resources`,
//! `resourceTemplates`), then `nextCursor`, `ttlMs`, `cacheScope`, `resultType` and `_meta`,
//! each omitted when absent; reading ignores unknown members and refuses duplicates.

use std::fmt;
use std::marker::PhantomData;

use serde::de::{self, IgnoredAny, MapAccess, Visitor};
use serde::ser::SerializeMap as _;
use serde::{Deserialize, Deserializer, Serialize, Serializer};

use crate::meta::RequestMeta;
use crate::result::{CacheScope, McpResult, ResultMeta, ResultType};

/// Params of `*/list` methods.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct PaginatedParams {
    /// Opaque cursor from a previous page.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cursor: Option<String>,
    /// Request metadata.
    #[serde(rename = "_meta", default, skip_serializing_if = "Option::is_none")]
    pub meta: Option<RequestMeta>,
}

/// Params of a request whose only member is `_meta` (`server/discover`, `ping`, and any
/// method this server does not know, so era rules can still be applied to it).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct MetaParams {
    /// Request metadata.
    #[serde(rename = "_meta", default, skip_serializing_if = "Option::is_none")]
    pub meta: Option<RequestMeta>,
}

/// Something a paginated list holds (a tool, a prompt, ...), and the member of the list
/// result that holds the items.
pub trait Listed {
    /// The member of the result holding the items, e.g. `"tools"`.
    const MEMBER: &'static str;
}

/// The result of a paginated `*/list` method: one page of items, the cursor of the next
/// page, and the cache hints 2026-07-28 requires (`ttlMs`, `cacheScope`).
#[derive(Debug, Clone, PartialEq)]
pub struct ListResult<T> {
    /// The items, in a deterministic order (written under [`Listed::MEMBER`]).
    pub items: Vec<T>,
    /// Cursor for the next page.
    pub next_cursor: Option<String>,
    /// Cache lifetime (modern, required).
    pub ttl_ms: Option<u64>,
    /// Cache scope (modern, required).
    pub cache_scope: Option<CacheScope>,
    /// `"complete"` (modern).
    pub result_type: Option<ResultType>,
    /// Result metadata.
    pub meta: Option<ResultMeta>,
}

impl<T> ListResult<T> {
    /// A last (or only) page of `items`, with nothing else set.
    pub fn new(items: Vec<T>) -> Self {
        Self { items, next_cursor: None, ttl_ms: None, cache_scope: None, result_type: None, meta: None }
    }
}

impl<T> Default for ListResult<T> {
    fn default() -> Self {
        Self::new(Vec::new())
    }
}

impl<T: Listed + Serialize> McpResult for ListResult<T> {
    fn set_result_type(&mut self, result_type: Option<ResultType>) {
        self.result_type = result_type;
    }
    fn set_meta(&mut self, meta: Option<ResultMeta>) {
        self.meta = meta;
    }
}

impl<T: Listed + Serialize> Serialize for ListResult<T> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut map = serializer.serialize_map(None)?;
        map.serialize_entry(T::MEMBER, &self.items)?;
        if let Some(cursor) = &self.next_cursor {
            map.serialize_entry("nextCursor", cursor)?;
        }
        if let Some(ttl_ms) = &self.ttl_ms {
            map.serialize_entry("ttlMs", ttl_ms)?;
        }
        if let Some(scope) = &self.cache_scope {
            map.serialize_entry("cacheScope", scope)?;
        }
        if let Some(result_type) = &self.result_type {
            map.serialize_entry("resultType", result_type)?;
        }
        if let Some(meta) = &self.meta {
            map.serialize_entry("_meta", meta)?;
        }
        map.end()
    }
}

impl<'de, T: Listed + Deserialize<'de>> Deserialize<'de> for ListResult<T> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_map(PageVisitor(PhantomData))
    }
}

struct PageVisitor<T>(PhantomData<T>);

impl<'de, T: Listed + Deserialize<'de>> Visitor<'de> for PageVisitor<T> {
    type Value = ListResult<T>;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "a list result with {}", T::MEMBER)
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
        let mut items = None;
        let (mut next_cursor, mut ttl_ms, mut cache_scope, mut result_type, mut meta) = (None, None, None, None, None);
        while let Some(key) = map.next_key::<String>()? {
            match key.as_str() {
                k if k == T::MEMBER => once(&mut items, &mut map, T::MEMBER)?,
                "nextCursor" => once(&mut next_cursor, &mut map, "nextCursor")?,
                "ttlMs" => once(&mut ttl_ms, &mut map, "ttlMs")?,
                "cacheScope" => once(&mut cache_scope, &mut map, "cacheScope")?,
                "resultType" => once(&mut result_type, &mut map, "resultType")?,
                "_meta" => once(&mut meta, &mut map, "_meta")?,
                _ => {
                    map.next_value::<IgnoredAny>()?;
                }
            }
        }
        Ok(ListResult {
            items: items.ok_or_else(|| de::Error::missing_field(T::MEMBER))?,
            next_cursor: next_cursor.flatten(),
            ttl_ms: ttl_ms.flatten(),
            cache_scope: cache_scope.flatten(),
            result_type: result_type.flatten(),
            meta: meta.flatten(),
        })
    }
}

/// Reads the value of a member into `slot`, refusing a member seen before.
fn once<'de, V: Deserialize<'de>, A: MapAccess<'de>>(
    slot: &mut Option<V>,
    map: &mut A,
    member: &'static str,
) -> Result<(), A::Error> {
    if slot.is_some() {
        return Err(de::Error::duplicate_field(member));
    }
    *slot = Some(map.next_value()?);
    Ok(())
}
