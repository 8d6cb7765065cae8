//! Envelope decoding: what is a request, a notification, a response, and what is rejected.

use mcpgate_protocol::tool::CallToolParams;
use mcpgate_protocol::{Incoming, ProtocolError, RequestId, decode, decode_params};

#[test]
fn request_with_integer_and_string_ids() {
    let Ok(Incoming::Request(r)) = decode(br#"{"jsonrpc":"2.0","id":7,"method":"tools/list","params":{}}"#) else {
        panic!("expected a request");
    };
    assert_eq!(r.id, RequestId::Number(7));
    assert_eq!(r.method, "tools/list");
    let Ok(Incoming::Request(r)) = decode(br#"{"jsonrpc":"2.0","id":"a\"b","method":"x"}"#) else {
        panic!("expected a request");
    };
    assert_eq!(r.id, RequestId::String("a\"b".into()));
    assert!(r.params.is_none());
}

#[test]
fn notification_and_response() {
    assert!(matches!(
        decode(br#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#),
        Ok(Incoming::Notification(_))
    ));
    let Ok(Incoming::Response(r)) = decode(br#"{"jsonrpc":"2.0","id":"s1","result":{"action":"accept"}}"#) else {
        panic!("expected a response");
    };
    assert_eq!(r.id, RequestId::String("s1".into()));
    assert!(r.result.is_some() && r.error.is_none());
    let Ok(Incoming::Response(r)) = decode(br#"{"jsonrpc":"2.0","id":3,"error":{"code":-32603,"message":"no"}}"#)
    else {
        panic!("expected an error response");
    };
    assert_eq!(r.error.expect("error").code.0, -32603);
}

#[test]
fn rejects_null_float_and_object_ids() {
    for body in [
        &br#"{"jsonrpc":"2.0","id":null,"method":"x"}"#[..],
        br#"{"jsonrpc":"2.0","id":1.5,"method":"x"}"#,
        br#"{"jsonrpc":"2.0","id":{},"method":"x"}"#,
        br#"{"jsonrpc":"2.0","id":18446744073709551615,"method":"x"}"#,
    ] {
        match decode(body) {
            Err(ProtocolError::InvalidRequest { id: None, .. }) => {}
            other => panic!("{}: {other:?}", String::from_utf8_lossy(body)),
        }
    }
}

#[test]
fn parse_errors_batches_and_shapes() {
    assert!(matches!(decode(b"{not json"), Err(ProtocolError::Parse { .. })));
    assert!(matches!(decode(b""), Err(ProtocolError::Parse { .. })));
    assert!(matches!(decode(b"  \n "), Err(ProtocolError::Parse { .. })));
    assert!(matches!(decode(br#"{"jsonrpc":"2.0","id":1,"method":"x"} trailing"#), Err(ProtocolError::Parse { .. })));
    assert!(matches!(decode(br#"[{"jsonrpc":"2.0","id":1,"method":"x"}]"#), Err(ProtocolError::Batch)));
    assert!(matches!(decode(b"[1,"), Err(ProtocolError::Parse { .. })));
    assert!(matches!(decode(b"42"), Err(ProtocolError::InvalidRequest { .. })));
    assert!(matches!(decode(br#""str""#), Err(ProtocolError::InvalidRequest { .. })));
}

#[test]
fn invalid_requests_keep_a_readable_id() {
    match decode(br#"{"jsonrpc":"1.0","id":9,"method":"x"}"#) {
        Err(ProtocolError::InvalidRequest { id: Some(RequestId::Number(9)), .. }) => {}
        other => panic!("{other:?}"),
    }
    match decode(br#"{"jsonrpc":"2.0","id":"k","method":5}"#) {
        Err(ProtocolError::InvalidRequest { id: Some(RequestId::String(s)), .. }) => assert_eq!(s, "k"),
        other => panic!("{other:?}"),
    }
    assert!(matches!(decode(br#"{"jsonrpc":"2.0"}"#), Err(ProtocolError::InvalidRequest { .. })));
    assert!(matches!(
        decode(br#"{"jsonrpc":"2.0","id":1,"result":{},"error":{"code":1,"message":"m"}}"#),
        Err(ProtocolError::InvalidRequest { .. })
    ));
}

#[test]
fn params_must_be_an_object_of_the_right_shape() {
    let Ok(Incoming::Request(r)) = decode(br#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":["echo",{}]}"#)
    else {
        panic!("a request with array params is still a request");
    };
    assert!(matches!(decode_params::<CallToolParams>(r.params), Err(ProtocolError::InvalidParams { .. })));

    let Err(ProtocolError::InvalidParams { detail }) = decode_params::<CallToolParams>(None) else {
        panic!("missing name must be reported");
    };
    assert!(detail.contains("name"), "{detail}");
    assert!(!detail.contains("line"), "position info is dropped: {detail}");

    let Ok(Incoming::Request(r)) =
        decode(br#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","arguments":{"text":"hi"}}}"#)
    else {
        panic!("request");
    };
    let p: CallToolParams = decode_params(r.params).expect("valid params");
    assert_eq!(p.name, "echo");
    assert_eq!(p.arguments.expect("args")["text"], "hi");
}

#[test]
fn legacy_task_param_is_kept_raw() {
    let Ok(Incoming::Request(r)) =
        decode(br#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"g","task":"garbage"}}"#)
    else {
        panic!("request");
    };
    let p: CallToolParams = decode_params(r.params).expect("a malformed legacy task member must not fail decoding");
    assert!(p.legacy_task().is_err(), "but reading it as a legacy task does");
}
