//! The suite's checks of pinned tool definitions: first-seen seeds once however replicas
//! race, changed and new tools are withheld with both definitions, and an approval names the
//! hash the operator saw; when the seen set is full, changed tools are kept before new ones;
//! a stub (empty hash) is never seeded nor approved.

use crate::contract::Pins;
use crate::pins::{Approval, MAX_DEFINITION_BYTES, MAX_PINNED_TOOLS, Observed};

fn tool(name: &str, hash: &str) -> Observed {
    Observed {
        tool: name.to_owned(),
        hash: hash.to_owned(),
        definition: format!(r#"{{"name":"{name}","v":"{hash}"}}"#),
    }
}

pub(super) async fn first_seen_seeds_once_however_replicas_race<S: Pins>(store: &S) {
    // Two replicas see different definitions of `search` at once (the upstream changed
    // between their reads): one seeds, and both end with the winner's set.
    let a = [tool("search", "h1"), tool("fetch", "f1")];
    let b = [tool("search", "h2"), tool("fetch", "f1")];
    let (seen_a, seen_b) = tokio::join!(store.pins_observe("web", true, &a), store.pins_observe("web", true, &b));
    let (seen_a, seen_b) = (seen_a.expect("observe"), seen_b.expect("observe"));
    assert!(seen_a.seeded != seen_b.seeded, "exactly one of the two seeded: {seen_a:?} / {seen_b:?}");
    let (seen_a, seen_b) = (seen_a.approved, seen_b.approved);
    let approved = store.pins_approved("web").await.expect("approved");
    assert_eq!(approved.get("fetch").map(String::as_str), Some("f1"));
    let winner = approved.get("search").cloned().expect("search approved");
    assert!(winner == "h1" || winner == "h2", "one of the two sets won: {winner}");
    assert_eq!(approved.len(), 2);
    // The later observer's answer already holds the winner's set.
    assert!(seen_a == approved || seen_b == approved, "{seen_a:?} / {seen_b:?} / {approved:?}");

    // Seeding happens once: a later observation with other definitions withholds them.
    let changed = [tool("search", "h3"), tool("fetch", "f1"), tool("delete", "d1")];
    let now = store.pins_observe("web", true, &changed).await.expect("observe");
    assert!(!now.seeded);
    assert_eq!(now.approved, approved, "first-seen does not approve again");
    let withheld = store.pins_withheld("web").await.expect("withheld");
    let names: Vec<&str> = withheld.iter().map(|w| w.tool.as_str()).collect();
    assert_eq!(names, ["delete", "search"], "the changed tool and the new one wait, by name");
    let search = &withheld[1];
    assert_eq!(search.hash, "h3");
    assert_eq!(search.approved_hash.as_deref(), Some(winner.as_str()));
    assert!(search.definition.contains("h3"));
    assert!(search.approved_definition.as_deref().is_some_and(|d| d.contains(&winner)), "{search:?}");
    assert_eq!(withheld[0].approved_hash, None, "a new tool has nothing approved");

    // Another upstream is apart, and pin = true never seeds.
    assert!(store.pins_observe("files", false, &a).await.expect("observe").approved.is_empty());
    assert_eq!(store.pins_withheld("files").await.expect("withheld").len(), 2);
    assert!(store.pins_approved("web").await.expect("approved").len() == 2);
}

pub(super) async fn approvals_name_the_hash_the_operator_saw<S: Pins>(store: &S) {
    assert!(store.pins_observe("wiki", false, &[tool("edit", "e1")]).await.expect("observe").approved.is_empty());
    // The operator looked at e1; the definition changed to e2 before the approval.
    assert!(store.pins_observe("wiki", false, &[tool("edit", "e2")]).await.expect("observe").approved.is_empty());
    let stale = store.pins_approve("wiki", "edit", "e1").await.expect("approve");
    assert_eq!(stale, Approval::Stale { current: Some("e2".to_owned()) });
    assert!(store.pins_approved("wiki").await.expect("approved").is_empty(), "a stale approval approves nothing");
    assert_eq!(
        store.pins_approve("wiki", "nothing", "e2").await.expect("approve"),
        Approval::Stale { current: None },
        "nothing is withheld under that name"
    );
    // The hash now shown is approved, once however often it is repeated.
    for _ in 0..2 {
        assert_eq!(store.pins_approve("wiki", "edit", "e2").await.expect("approve"), Approval::Approved);
    }
    let approved = store.pins_approved("wiki").await.expect("approved");
    assert_eq!(approved.get("edit").map(String::as_str), Some("e2"));
    assert!(store.pins_withheld("wiki").await.expect("withheld").is_empty());
    // The next observation agrees, and an approval does not let first-seen seed afterwards.
    let big = Observed {
        tool: "edit".to_owned(),
        hash: "e3".to_owned(),
        definition: format!(r#"{{"description":"{}"}}"#, "x".repeat(MAX_DEFINITION_BYTES)),
    };
    assert_eq!(store.pins_observe("wiki", true, &[big]).await.expect("observe").approved, approved);
    let withheld = store.pins_withheld("wiki").await.expect("withheld");
    assert_eq!(withheld.len(), 1);
    assert!(withheld[0].definition.len() < 1024, "a definition over the bound is kept as a note");
    assert_eq!(withheld[0].approved_definition.as_deref(), Some(r#"{"name":"edit","v":"e2"}"#));
}

pub(super) async fn changed_tools_outrank_new_ones_and_stubs_are_never_approved<S: Pins>(store: &S) {
    // Seeding skips a stub (a definition too large to show): it is withheld, not approved.
    let stub = Observed {
        tool: "huge".to_owned(),
        hash: String::new(),
        definition: r#"{"_omitted":"definition too large (99999 bytes)"}"#.to_owned(),
    };
    let first = store.pins_observe("crm", true, &[tool("edit", "e1"), stub.clone()]).await.expect("observe");
    assert!(first.seeded);
    assert_eq!(first.approved.keys().collect::<Vec<_>>(), ["edit"], "a stub is never seeded");
    let withheld = store.pins_withheld("crm").await.expect("withheld");
    assert_eq!((withheld.len(), withheld[0].tool.as_str(), withheld[0].hash.as_str()), (1, "huge", ""));
    assert!(matches!(store.pins_approve("crm", "huge", "").await.expect("approve"), Approval::Stale { .. }));
    assert!(!store.pins_approved("crm").await.expect("approved").contains_key("huge"), "nor ever approved");

    // A flood of new tools listed before the changed one cannot push it out of the seen set.
    let mut flood: Vec<Observed> = (0..MAX_PINNED_TOOLS).map(|i| tool(&format!("junk{i:04}"), "j")).collect();
    flood.push(tool("edit", "e2"));
    store.pins_observe("crm", true, &flood).await.expect("observe");
    let withheld = store.pins_withheld("crm").await.expect("withheld");
    assert_eq!(withheld.len(), MAX_PINNED_TOOLS, "the seen set stays bounded");
    let edit = withheld.iter().find(|w| w.tool == "edit").expect("the changed tool is kept for the diff");
    assert_eq!((edit.hash.as_str(), edit.approved_hash.as_deref()), ("e2", Some("e1")));
    assert_eq!(store.pins_approve("crm", "edit", "e2").await.expect("approve"), Approval::Approved);
}
