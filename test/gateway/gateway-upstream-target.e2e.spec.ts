import Anthropic from '@anthropic-ai/sdk';
import { request as httpRequest, type IncomingHttpHeaders } from 'node:http';
import type { LedgerUnderTest } from '../support/ledger-http.js';
import { startLedgerWithUpstream, startOwnServer, type OwnServer } from '../support/own-upstream.js';
import { startGateway, type GatewayFixture } from '../support/gateway-fixture.js';

/**
 * Attack (issue 14, outsider review): the upstream URL is `baseUrl + originalUrl.slice(prefix)`,
 * and `originalUrl` is the request target as the client wrote it. An absolute-form target
 * (`POST http://<anything>/gateway/openai/v1/chat/completions HTTP/1.1`, which node accepts and
 * Express, the router then, routed by its path) lets a producer choose what follows the configured base URL: another
 * path on the provider, or — when the base URL has no path — another port or host, which then
 * receives the upstream key. The upstream path must come from the route, never from the target.
 */
const MODEL = 'gpt-double';
const BODY = JSON.stringify({ model: MODEL, messages: [{ role: 'user', content: 'hi' }] });

/** A POST whose request line carries `target` verbatim (absolute-form when it starts with a scheme). */
function postRaw(baseUrl: string, target: string, key: string): Promise<number> {
  const { hostname, port } = new URL(baseUrl);
  return new Promise((resolve, reject) => {
    const outgoing = httpRequest(
      {
        hostname,
        port,
        method: 'POST',
        path: target,
        headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
      },
      (response) => {
        response.resume();
        response.on('end', () => resolve(response.statusCode!));
      },
    );
    outgoing.on('error', reject);
    outgoing.end(BODY);
  });
}

describe('gateway: the upstream target comes from the route, not from the request line', () => {
  let gateway: GatewayFixture;
  beforeAll(async () => {
    gateway = await startGateway({ openAiModels: [MODEL] });
  });
  afterAll(async () => {
    await gateway?.close();
  });

  it('an absolute-form request target does not move the call to another path on the provider', async () => {
    const key = await gateway.ledger.credentials.key('agent', { roles: ['producer', 'reader'] });
    gateway.double.script({ text: 'ok' });
    const before = gateway.double.exchanges.length;
    // 'http://h' is 8 characters: the slice of 18 cuts into the route and the provider is asked for /v1penai/v1/….
    await postRaw(gateway.ledger.baseUrl, 'http://h/gateway/openai/v1/chat/completions', key);
    const paths = gateway.double.exchanges.slice(before).map((exchange) => exchange.path);
    expect(paths).toEqual(paths.map(() => '/v1/chat/completions'));
  });
});

describe('gateway: an upstream key never leaves for a host or port the configuration does not name', () => {
  let ledger: LedgerUnderTest;
  let catcher: OwnServer;
  const caught: IncomingHttpHeaders[] = [];
  const upstreamKey = 'sk-upstream-must-stay-home';

  beforeAll(async () => {
    // The attacker's listener, on a port of the provider's host that the configuration never names.
    catcher = await startOwnServer((request, response) => {
      caught.push(request.headers);
      request.resume();
      response.writeHead(404, { 'content-type': 'application/json' }).end('{}');
    });
    // A provider served at its root (an OpenAI-compatible proxy such as LiteLLM): the configuration accepts it.
    ledger = await startLedgerWithUpstream({ protocol: 'openai', baseUrl: 'http://127.0.0.1', key: upstreamKey });
  });
  afterAll(async () => {
    await ledger?.close();
    await catcher?.close();
  });

  it('a producer cannot point the call at another port by the host part of an absolute-form target', async () => {
    const key = await ledger.credentials.key('agent', { roles: ['producer', 'reader'] });
    const { port } = catcher;
    // 'http://' + 11 characters is the prefix's length (18): what follows it, ':<port>/…', lands after the base URL.
    await postRaw(ledger.baseUrl, `http://aaaaaaaaaaa:${port}/gateway/openai/v1/chat/completions`, key);
    expect(caught.map((headers) => headers.authorization)).not.toContain(`Bearer ${upstreamKey}`);
    expect(caught).toHaveLength(0);
  });
});

describe('gateway: a provider answer cannot send the client, with its ledger credential, elsewhere', () => {
  let ledger: LedgerUnderTest;
  let provider: OwnServer;
  let catcher: OwnServer;
  const caught: IncomingHttpHeaders[] = [];

  beforeAll(async () => {
    catcher = await startOwnServer((request, response) => {
      caught.push(request.headers);
      request.resume();
      response.writeHead(404, { 'content-type': 'application/json' }).end('{}');
    });
    // A hostile provider (or a proxy before it): a redirect the client's fetch would follow, re-sending its headers.
    provider = await startOwnServer((request, response) => {
      request.resume();
      request.on('end', () =>
        response
          .writeHead(307, { location: `${catcher.baseUrl}/v1/messages`, refresh: `0; url=${catcher.baseUrl}` })
          .end(),
      );
    });
    ledger = await startLedgerWithUpstream({
      protocol: 'anthropic',
      baseUrl: `${provider.baseUrl}/v1`,
      key: 'sk-ant-hostile',
    });
  });
  afterAll(async () => {
    await ledger?.close();
    await provider?.close();
    await catcher?.close();
  });

  it('a redirect is relayed without its location: the SDK does not follow it with its x-api-key', async () => {
    const apiKey = await ledger.credentials.key('agent', { roles: ['producer', 'reader'] });
    const client = new Anthropic({ baseURL: `${ledger.baseUrl}/gateway/anthropic`, apiKey, maxRetries: 0 });
    const answer = client.messages.create({
      model: 'claude-hostile',
      max_tokens: 16,
      messages: [{ role: 'user', content: 'hi' }],
    });
    await expect(answer).rejects.toMatchObject({ status: 307 });
    expect(caught.map((headers) => headers['x-api-key'])).not.toContain(apiKey);
    expect(caught).toHaveLength(0);
  });
});
