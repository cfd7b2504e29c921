import { readdirSync } from 'node:fs';
import path from 'node:path';
import { startJwksServer, type JwksServer } from '../support/jwks-server.js';
import { startLedger, type LedgerUnderTest } from '../support/ledger-http.js';
import { probe } from '../support/probe.js';

/**
 * The console's routes (decision 0023): its built files with a CSP and the app's page for other
 * paths, its public configuration, and `GET /v1/me`. The permission table's test walks every
 * role against them; here, what they answer, to whom, and to hostile input.
 */
const ASSETS = path.resolve('dist/console/assets');

describe('the console routes', () => {
  let ledger: LedgerUnderTest;
  beforeAll(async () => {
    ledger = await startLedger();
  });
  afterAll(async () => {
    await ledger?.close();
  });

  it('serves the app page under a strict CSP, for /console and any app path', async () => {
    for (const route of ['/console', '/console/', '/console/sessions/s1', '/console/approvals?x=1']) {
      const page = await probe(ledger.baseUrl, 'GET', route);
      expect({ route, status: page.status, type: page.headers.get('content-type') }).toEqual({
        route,
        status: 200,
        type: 'text/html; charset=utf-8',
      });
      expect(page.body).toContain('<div id="root"></div>');
      const policy = page.headers.get('content-security-policy') ?? '';
      expect(policy).toContain("script-src 'self'");
      expect(policy).toContain("frame-ancestors 'none'");
      expect(policy).not.toContain('unsafe-inline');
      expect(page.headers.get('x-content-type-options')).toBe('nosniff');
      expect(page.headers.get('cache-control')).toBe('no-cache');
    }
  });

  it('serves built assets as themselves, immutable, and a missing file as 404, never the page', async () => {
    const script = readdirSync(ASSETS).find((name) => name.endsWith('.js'))!;
    const asset = await probe(ledger.baseUrl, 'GET', `/console/assets/${script}`);
    expect(asset.status).toBe(200);
    expect(asset.headers.get('content-type')).toBe('text/javascript; charset=utf-8');
    expect(asset.headers.get('cache-control')).toContain('immutable');
    for (const missing of ['/console/assets/nope.js', '/console/favicon.ico', '/console/assets/x']) {
      const answer = await probe(ledger.baseUrl, 'GET', missing);
      expect({ missing, status: answer.status, code: answer.body?.error?.code }).toEqual({
        missing,
        status: 404,
        code: 'not_found',
      });
    }
  });

  it('never reads a file outside the build, however the path is written', async () => {
    for (const sneaky of [
      '/console/..%2f..%2fpackage.json',
      '/console/%2e%2e/%2e%2e/package.json',
      '/console/assets/..%2f..%2f..%2fpackage.json',
      '/console/assets%2f..%2findex.html',
    ]) {
      const answer = await probe(ledger.baseUrl, 'GET', sneaky);
      expect(JSON.stringify(answer.body ?? '')).not.toContain('"block-ledger"');
      expect([200, 404]).toContain(answer.status);
    }
  });

  it('tells the console no OpenID sign-in is configured, without a credential', async () => {
    const config = await probe(ledger.baseUrl, 'GET', '/v1/console/config');
    expect(config).toMatchObject({ status: 200, body: { oidc: null } });
  });

  it('answers /v1/me with the credential as recorded: actor, subject, tenant and roles', async () => {
    const key = await ledger.credentials.key('me-reader', { tenant: 'acme', roles: ['reader', 'auditor'] });
    const me = await probe(ledger.baseUrl, 'GET', '/v1/me', { credential: key });
    expect(me.status).toBe(200);
    expect(me.body).toEqual({
      actor: expect.stringMatching(/^key:[a-z0-9]{16}:me-reader$/),
      subject: 'subject:me-reader',
      tenant: 'acme',
      roles: ['auditor', 'reader'],
    });
    const admin = await probe(ledger.baseUrl, 'GET', '/v1/me', { credential: ledger.credentials.adminKey });
    expect(admin.body).toMatchObject({ tenant: 'default', roles: ['admin'] });
    // Nothing a request claims about itself changes the answer.
    const claimed = await probe(ledger.baseUrl, 'GET', '/v1/me?tenant=default', {
      credential: key,
      headers: { 'x-tenant': 'default', 'x-actor': 'someone-else' },
    });
    expect(claimed.body).toEqual(me.body);
  });

  it('refuses /v1/me without a verified credential, and shows each tenant only itself', async () => {
    for (const refused of [
      {},
      { credential: 'bl_not-a-key' },
      { authorization: 'Basic dXNlcjpwYXNz' },
      { authorization: `Bearer ${'x'.repeat(6_000)}` },
      { headers: { 'x-api-key': 'garbage\u00e9' } },
    ]) {
      const answer = await probe(ledger.baseUrl, 'GET', '/v1/me', refused);
      expect({ status: answer.status, code: answer.body?.error?.code }).toEqual({
        status: 401,
        code: 'unauthenticated',
      });
    }
    const acme = await ledger.credentials.key('me-acme', { tenant: 'acme', roles: ['producer'] });
    const globex = await ledger.credentials.key('me-globex', { tenant: 'globex', roles: ['producer'] });
    const seenByAcme = await probe(ledger.baseUrl, 'GET', '/v1/me', { credential: acme });
    const seenByGlobex = await probe(ledger.baseUrl, 'GET', '/v1/me', { credential: globex });
    expect([seenByAcme.body?.tenant, seenByGlobex.body?.tenant]).toEqual(['acme', 'globex']);
    expect(JSON.stringify(seenByGlobex.body)).not.toContain('me-acme');
  });

  it('answers the public console routes alike for anyone, whatever credential is sent', async () => {
    const acme = await ledger.credentials.key('console-acme', { tenant: 'acme', roles: ['reader'] });
    for (const route of ['/console', '/console/sessions/s1', '/v1/console/config']) {
      const anonymous = await probe(ledger.baseUrl, 'GET', route);
      for (const caller of [{ credential: acme }, { credential: 'bl_not-a-key' }, { authorization: 'Basic Og==' }]) {
        const answer = await probe(ledger.baseUrl, 'GET', route, caller);
        expect({ route, status: answer.status, body: answer.body }).toEqual({
          route,
          status: anonymous.status,
          body: anonymous.body,
        });
      }
    }
  });

  it('answers hostile console paths and queries with the page or a 404, never an error', async () => {
    for (const hostile of [
      `/console/${'a'.repeat(4_000)}`,
      '/console/assets/%00.js',
      '/console/%E0%A4%A',
      '/console/assets/<script>.js',
      '/v1/console/config?oidc=https://evil.example&x=%00',
    ]) {
      const answer = await probe(ledger.baseUrl, 'GET', hostile);
      expect({ hostile: hostile.slice(0, 40), ok: [200, 400, 404].includes(answer.status) }).toEqual({
        hostile: hostile.slice(0, 40),
        ok: true,
      });
      expect(JSON.stringify(answer.body ?? '')).not.toContain('evil.example');
    }
  });
});

describe('the console with an OpenID provider', () => {
  let idp: JwksServer;
  let ledger: LedgerUnderTest | undefined;
  beforeAll(async () => {
    idp = await startJwksServer();
  });
  afterAll(async () => {
    await ledger?.close();
    await idp?.close();
  });

  it('names the provider and the public client id, and lets the CSP reach the provider only', async () => {
    ledger = await startLedger({
      LEDGER_OIDC_ISSUER: idp.issuer,
      LEDGER_OIDC_AUDIENCE: idp.audience,
      LEDGER_CONSOLE_OIDC_CLIENT_ID: 'ledger-console',
    });
    const config = await probe(ledger.baseUrl, 'GET', '/v1/console/config');
    expect(config.body).toEqual({ oidc: { issuer: idp.issuer, clientId: 'ledger-console' } });
    const page = await probe(ledger.baseUrl, 'GET', '/console');
    expect(page.headers.get('content-security-policy')).toContain(`connect-src 'self' ${idp.issuer}`);
    const token = await idp.sign({ sub: 'alice', tenant: 'acme', roles: ['reviewer'] });
    const me = await probe(ledger.baseUrl, 'GET', '/v1/me', { credential: token });
    expect(me.body).toEqual({
      actor: `jwt:${idp.issuer}#alice`,
      subject: `jwt:${idp.issuer}#alice`,
      tenant: 'acme',
      roles: ['reviewer'],
    });
  });
});
