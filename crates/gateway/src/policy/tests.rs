//! The fast paths (partial conversion, guards, the cached principal) against the plain
//! interpreter: every rule run on the whole principal and arguments, converted by
//! `cel::to_value`, as policy was first written. Both must decide every use alike.

use std::collections::BTreeMap;
use std::sync::Arc;

use cel::{Context, Env, Program, Value};
use serde_json::{Map, Value as Json, json};

use super::{Arguments, Caller, Decision, Effect, Item, Policy, PolicyRule, Use};
use mcpgate_runtime::Principal;

/// What the plain interpreter decides (see `Policy::decide`: the first rule that holds).
fn plain(
    env: &Arc<Env>,
    rules: &[(PolicyRule, Program)],
    default: Effect,
    principal: &Principal,
    server: &str,
    used: Use<'_>,
    listing: bool,
) -> Decision {
    let mut context = Context::with_env(Arc::clone(env));
    let no_claims = Map::new();
    let view = json!({
        "sub": principal.subject(), "iss": principal.issuer(), "scopes": principal.scopes(),
        "claims": principal.claims().unwrap_or(&no_claims),
    });
    let text = |s: &str| Value::String(Arc::new(s.to_owned()));
    let name = |wanted: fn(Item<'_>) -> Option<&str>| text(wanted(used.target).unwrap_or(""));
    context.add_variable_from_value("principal", cel::to_value(&view).expect("view"));
    context.add_variable_from_value("server", text(server));
    context.add_variable_from_value("method", text(used.target.method()));
    context.add_variable_from_value("tool", name(|i| if let Item::Tool(n) = i { Some(n) } else { None }));
    context.add_variable_from_value("prompt", name(|i| if let Item::Prompt(n) = i { Some(n) } else { None }));
    context.add_variable_from_value("resource", name(|i| if let Item::Resource(n) = i { Some(n) } else { None }));
    context.add_variable_from_value("upstream", text(used.upstream.unwrap_or("")));
    let arguments = match used.arguments {
        Arguments::None => cel::to_value(Map::new()),
        Arguments::Json(map) => cel::to_value(map),
        Arguments::Strings(map) => cel::to_value(map),
    };
    context.add_variable_from_value("arguments", arguments.expect("arguments"));
    for (rule, program) in rules {
        let holds = match program.execute(&context) {
            Ok(Value::Bool(holds)) => holds,
            _ => !listing && rule.effect == Effect::Deny,
        };
        if holds {
            return Decision::by_rule(rule.effect, Arc::from(rule.name.as_str()));
        }
    }
    Decision::by_default(default)
}

fn rules() -> Vec<PolicyRule> {
    let (deny, allow) = (Effect::Deny, Effect::Allow);
    vec![
        PolicyRule::new("names", "tool.startsWith('delete_') || prompt == 'internal'", deny),
        PolicyRule::new("missing-first", "principal.claims.nope == 1 && tool == 'never'", deny),
        PolicyRule::new(
            "nested",
            "has(principal.claims.org.id) && principal.claims.org.id == 7u && upstream == 'gh'",
            deny,
        ),
        PolicyRule::new("typed", "principal.claims.level > 2 && principal.claims.neg < 0", deny),
        PolicyRule::new("arg", "has(arguments.env) && arguments.env == 'prod'", deny),
        PolicyRule::new("arg-deep", "arguments.opts.force == true", deny),
        PolicyRule::new("scopes", "!('admin' in principal.scopes) && tool in ['rotate', 'drop']", deny),
        PolicyRule::new("tenant", "has(principal.claims.tenant) && principal.claims.tenant == 'blocked'", deny),
        PolicyRule::new(
            "iss",
            "principal.iss == 'https://evil' || principal.sub.endsWith('-bot') && server == 'internal'",
            deny,
        ),
        PolicyRule::new(
            "groups",
            "principal.claims.groups.exists(g, g == 'support') && tool in ['echo', 'sum']",
            allow,
        ),
        PolicyRule::new("present", "has(principal.claims.banned) && tool == 'sum' || has(arguments.opts)", deny),
        PolicyRule::new("uint", "principal.claims.level + 1u == 2u && tool == 'sum'", deny),
        PolicyRule::new("staff", "principal.claims.role == 'staff' && method == 'prompts/get'", allow),
    ]
}

/// Rules that read whole values, mixed with the partial readers above.
fn whole_rules() -> Vec<PolicyRule> {
    let mut rules = rules();
    rules.insert(0, PolicyRule::new("count", "size(principal.claims) > 50 || size(arguments) > 5", Effect::Deny));
    rules.insert(1, PolicyRule::new("keys", "principal.claims.exists(k, k == 'banned')", Effect::Deny));
    rules
}

fn principals() -> Vec<Principal> {
    let with = |sub: &str, claims: Json| {
        let Json::Object(claims) = claims else { panic!("an object") };
        Principal::new("https://iss", sub, vec!["tools:call".into()]).with_claims(claims)
    };
    vec![
        Principal::anonymous(),
        with("alice", json!({"role": "staff", "groups": ["support"], "tenant": "acme", "level": 1, "neg": -1})),
        with("bob-bot", json!({"groups": "support", "org": {"id": 7}, "level": 3.5, "neg": -4, "banned": true})),
        with("carol", json!({"groups": ["eng"], "org": 7, "tenant": "blocked", "level": "high", "role": null})),
    ]
}

#[test]
fn every_fast_path_decides_as_the_plain_interpreter() {
    let prompt_args: BTreeMap<String, String> = [("env".to_owned(), "prod".to_owned())].into();
    let json_args: Vec<Map<String, Json>> = [
        json!({}),
        json!({"env": "prod"}),
        json!({"env": "staging", "opts": {"force": true}}),
        json!({"opts": 1, "a": 1, "b": 2, "c": 3, "d": 4, "e": 5}),
    ]
    .into_iter()
    .map(|v| if let Json::Object(map) = v { map } else { Map::new() })
    .collect();
    let mut arguments = vec![Arguments::None, Arguments::Strings(&prompt_args)];
    arguments.extend(json_args.iter().map(Arguments::Json));
    let targets = [
        Item::Tool("echo"),
        Item::Tool("sum"),
        Item::Tool("delete_repo"),
        Item::Tool("rotate"),
        Item::Prompt("internal"),
        Item::Prompt("p"),
        Item::Resource("file:///x"),
    ];
    let mut compared = 0;
    // Each rule alone (so that no earlier rule masks it), then all of them in order.
    let mut policies: Vec<Vec<PolicyRule>> = rules().into_iter().map(|r| vec![r]).collect();
    policies.extend([rules(), whole_rules()]);
    for rules in policies {
        let policy = Policy::from_rules(&rules, Effect::Deny, false).expect("compiles");
        let env = Arc::new(Env::stdlib());
        let programs: Vec<_> = rules.iter().map(|r| (r.clone(), env.compile(&r.when).expect("parses"))).collect();
        for principal in &principals() {
            for server in ["", "internal"] {
                // One caller for many uses, as a list does.
                let caller = Caller::at(principal, server);
                for target in targets {
                    for upstream in [None, Some("gh")] {
                        for args in &arguments {
                            let used = Use { target, upstream, arguments: *args };
                            for listing in [false, true] {
                                let expected = plain(&env, &programs, Effect::Deny, principal, server, used, listing);
                                assert_eq!(
                                    policy.decide(&caller, used, listing),
                                    expected,
                                    "{principal:?} {used:?} listing={listing}"
                                );
                                compared += 1;
                            }
                        }
                    }
                }
            }
        }
    }
    assert!(compared > 10_000, "{compared}");
}

#[test]
fn a_caller_handed_to_another_policy_is_converted_for_that_one() {
    let Json::Object(claims) = json!({"role": "staff", "tenant": "blocked"}) else { unreachable!() };
    let principal = Principal::new("https://iss", "alice", vec![]).with_claims(claims);
    let caller = Caller::root(&principal);
    let used = Use { target: Item::Tool("echo"), upstream: None, arguments: Arguments::None };
    let on_role = Policy::from_rules(
        &[PolicyRule::new("r", "principal.claims.role == 'staff'", Effect::Allow)],
        Effect::Deny,
        false,
    )
    .expect("compiles");
    let on_tenant = Policy::from_rules(
        &[PolicyRule::new("t", "principal.claims.tenant == 'blocked'", Effect::Allow)],
        Effect::Deny,
        false,
    )
    .expect("compiles");
    // The first policy converts only `role`, and caches it on the caller; the second still
    // sees `tenant`.
    assert!(on_role.decide(&caller, used, false).is_allowed());
    assert!(on_tenant.decide(&caller, used, false).is_allowed());
    assert!(on_role.decide(&caller, used, false).is_allowed());
}
