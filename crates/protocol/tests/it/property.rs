//! Property tests: arbitrary JSON and arbitrary bytes never panic the decoder, and typed
//! params decoding of any JSON object fails cleanly or succeeds.

use proptest::prelude::*;
use serde_json::{Map, Value};

use mcpgate_protocol::completion::CompleteParams;
use mcpgate_protocol::initialize::InitializeParams;
use mcpgate_protocol::pagination::{MetaParams, PaginatedParams};
use mcpgate_protocol::prompt::GetPromptParams;
use mcpgate_protocol::resource::ReadResourceParams;
use mcpgate_protocol::task::{TaskIdParams, UpdateTaskParams};
use mcpgate_protocol::tool::CallToolParams;
use mcpgate_protocol::{Incoming, RequestId, decode, decode_params};

fn json_value() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        any::<i64>().prop_map(Value::from),
        any::<f64>().prop_filter("finite", |f| f.is_finite()).prop_map(Value::from),
        "[a-z_/]{0,12}".prop_map(Value::String),
        prop_oneof![
            Just("2.0"),
            Just("tools/call"),
            Just("2026-07-28"),
            Just("io.modelcontextprotocol/protocolVersion"),
            Just("elicitation/create"),
        ]
        .prop_map(|s| Value::String(s.to_owned())),
    ];
    leaf.prop_recursive(4, 48, 6, |inner| {
        let key = prop_oneof![
            "[a-z]{1,6}",
            Just("jsonrpc".to_owned()),
            Just("id".to_owned()),
            Just("method".to_owned()),
            Just("params".to_owned()),
            Just("result".to_owned()),
            Just("error".to_owned()),
            Just("_meta".to_owned()),
            Just("name".to_owned()),
            Just("arguments".to_owned()),
            Just("inputResponses".to_owned()),
            Just("io.modelcontextprotocol/clientCapabilities".to_owned()),
        ];
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..4).prop_map(Value::Array),
            prop::collection::vec((key, inner), 0..6)
                .prop_map(|kv| Value::Object(kv.into_iter().collect::<Map<_, _>>())),
        ]
    })
}

fn decode_all_params(raw: &serde_json::value::RawValue) {
    let p = Some(raw);
    let _ = decode_params::<CallToolParams>(p);
    let _ = decode_params::<GetPromptParams>(p);
    let _ = decode_params::<ReadResourceParams>(p);
    let _ = decode_params::<CompleteParams>(p);
    let _ = decode_params::<InitializeParams>(p);
    let _ = decode_params::<PaginatedParams>(p);
    let _ = decode_params::<MetaParams>(p);
    let _ = decode_params::<TaskIdParams>(p);
    let _ = decode_params::<UpdateTaskParams>(p);
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 2_000, ..ProptestConfig::default() })]

    #[test]
    fn arbitrary_json_never_panics(v in json_value()) {
        let body = serde_json::to_vec(&v).expect("serializes");
        if let Ok(Incoming::Request(r)) = decode(&body)
            && let Some(raw) = r.params
        {
            decode_all_params(raw);
        }
        let raw = serde_json::value::to_raw_value(&v).expect("raw");
        decode_all_params(&raw);
    }

    #[test]
    fn arbitrary_bytes_never_panic(bytes in prop::collection::vec(any::<u8>(), 0..256)) {
        let _ = decode(&bytes);
    }

    #[test]
    fn well_formed_requests_always_decode(id in any::<i64>(), method in "[a-z]{1,10}/[a-z]{1,10}", params in json_value()) {
        let params = match params { Value::Object(m) => Value::Object(m), _ => Value::Object(Map::new()) };
        let body = serde_json::json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params});
        let bytes = serde_json::to_vec(&body).expect("serializes");
        match decode(&bytes) {
            Ok(Incoming::Request(r)) => {
                prop_assert_eq!(r.id, RequestId::Number(id));
                prop_assert_eq!(r.method.as_ref(), method.as_str());
            }
            other => prop_assert!(false, "did not decode as a request: {:?}", other),
        }
    }
}
