import { startJwksServer, type JwksServer } from '../support/jwks-server.js';
import { startLedger, type LedgerUnderTest } from '../support/ledger-http.js';
import { eventually, probe } from '../support/probe.js';
import { connectSse, type SseConnection } from '../support/sse-client.js';

const SESSION = 'watched';

/**
 * A live feed outlives the request that opened it, so its credential is checked again while it is
 * open: revoked, expired, or a token past its `exp`, the feed ends with `credential_ended` and
 * nothing written afterwards reaches it. Feeds of other credentials stay open and keep receiving.
 */
describe('open live feeds and the credential that opened them', () => {
  let idp: JwksServer;
  let ledger: LedgerUnderTest;
  const now = () => Math.floor(Date.now() / 1000);
  const url = (path: string) => `${ledger.baseUrl}${path}`;

  /** The session feed and the raw feed of `credential`, open and sent a write. */
  async function openFeeds(credential: string): Promise<SseConnection[]> {
    const feeds = [`/v1/sessions/${SESSION}/live`, '/v1/events/live'].map((path) =>
      connectSse(url(path), { key: credential }),
    );
    for (const feed of feeds) expect((await feed.opened).status).toBe(200);
    const written = await write('seen while the feeds are open');
    for (const feed of feeds) await reaches(feed, written);
    return feeds;
  }

  /** A write to the session; its position. */
  async function write(content: string): Promise<number> {
    const written = await probe(ledger.baseUrl, 'POST', `/v1/sessions/${SESSION}/messages`, {
      credential: await ledger.credentials.key('writer'),
      body: { role: 'user', content },
    });
    expect(written.status).toBe(201);
    return written.body.position;
  }

  /** The feed ended with `credential_ended`, as its last event, resuming from the last position it was sent. */
  async function expectEnded(feed: SseConnection): Promise<void> {
    await feed.ended;
    const last = feed.events.at(-1)!;
    expect(last.event).toBe('credential_ended');
    expect(last.data).toMatchObject({ reason: expect.stringContaining('revoked, expired') });
    expect(String(last.data.resumeFrom)).toBe(feed.lastEventId());
  }

  const reaches = (feed: SseConnection, position: number) =>
    eventually(`the feed reaches ${position}`, async () => feed.lastEventId() === String(position) || undefined);
  /** The last position the feed was sent. */
  const sentUpTo = (feed: SseConnection) => Math.max(...feed.events.filter((e) => e.id).map((e) => Number(e.id)));

  beforeAll(async () => {
    idp = await startJwksServer();
    ledger = await startLedger({
      LEDGER_OIDC_ISSUER: idp.issuer,
      LEDGER_OIDC_AUDIENCE: idp.audience,
      LEDGER_OIDC_CLOCK_SKEW_S: '0',
      // Every verification fetches the key set: a provider down makes any check of a token unanswerable.
      LEDGER_OIDC_JWKS_MAX_AGE_MS: '0',
    });
    const created = await probe(ledger.baseUrl, 'POST', '/v1/sessions', {
      credential: await ledger.credentials.key('writer'),
      body: { id: SESSION },
    });
    expect(created.status).toBe(201);
  });
  afterAll(async () => {
    await ledger?.close();
    await idp?.close();
  });

  it("ends a key's feeds when the key is revoked, and only that key's", async () => {
    const revoked = await ledger.credentials.key('revoked-watcher', { roles: ['reader', 'auditor'] });
    const kept = await ledger.credentials.key('kept-watcher', { roles: ['reader', 'auditor'] });
    const [revokedFeeds, keptFeeds] = [await openFeeds(revoked), await openFeeds(kept)];
    const keyId = /^blk_([a-z0-9]{16})_/.exec(revoked)![1];
    const revocation = await probe(ledger.baseUrl, 'DELETE', `/v1/admin/keys/${keyId}`, {
      credential: ledger.credentials.adminKey,
    });
    expect(revocation.status).toBe(200);
    for (const feed of revokedFeeds) await expectEnded(feed);
    const after = await write('seen by the kept key only');
    for (const feed of revokedFeeds) expect(sentUpTo(feed)).toBeLessThan(after);
    for (const feed of keptFeeds) {
      await reaches(feed, after);
      expect(feed.events.some((event) => event.event === 'credential_ended')).toBe(false);
      feed.close();
    }
  });

  it("ends a key's feeds when the key expires, not before", async () => {
    const expiresAt = Date.now() + 2_000;
    const expiring = await ledger.credentials.key('expiring-watcher', {
      roles: ['reader', 'auditor'],
      expiresAt: new Date(expiresAt).toISOString(),
    });
    const feeds = await openFeeds(expiring);
    for (const feed of feeds) {
      await expectEnded(feed);
      expect(Date.now()).toBeGreaterThanOrEqual(expiresAt);
    }
  });

  it("ends a token's feeds at its exp, with its provider down, and keeps those of a token still valid", async () => {
    const claims = { tenant: 'default', roles: ['reader', 'auditor'] };
    const exp = now() + 2;
    const expiring = await idp.sign({ ...claims, sub: 'expiring', exp });
    const valid = await idp.sign({ ...claims, sub: 'valid', exp: now() + 300 });
    const [expiringFeeds, validFeeds] = [await openFeeds(expiring), await openFeeds(valid)];
    // The provider goes down before exp: an expired token is refused all the same, without asking it again and again.
    idp.setAvailable(false);
    const fetchesBefore = idp.requests.jwks;
    try {
      for (const feed of expiringFeeds) {
        await expectEnded(feed);
        expect(Date.now()).toBeGreaterThanOrEqual(exp * 1000);
      }
      expect(idp.requests.jwks - fetchesBefore).toBeLessThan(10);
    } finally {
      idp.setAvailable(true);
    }
    const after = await write('after the token expired');
    for (const feed of expiringFeeds) expect(sentUpTo(feed)).toBeLessThan(after);
    for (const feed of validFeeds) {
      await reaches(feed, after);
      feed.close();
    }
  });
});
