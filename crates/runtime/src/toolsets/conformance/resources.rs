//! Conformance resource fixtures.

use serde_json::json;

use mcpgate_protocol::content::ResourceContents;
use mcpgate_protocol::resource::{Resource, ResourceTemplate};

use super::PNG;
use crate::catalog::{CatalogBuilder, Outcome, StaticResource, TemplateResource};

fn resource(uri: &str, name: &str, mime: &str) -> Resource {
    Resource {
        uri: uri.to_owned(),
        name: name.to_owned(),
        title: None,
        description: Some(format!("The {name} fixture")),
        mime_type: Some(mime.to_owned()),
        size: None,
        icons: None,
        annotations: None,
        meta: None,
    }
}

pub(super) fn install(b: &mut CatalogBuilder) {
    let text = "test://static-text";
    b.resource(StaticResource::new(
        resource(text, "static-text", "text/plain"),
        vec![ResourceContents::text(text, "text/plain", "This is the content of the static text resource.")],
        60_000,
    ));
    let binary = "test://static-binary";
    b.resource(StaticResource::new(
        resource(binary, "static-binary", "image/png"),
        vec![ResourceContents::blob(binary, "image/png", PNG)],
        60_000,
    ));
    let watched = "test://watched-resource";
    b.resource(StaticResource::new(
        resource(watched, "watched-resource", "text/plain"),
        vec![ResourceContents::text(watched, "text/plain", "Watched resource content.")],
        0,
    ));
    let template = ResourceTemplate {
        uri_template: "test://template/{id}/data".to_owned(),
        name: "template".to_owned(),
        title: None,
        description: Some("Data for an id".to_owned()),
        mime_type: Some("application/json".to_owned()),
        icons: None,
        annotations: None,
        meta: None,
    };
    if let Some(t) = TemplateResource::new(template, |uri, vars| {
        let id = vars.get("id").map_or("", String::as_str);
        let body = json!({"id": id, "templateTest": true, "data": format!("Data for ID: {id}")});
        Outcome::Complete(vec![ResourceContents::text(uri, "application/json", body.to_string())])
    }) {
        b.resource(t.with_completion(|_, value| {
            ["123", "456"].iter().filter(|v| v.starts_with(value)).map(|v| (*v).to_owned()).collect()
        }));
    }
}
