import path from 'node:path';
import type { JWTPayload } from 'jose';
import { startJwksServer, type JwksServer, type SignOptions } from '../support/jwks-server.js';
import { startLedger, type LedgerUnderTest } from '../support/ledger-http.js';
import {
  call,
  governanceFixture,
  requestTool,
  waitForToolCall,
  type GovernanceFixture,
} from '../support/governance-fixture.js';

const EVERY_ROLE_BUT_ADMIN = ['producer', 'reader', 'reviewer', 'auditor'];

/**
 * Bearer JWTs through the whole service: a ledger configured with LEDGER_OIDC_* discovers the
 * keys of a real OpenID provider over HTTP (test/support/jwks-server.ts) and lets in only what it
 * signed, for this audience, now. The principal the token names is the recorded actor, its tenant
 * scopes what it reads, and its `sub` is one principal for separation of duties.
 */
describe('bearer JWTs over HTTP', () => {
  let idp: JwksServer;
  let fixture: GovernanceFixture;
  let ledger: LedgerUnderTest;
  const url = () => ledger.baseUrl;
  const now = () => Math.floor(Date.now() / 1000);

  /** A token of the provider, presented under `name` (TestCredentials.use) so `call(..., name)` sends it. */
  async function token(name: string, claims: JWTPayload, options?: SignOptions): Promise<string> {
    const signed = await idp.sign(claims, options);
    ledger.credentials.use(name, signed);
    return name;
  }

  beforeAll(async () => {
    idp = await startJwksServer();
    fixture = await governanceFixture();
    ledger = await startLedger(
      fixture.env({
        LEDGER_OIDC_ISSUER: idp.issuer,
        LEDGER_OIDC_AUDIENCE: idp.audience,
        // Every unknown kid refetches the key set at once, so a key rotated in counts right away.
        LEDGER_OIDC_JWKS_COOLDOWN_MS: '0',
      }),
    );
  });
  afterAll(async () => {
    await ledger?.close();
    await fixture?.close();
    await idp?.close();
  });

  // First, while the service has never reached the provider: nothing about the token can be known.
  it('answers 503 identity_provider_unavailable to a JWT while the provider is down; API keys work', async () => {
    idp.setAvailable(false);
    try {
      const jwt = await token('jwt-early', { tenant: 'default', roles: EVERY_ROLE_BUT_ADMIN });
      const refused = await call(url(), 'GET', '/v1/tool-calls', undefined, jwt);
      expect(refused).toMatchObject({ status: 503, body: { error: { code: 'identity_provider_unavailable' } } });
      expect(JSON.stringify(refused.body)).not.toContain(idp.issuer);
      expect(await call(url(), 'GET', '/v1/tool-calls', undefined, 'key-holder')).toMatchObject({ status: 200 });
    } finally {
      idp.setAvailable(true);
    }
    expect(await call(url(), 'GET', '/v1/tool-calls', undefined, 'jwt-early')).toMatchObject({ status: 200 });
  });

  const roles = { tenant: 'default', roles: EVERY_ROLE_BUT_ADMIN };
  it.each<[string, () => Promise<string>]>([
    ['expired', () => idp.sign({ ...roles, iat: now() - 900, exp: now() - 300 })],
    ['not yet valid', () => idp.sign({ ...roles, nbf: now() + 300 })],
    ['for another audience', () => idp.sign({ ...roles, aud: 'another-service' })],
    ['from another issuer', () => idp.sign({ ...roles, iss: 'https://issuer.example' })],
    [
      'signed by a key the provider does not publish',
      async () => idp.sign(roles, { kid: await idp.addKey({ publish: false }) }),
    ],
    ['unsigned (alg: none)', () => idp.sign(roles, { alg: 'none' })],
    ["HS256 keyed with the provider's public key", () => idp.sign(roles, { alg: 'HS256' })],
  ])('refuses a token %s with 401 and WWW-Authenticate: Bearer', async (_, forge) => {
    const response = await fetch(`${url()}/v1/tool-calls`, { headers: { authorization: `Bearer ${await forge()}` } });
    expect(response.status).toBe(401);
    expect(response.headers.get('www-authenticate')).toMatch(/^Bearer\b/);
    expect(await response.json()).toMatchObject({ error: { code: 'unauthenticated' } });
  });

  it('refuses an unknown kid, then lets the same token in once the provider publishes the key', async () => {
    const kid = await idp.addKey({ publish: false });
    const jwt = await token('jwt-rotated', roles, { kid });
    expect(await call(url(), 'GET', '/v1/tool-calls', undefined, jwt)).toMatchObject({ status: 401 });
    idp.publishKey(kid);
    expect(await call(url(), 'GET', '/v1/tool-calls', undefined, jwt)).toMatchObject({ status: 200 });
    // A full rotation: only the new key is published, and tokens it signs verify.
    await idp.rotate();
    const rotated = await token('jwt-after-rotation', roles);
    expect(await call(url(), 'GET', '/v1/tool-calls', undefined, rotated)).toMatchObject({ status: 200 });
  });

  it('lets a valid token do what its roles allow, 403 elsewhere; the actor recorded is jwt:<iss>#<sub>', async () => {
    const producer = await token('jwt-producer', { sub: 'writer-1', tenant: 'acme', roles: ['producer'] });
    const auditor = await token('jwt-auditor', { sub: 'auditor-1', tenant: 'acme', roles: 'auditor reader' });
    const opened = await call(url(), 'POST', '/v1/sessions', { title: 'by token' }, producer);
    expect(opened.status).toBe(201);
    const sessionId = opened.body.id as string;
    const userMessage = { role: 'user', content: 'hi' };
    const message = await call(url(), 'POST', `/v1/sessions/${sessionId}/messages`, userMessage, producer);
    expect(message.status).toBe(201);

    expect(await call(url(), 'GET', '/v1/tool-calls', undefined, producer)).toMatchObject({
      status: 403,
      body: { error: { code: 'forbidden' } },
    });
    const events = await call(url(), 'GET', `/v1/sessions/${sessionId}/events`, undefined, auditor);
    expect(events.status).toBe(200);
    expect(events.body.events.length).toBeGreaterThan(1);
    const recorded = events.body.events.map((event: { metadata: { actor: string; tenant: string } }) => event.metadata);
    const actors = new Set(recorded.map((metadata: { actor: string }) => metadata.actor));
    expect(actors).toEqual(new Set([`jwt:${idp.issuer}#writer-1`]));
    expect(new Set(recorded.map((metadata: { tenant: string }) => metadata.tenant))).toEqual(new Set(['acme']));
  });

  it("scopes reads to the token's tenant: another tenant's session is 404", async () => {
    const acme = await token('jwt-acme', { sub: 'acme-user', tenant: 'acme', roles: ['producer'] });
    const globex = await token('jwt-globex', { sub: 'globex-user', tenant: 'globex', roles: EVERY_ROLE_BUT_ADMIN });
    const opened = (await call(url(), 'POST', '/v1/sessions', { title: 'acme only' }, acme)).body;
    // Read once the read models hold the session, so a 404 below is the tenant's doing, not lag.
    const session = `/v1/sessions/${opened.id}?minPosition=${opened.position}`;
    const own = await call(url(), 'GET', session, undefined, acme);
    expect(own).toMatchObject({ status: 200, body: { title: 'acme only' } });
    const missing = await call(url(), 'GET', session, undefined, globex);
    expect(missing).toMatchObject({ status: 404, body: { error: { code: 'session_not_found' } } });
    // An API key of the default tenant is another tenant too.
    expect(await call(url(), 'GET', session, undefined, 'key-holder')).toMatchObject({ status: 404 });
  });

  it('refuses the approval of a call to another token of the subject that requested it, and to a key made for it', async () => {
    const requesterClaims = { sub: 'sod-user', tenant: 'default', roles: ['producer', 'reviewer'] };
    const requester = await token('jwt-requester', requesterClaims);
    const opened = await call(url(), 'POST', '/v1/sessions', { title: 'governed by token' }, requester);
    const sessionId = opened.body.id as string;
    const target = path.join(fixture.workspace, 'by-token.txt');
    const tool = { server: 'filesystem', name: 'write_file' };
    const args = { path: target, content: 'x' };
    const { toolCallId } = await requestTool(url(), sessionId, 'call_jwt', tool, args, requester);
    const waiting = await waitForToolCall(url(), toolCallId, (toolCall) => toolCall.status === 'awaiting_approval');
    expect(waiting).toMatchObject({ guardian: { risk: 'high' }, requestedBy: `jwt:${idp.issuer}#sod-user` });
    const { argumentsSha256 } = waiting;

    const sameSubject = await token('jwt-same-subject', { ...requesterClaims, roles: ['reviewer'], jti: 'second' });
    // An API key made for the same person (its subject the token's) is that person too.
    const sameSubjectKey = 'key-of-sod-user';
    await ledger.credentials.key(sameSubjectKey, { roles: ['reviewer'], subject: `jwt:${idp.issuer}#sod-user` });
    for (const who of [requester, sameSubject, sameSubjectKey]) {
      const refused = await call(url(), 'POST', `/v1/tool-calls/${toolCallId}/approve`, { argumentsSha256 }, who);
      expect(refused).toMatchObject({ status: 403, body: { error: { code: 'self_approval' } } });
    }
    const reviewer = await token('jwt-reviewer', { sub: 'other-user', tenant: 'default', roles: ['reviewer'] });
    const approved = await call(url(), 'POST', `/v1/tool-calls/${toolCallId}/approve`, { argumentsSha256 }, reviewer);
    const decision = { approved: true, by: `jwt:${idp.issuer}#other-user` };
    expect(approved).toMatchObject({ status: 200, body: { decision } });
  });
});
