import { gzipSync } from 'node:zlib';
import { startLedger, type LedgerUnderTest } from '../support/ledger-http.js';

/**
 * The body parser inflates gzip, deflate and br bodies. A body whose Content-Encoding it cannot
 * inflate failed with a 500, like a fault of the service, and was logged as one: it is the
 * client's error, a 400 naming the body.
 */
describe('attack: a body that does not inflate as its Content-Encoding says', () => {
  let ledger: LedgerUnderTest;
  let authorization: string;
  beforeAll(async () => {
    ledger = await startLedger();
    authorization = `Bearer ${await ledger.credentials.key('client')}`;
  });
  afterAll(async () => {
    await ledger?.close();
  });

  const post = (encoding: string, body: Uint8Array | string) =>
    fetch(`${ledger.baseUrl}/v1/sessions`, {
      method: 'POST',
      headers: { authorization, 'content-type': 'application/json', 'content-encoding': encoding },
      body,
    });

  it.each(['gzip', 'deflate', 'br'])('%s that is not is a 400 naming the body', async (encoding) => {
    const response = await post(encoding, '{"id":"not-compressed"}');
    expect(response.status).toBe(400);
    expect(await response.json()).toEqual({
      error: { code: 'bad_request', message: expect.any(String), field: '(body)' },
    });
  });

  it('a truncated gzip body is a 400 too, and a whole one is read', async () => {
    const whole = gzipSync(JSON.stringify({ id: 'compressed' }));
    expect((await post('gzip', whole.subarray(0, whole.length - 8))).status).toBe(400);
    expect((await post('gzip', whole)).status).toBe(201);
  });
});
