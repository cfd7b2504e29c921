import { clientResponseHeaders } from './upstream-caller.js';
import { errorShapeOf } from './provider-errors.js';

describe('what a provider answer carries to the client', () => {
  it('relays the provider headers, but not hop-by-hop ones, cookies, the account the keys belong to, or any speaking for the ledger', () => {
    const relayed = clientResponseHeaders({
      'content-type': 'text/event-stream',
      'x-request-id': 'req_1',
      'openai-processing-ms': '12',
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
    });
    expect(relayed).toEqual({
      'content-type': 'text/event-stream',
      'x-request-id': 'req_1',
      'openai-processing-ms': '12',
    });
  });

  it('answers errors in the provider shape whatever the case of the path', () => {
    expect(errorShapeOf('/GATEWAY/OpenAI/v1/chat/completions')).toBe('openai');
    expect(errorShapeOf('/gateway/Anthropic/v1/messages')).toBe('anthropic');
    expect(errorShapeOf('/v1/sessions')).toBeUndefined();
  });
});
