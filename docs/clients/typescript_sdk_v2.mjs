// The official MCP TypeScript SDK v2 (npm install @modelcontextprotocol/client@2.4.0) calling
// mcpgate in both protocol eras.
// MCPGATE_URL: the gateway (default http://127.0.0.1:8080/mcp); MCPGATE_TOKEN: a bearer token.
import { Client, StreamableHTTPClientTransport } from "@modelcontextprotocol/client";

const url = new URL(process.env.MCPGATE_URL ?? "http://127.0.0.1:8080/mcp");
const token = process.env.MCPGATE_TOKEN;
const headers = token ? { Authorization: `Bearer ${token}` } : {};

// "legacy": the 2025-11-25 initialize handshake. { pin: "2026-07-28" }: server/discover, then
// every request carries its version and capabilities. ("auto" asks and picks.)
for (const mode of ["legacy", { pin: "2026-07-28" }]) {
  const transport = new StreamableHTTPClientTransport(url, { requestInit: { headers } });
  const client = new Client({ name: "mcpgate-example", version: "1.0.0" }, { versionNegotiation: { mode } });
  await client.connect(transport);
  const { tools } = await client.listTools();
  const result = await client.callTool({ name: "echo", arguments: { text: "hello" } });
  console.log(`${client.getNegotiatedProtocolVersion()}: ${tools.length} tools; echo said ${result.content[0].text}`);
  await client.close();
}
