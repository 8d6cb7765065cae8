//! A request body as a client sends it: JSON-RPC decoding, then the params of every method
//! whose params the gateway decodes, and the era-deciding `_meta` and protocol version.
#![no_main]

use libfuzzer_sys::fuzz_target;
use mcpgate_protocol::jsonrpc::{Incoming, decode, decode_params};
use mcpgate_protocol::meta::RequestMeta;
use mcpgate_protocol::{Method, ProtocolVersion};

fuzz_target!(|body: &[u8]| {
    let Ok(Incoming::Request(request)) = decode(body) else { return };
    let _ = Method::parse(&request.method);
    let params = request.params;
    let _ = decode_params::<mcpgate_protocol::tool::CallToolParams>(params);
    let _ = decode_params::<mcpgate_protocol::task::TaskIdParams>(params);
    let _ = decode_params::<mcpgate_protocol::task::UpdateTaskParams>(params);
    let _ = decode_params::<mcpgate_protocol::initialize::InitializeParams>(params);
    let _ = decode_params::<mcpgate_protocol::prompt::GetPromptParams>(params);
    let _ = decode_params::<mcpgate_protocol::resource::ReadResourceParams>(params);
    let _ = decode_params::<mcpgate_protocol::completion::CompleteParams>(params);
    let _ = decode_params::<mcpgate_protocol::subscription::ListenParams>(params);
    if let Ok(mcpgate_protocol::pagination::MetaParams { meta: Some(meta) }) =
        decode_params::<mcpgate_protocol::pagination::MetaParams>(params)
    {
        let meta: RequestMeta = meta;
        if let Some(version) = &meta.protocol_version {
            let _ = ProtocolVersion::parse(version);
        }
        // What was decoded re-encodes.
        serde_json::to_string(&meta).expect("decoded _meta re-encodes");
    }
});
