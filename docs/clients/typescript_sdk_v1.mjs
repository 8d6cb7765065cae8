// The official MCP TypeScript SDK v1 (npm install @modelcontextprotocol/sdk@1.32.2): the
// 2025-11-25 initialize handshake (v1 speaks no 2026-07-28).
// MCPGATE_URL: the gateway (default http://127.0.0.1:8080/mcp); MCPGATE_TOKEN: a bearer token.
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";

const url = new URL(process.env.MCPGATE_URL ?? "http://127.0.0.1:8080/mcp");
const token = process.env.MCPGATE_TOKEN;
const headers = token ? { Authorization: `Bearer ${token}` } : {};

const transport = new StreamableHTTPClientTransport(url, { requestInit: { headers } });
const client = new Client({ name: "mcpgate-example", version: "1.0.0" });
await client.connect(transport);
const { tools } = await client.listTools();
const result = await client.callTool({ name: "echo", arguments: { text: "hello" } });
console.log(`${transport.protocolVersion}: ${tools.length} tools; echo said ${result.content[0].text}`);
await client.close();
