import { startLedger, type LedgerUnderTest } from '../support/ledger-http.js';

/**
 * A body in a media type no parser reads reached the routes as "no body", and every field of
 * `POST /v1/sessions` is optional: `id=mine` as a form made a session with a random id, 201. A
 * body the service does not read is refused, naming the content type.
 */
describe('attack: a body in a media type the service does not read', () => {
  let ledger: LedgerUnderTest;
  beforeAll(async () => {
    ledger = await startLedger();
  });
  afterAll(async () => {
    await ledger?.close();
  });

  it.each([
    ['application/x-www-form-urlencoded', 'id=mine&title=form'],
    ['application/xml', '<session id="mine"/>'],
    ['multipart/form-data; boundary=x', '--x\r\nContent-Disposition: form-data; name="id"\r\n\r\nmine\r\n--x--\r\n'],
  ])('%s is a 415 naming the content type', async (contentType, body) => {
    const response = await ledger.request('POST', '/v1/sessions', body, contentType);
    expect(response).toMatchObject({
      status: 415,
      body: { error: { code: 'unsupported_media_type', field: 'content-type' } },
    });
  });

  it('a request without a body still works where every field is optional', async () => {
    expect((await ledger.request('POST', '/v1/sessions')).status).toBe(201);
  });
});
