// An OAuth 2.1 authorization server (npm `oidc-provider`, pinned by scripts/test) that protected
// upstream MCP servers trust, for the tests of mcpgate's upstream OAuth client.
//
// Usage: node authorization_server.mjs, with the environment:
//   AS_NODE_MODULES  the node_modules directory holding oidc-provider (.cache/test-tools/...)
//   AS_RESOURCES     comma-separated resource URLs tokens may be issued for (RFC 8707)
//   AS_TOKEN_TTL     access token lifetime in seconds (default 30)
//   AS_CALLER_RESOURCES  comma-separated resources more, whose tokens live 10 minutes whatever
//                    AS_TOKEN_TTL says (a gateway's own audience: its callers' tokens outlive
//                    the short-lived upstream tokens a test waits out)
//   AS_NO_ISS        when 1, the server neither advertises nor sends RFC 9207 `iss` (as many
//                    servers do not): its metadata lacks authorization_response_iss_parameter_supported
//                    and its authorization responses lack `iss`
// It listens on an ephemeral 127.0.0.1 port and prints one JSON line {"issuer": "http://127.0.0.1:<port>"}
// once it serves. What it offers: open dynamic client registration (RFC 7591, /reg), the
// authorization code grant with PKCE S256 required, JWT access tokens (RS256, keys at /jwks) whose
// audience is the requested resource, rotating refresh tokens (spending a rotated one again
// revokes the whole grant), token revocation (RFC 7009, advertised as revocation_endpoint), and
// oidc-provider's development login and consent forms, where any login name signs in as the
// account of that name (its `sub`).
import { createServer } from 'node:http';
import { createRequire } from 'node:module';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';

const modules = process.env.AS_NODE_MODULES;
if (!modules) throw new Error('AS_NODE_MODULES must name the node_modules directory holding oidc-provider');
// The fixture lives outside that directory, so the package is found by path, not by name.
const entry = createRequire(join(modules, 'resolve.js')).resolve('oidc-provider');
const { default: Provider } = await import(pathToFileURL(entry).href);

const resources = (process.env.AS_RESOURCES ?? '').split(',').filter(Boolean);
const callerResources = (process.env.AS_CALLER_RESOURCES ?? '').split(',').filter(Boolean);
const tokenTtl = Number(process.env.AS_TOKEN_TTL ?? 30);
const noIss = process.env.AS_NO_ISS === '1';

// Test controls, for a test that must make two refreshes overlap whatever the machine's speed:
// POST /test/hold-tokens makes the token endpoint hold every request it gets (unanswered)
// until POST /test/release-tokens, which hands them on in order; GET /test/held-tokens says
// how many it holds now ({"held": n}).
let holding = false;
let held = [];
function withTestControls(handle) {
  return (req, res) => {
    const reply = (body) => {
      res.setHeader('content-type', 'application/json');
      res.end(JSON.stringify(body));
    };
    const path = req.url.split('?')[0];
    if (req.method === 'POST' && path === '/test/hold-tokens') {
      holding = true;
      return reply({ holding });
    }
    if (req.method === 'POST' && path === '/test/release-tokens') {
      holding = false;
      const waiting = held;
      held = [];
      waiting.forEach((go) => go());
      return reply({ released: waiting.length });
    }
    if (req.method === 'GET' && path === '/test/held-tokens') return reply({ held: held.length });
    if (holding && path === '/token') {
      held.push(() => handle(req, res));
      return undefined;
    }
    return handle(req, res);
  };
}

// The port is known only once listening, and the issuer names it: listen first, then build
// the provider and hand it the requests (none can arrive before this callback returns).
const server = createServer();
server.listen(0, '127.0.0.1', () => {
  const issuer = `http://127.0.0.1:${server.address().port}`;
  const provider = new Provider(issuer, {
    features: {
      devInteractions: { enabled: true },
      registration: { enabled: true },
      revocation: { enabled: true },
      resourceIndicators: {
        enabled: true,
        defaultResource: (ctx, client, oneOf) => oneOf ?? undefined,
        useGrantedResource: () => true,
        getResourceServerInfo: (ctx, resource) => {
          const caller = callerResources.includes(resource);
          if (!caller && !resources.includes(resource)) throw new Provider.errors.InvalidTarget();
          return {
            scope: 'mcp:tools',
            audience: resource,
            accessTokenFormat: 'jwt',
            accessTokenTTL: caller ? 600 : tokenTtl,
            jwt: { sign: { alg: 'RS256' } },
          };
        },
      },
    },
    pkce: { required: () => true },
    rotateRefreshToken: true,
    // By default offline_access is dropped unless the user was prompted for consent in the
    // same request: issue a refresh token to every client registered for the grant instead.
    issueRefreshToken: async (ctx, client) => client.grantTypeAllowed('refresh_token'),
    scopes: ['openid', 'offline_access'],
    ttl: { RefreshToken: 3600, AuthorizationCode: 60, Interaction: 600, Session: 3600, Grant: 3600 },
    findAccount: async (ctx, sub) => ({ accountId: sub, claims: async () => ({ sub }) }),
  });
  if (noIss) {
    // oidc-provider always implements RFC 9207: strip it from what leaves the server.
    provider.use(async (ctx, next) => {
      await next();
      if (ctx.path.startsWith('/.well-known/') && ctx.body && typeof ctx.body === 'object') {
        delete ctx.body.authorization_response_iss_parameter_supported;
      }
      const location = ctx.response.get('location');
      if (location && location.includes('iss=')) {
        const url = new URL(location);
        url.searchParams.delete('iss');
        ctx.set('location', url.href);
      }
    });
  }
  provider.on('server_error', (ctx, error) => console.error('server_error', error));
  server.on('request', withTestControls(provider.callback()));
  console.log(JSON.stringify({ issuer }));
});
