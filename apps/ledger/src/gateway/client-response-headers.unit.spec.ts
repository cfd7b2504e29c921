import { clientResponseHeaders } from './upstream-caller.js';
import { errorShapeOf } from './provider-errors.js';

describe('what a provider answer carries to the client', () => {
  it('relays only what a provider answer tells a client: its form, request id, retry guidance and rate limits', () => {
    const providerHeaders = {
      'content-type': 'text/event-stream',
      'content-length': '42',
      'x-request-id': 'req_1',
      'request-id': 'req_anthropic',
      'retry-after': '7',
      'retry-after-ms': '7000',
      'x-should-retry': 'true',
      'openai-processing-ms': '12',
      'openai-version': '2020-10-01',
      'x-ratelimit-remaining-requests': '99',
      'anthropic-ratelimit-tokens-remaining': '1000',
    };
    const relayed = clientResponseHeaders({
      ...providerHeaders,
      connection: 'keep-alive',
      'transfer-encoding': 'chunked',
      'set-cookie': ['__cf_bm=secret'],
      'openai-organization': 'org-gateway-account',
      'openai-project': 'proj_gateway',
      'anthropic-organization-id': 'org-anthropic-account',
      'x-ledger-session': 'victim-session',
      'x-ledger-message': 'victim-message',
      'access-control-allow-origin': '*',
      'access-control-allow-credentials': 'true',
      'www-authenticate': 'Basic realm="phish"',
      'strict-transport-security': 'max-age=0',
      'content-security-policy': "script-src 'unsafe-inline'",
      // A redirect an SDK would follow with the client's ledger credential, and headers a browser acts on.
      location: 'https://attacker.example/steal',
      refresh: '0; url=https://attacker.example/',
      'clear-site-data': '"cookies", "storage"',
      link: '<https://attacker.example/x.js>; rel=preload; as=script',
      'cache-control': 'public, max-age=31536000',
      'x-frame-options': 'ALLOWALL',
      server: 'upstream/1.0',
    });
    expect(relayed).toEqual(providerHeaders);
  });

  it('answers errors in the provider shape whatever the case of the path', () => {
    expect(errorShapeOf('/GATEWAY/OpenAI/v1/chat/completions')).toBe('openai');
    expect(errorShapeOf('/gateway/Anthropic/v1/messages')).toBe('anthropic');
    expect(errorShapeOf('/v1/sessions')).toBeUndefined();
  });
});
