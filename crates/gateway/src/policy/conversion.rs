//! JSON (claims, arguments) and the principal into CEL values, directly and only as far as
//! the rules read it ([`Need`]); strings are lent to CEL, not copied.
//!
//! Invariant: what a rule can reach of a converted value is exactly what `cel::to_value` of
//! the same JSON would give (a non-negative integer is a `uint`, a negative one an `int`, any
//! other number a `double`; objects are maps with string keys); only the parts no rule can
//! reach are left out.

use std::collections::{BTreeMap, HashMap};

use cel::common::types::{CelBool, CelDouble, CelInt, CelList, CelMap, CelMapKey, CelNull, CelString, CelUInt};
use cel::common::value::Val;
use serde_json::{Map, Value as Json};

use mcpgate_runtime::Principal;

use super::reads::Need;

/// A CEL value that borrows what it can from `'a`.
pub(super) type Converted<'a> = Box<dyn Val + 'a>;

/// `principal`: `{sub, iss, scopes, claims}` (claims `{}` when the token had none).
pub(super) fn principal<'a>(p: &'a Principal, need: &Need) -> Converted<'a> {
    let mut map: HashMap<CelMapKey<'a>, Converted<'a>> = HashMap::new();
    if need.field("sub").is_some() {
        map.insert(CelMapKey::from("sub"), Box::new(CelString::from(p.subject())));
    }
    if need.field("iss").is_some() {
        map.insert(CelMapKey::from("iss"), Box::new(CelString::from(p.issuer())));
    }
    if need.field("scopes").is_some() {
        let scopes: Vec<Converted<'a>> =
            p.scopes().iter().map(|s| Box::new(CelString::from(s.as_str())) as Converted<'a>).collect();
        map.insert(CelMapKey::from("scopes"), Box::new(CelList::from(scopes)));
    }
    if let Some(claims_need) = need.field("claims") {
        let claims = match p.claims() {
            Some(claims) => object(claims, claims_need),
            None => Box::new(CelMap::default()),
        };
        map.insert(CelMapKey::from("claims"), claims);
    }
    Box::new(CelMap::from(map))
}

/// A prompt's arguments (string values).
pub(super) fn strings<'a>(arguments: &'a BTreeMap<String, String>, need: &Need) -> Converted<'a> {
    let entry = |(k, v): (&'a String, &'a String)| {
        (CelMapKey::from(k.as_str()), Box::new(CelString::from(v.as_str())) as Converted<'a>)
    };
    let map: HashMap<_, _> = match need {
        Need::Whole => arguments.iter().map(entry).collect(),
        Need::Fields(fields) => fields.keys().filter_map(|k| arguments.get_key_value(k)).map(entry).collect(),
    };
    Box::new(CelMap::from(map))
}

/// A JSON object.
pub(super) fn object<'a>(object: &'a Map<String, Json>, need: &Need) -> Converted<'a> {
    let map: HashMap<_, _> = match need {
        Need::Whole => object.iter().map(|(k, v)| (CelMapKey::from(k.as_str()), json(v, &Need::Whole))).collect(),
        Need::Fields(fields) => fields
            .iter()
            .filter_map(|(k, need)| object.get_key_value(k).map(|(k, v)| (CelMapKey::from(k.as_str()), json(v, need))))
            .collect(),
    };
    Box::new(CelMap::from(map))
}

/// Any JSON value (a field need only cuts objects down).
fn json<'a>(value: &'a Json, need: &Need) -> Converted<'a> {
    match value {
        Json::Null => Box::new(CelNull),
        Json::Bool(b) => Box::new(CelBool::from(*b)),
        // As serde_json serializes a number: u64 if it is one, else i64, else f64.
        Json::Number(n) => match (n.as_u64(), n.as_i64()) {
            (Some(u), _) => Box::new(CelUInt::from(u)),
            (None, Some(i)) => Box::new(CelInt::from(i)),
            (None, None) => Box::new(CelDouble::from(n.as_f64().unwrap_or(f64::NAN))),
        },
        Json::String(s) => Box::new(CelString::from(s.as_str())),
        Json::Array(items) => {
            Box::new(CelList::from(items.iter().map(|item| json(item, &Need::Whole)).collect::<Vec<_>>()))
        }
        Json::Object(map) => object(map, need),
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use serde_json::{Value as Json, json};

    use cel::common::types::{CelList, CelMap};
    use cel::common::value::Val;

    use super::super::reads::Need;
    use super::{Converted, object, principal, strings};
    use mcpgate_runtime::Principal;

    /// The value as the interpreter's own conversion makes it, to compare with.
    fn reference(value: &impl serde::Serialize) -> Converted<'static> {
        Box::<dyn cel::common::value::Val>::try_from(cel::to_value(value).expect("serializes")).expect("converts")
    }

    /// Equal and of the same CEL types all the way down (CEL's `==` holds between `1u` and `1`).
    fn same(a: &dyn Val, b: &dyn Val) -> bool {
        if a.get_type() != b.get_type() {
            return false;
        }
        if let (Some(x), Some(y)) = (a.downcast_ref::<CelMap<'_>>(), b.downcast_ref::<CelMap<'_>>()) {
            return x.len() == y.len() && x.iter().all(|(k, v)| y.get(k).is_some_and(|w| same(v.as_ref(), w.as_ref())));
        }
        if let (Some(x), Some(y)) = (a.downcast_ref::<CelList<'_>>(), b.downcast_ref::<CelList<'_>>()) {
            return x.len() == y.len() && x.iter().zip(y.iter()).all(|(v, w)| same(v.as_ref(), w.as_ref()));
        }
        a.equals(b)
    }

    fn as_map(value: Json) -> serde_json::Map<String, Json> {
        let Json::Object(map) = value else { panic!("an object") };
        map
    }

    #[test]
    fn a_whole_conversion_equals_the_interpreters_own() {
        let claims = as_map(json!({
            "n": 1, "neg": -2, "big": u64::MAX, "f": 1.5, "s": "x", "b": true, "z": null,
            "list": [1, "a", [2], {"k": -1}], "nested": {"a": {"b": "c"}, "e": {}},
        }));
        let converted = object(&claims, &Need::Whole);
        assert!(same(converted.as_ref(), reference(&claims).as_ref()), "{converted:?}");
        let args: BTreeMap<String, String> = [("a".to_owned(), "1".to_owned())].into();
        assert!(same(strings(&args, &Need::Whole).as_ref(), reference(&args).as_ref()));
        let p = Principal::new("https://iss", "alice", vec!["s1".into()]).with_claims(claims.clone());
        let whole = principal(&p, &Need::Whole);
        let view = json!({"sub": "alice", "iss": "https://iss", "scopes": ["s1"], "claims": claims});
        assert!(same(whole.as_ref(), reference(&view).as_ref()), "{whole:?}");
        let anonymous = Principal::anonymous();
        let none = principal(&anonymous, &Need::Whole);
        let view =
            json!({"sub": anonymous.subject(), "iss": anonymous.issuer(), "scopes": anonymous.scopes(), "claims": {}});
        assert!(same(none.as_ref(), reference(&view).as_ref()), "{none:?}");
    }

    #[test]
    fn a_partial_conversion_keeps_only_the_fields_read() {
        let claims = as_map(json!({"role": "staff", "groups": ["a"], "org": {"id": 7, "name": "acme"}, "other": 1}));
        let need = Need::Fields(
            [
                ("role".to_owned(), Need::Whole),
                ("org".to_owned(), Need::Fields([("id".to_owned(), Need::Fields(BTreeMap::new()))].into())),
                ("missing".to_owned(), Need::Whole),
            ]
            .into(),
        );
        let converted = object(&claims, &need);
        let expected = reference(&json!({"role": "staff", "org": {"id": 7}}));
        assert!(same(converted.as_ref(), expected.as_ref()), "{converted:?}");
    }
}
