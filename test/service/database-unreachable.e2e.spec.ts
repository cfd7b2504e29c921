import pg from 'pg';
import { DataSource } from 'typeorm';
import { PG_POOL } from '../../apps/ledger/src/database/pg-pool-token.js';
import { APPEND_LOCK_KEY } from '../../libs/event-log/src/postgres/group-commit-writer.js';
import type { CuttableProxy } from '../support/cuttable-proxy.js';
import { startLedger, type LedgerUnderTest } from '../support/ledger-http.js';
import { eventually } from '../support/probe.js';
import { authorization } from '../support/test-credentials.js';

/** Far above the connect timeout below: a request still unanswered by then hangs. */
const HANG_MS = 8_000;

/** A request to `ledger`, given up on (and so failing the test) if unanswered after `HANG_MS`. */
async function answer(
  ledger: LedgerUnderTest,
  headers: Record<string, string>,
  method: string,
  route: string,
  body?: unknown,
) {
  const response = await fetch(`${ledger.baseUrl}${route}`, {
    method,
    headers,
    body: body === undefined ? undefined : JSON.stringify(body),
    signal: AbortSignal.timeout(HANG_MS),
  });
  return {
    status: response.status,
    retryAfter: response.headers.get('retry-after'),
    body: (await response.json()) as any,
  };
}

/**
 * A database that accepts connections and never answers (frozen, or a failed-over address that drops packets),
 * after every open connection was reset. Found in the thirty-seventh round: every request, `/health` included,
 * waited for ever on a new connection, and the log's LISTEN connection never came back.
 */
describe('a database that stops answering', () => {
  let ledger: LedgerUnderTest;
  let proxy: CuttableProxy;
  let headers: Record<string, string>;
  beforeAll(async () => {
    ledger = await startLedger({ LEDGER_DATABASE_CONNECT_TIMEOUT_MS: '1000' }, { proxied: true });
    proxy = ledger.proxy!;
    headers = { ...(await authorization(ledger.baseUrl, 'client')), 'content-type': 'application/json' };
  });
  afterAll(() => ledger?.close());

  const call = (method: string, route: string, body?: unknown) => answer(ledger, headers, method, route, body);

  it('is answered 503 within the connect timeout, health says down, and all works again once it answers', async () => {
    const { body: session } = await call('POST', '/v1/sessions', {});
    proxy.mode = 'mute';
    proxy.resetAll();

    const health = await call('GET', '/health');
    expect(health.status).toBe(503);
    expect(health.body).toMatchObject({ status: 'error', error: { database: {}, eventLog: {} } });
    // Within the one second either the ping gives up or the connection does; neither names the database's address.
    expect([health.body.error.database, health.body.error.eventLog]).toEqual([
      { status: 'down', message: expect.stringMatching(/^(no answer within 1000 ms|cannot be reached)$/) },
      {
        status: 'down',
        message: expect.stringMatching(
          /^(the event log did not answer within 1000 ms|the event log failed its check)$/,
        ),
      },
    ]);
    for (const [method, route, body] of [
      ['GET', `/v1/sessions/${session.id}`],
      ['GET', '/v1/sessions'],
      ['POST', '/v1/sessions', {}],
      ['POST', `/v1/sessions/${session.id}/messages`, { role: 'user', content: 'hello' }],
    ] as const) {
      const answer = await call(method, route, body);
      expect({ route, method, status: answer.status, retryAfter: answer.retryAfter, body: answer.body }).toEqual({
        route,
        method,
        status: 503,
        retryAfter: '1',
        body: { error: { code: 'database_unavailable', message: 'the database cannot be reached now; retry later' } },
      });
    }

    // The connections opened meanwhile stay unanswered: nothing may go on waiting for them.
    proxy.mode = 'forward';
    const written = await eventually(
      'a message recorded again',
      async () => {
        const answer = await call('POST', `/v1/sessions/${session.id}/messages`, { role: 'user', content: 'again' });
        return answer.status === 201 ? answer.body : undefined;
      },
      15_000,
    );
    const read = await call('GET', `/v1/sessions/${session.id}?minPosition=${written.position}`);
    expect(read.status).toBe(200);
    expect(read.body.messages.map((message: { id: string }) => message.id)).toEqual([written.id]);
    expect((await call('GET', '/health')).status).toBe(200);
  }, 60_000);

  it('says down while its connections hang, and up again on new ones: a hung check does not hold the next', async () => {
    expect((await call('GET', '/health')).status).toBe(200);
    // Every connection open now is cut half-open (a failover, a NAT that lost its state); new ones are forwarded.
    proxy.cutAll();
    await new Promise((resolve) => setTimeout(resolve, 1_100));
    const hung = await call('GET', '/health');
    expect(hung.status).toBe(503);
    await eventually(
      'health up again',
      async () => ((await call('GET', '/health')).status === 200 ? true : undefined),
      5_000,
    );
  }, 30_000);
});

/**
 * Decision 0064: a statement is bounded, by the server (it cancels one past the statement timeout) and by the client
 * (a server that stops answering on a connection already open). Found in the thirty-eighth round: a server frozen
 * with its connections open (its kernel still answers keep-alive probes) held every request on them for ever.
 */
describe('a database that stops answering on the connections already open', () => {
  let ledger: LedgerUnderTest;
  let admin: pg.Client;
  let headers: Record<string, string>;
  beforeAll(async () => {
    ledger = await startLedger({ LEDGER_DATABASE_STATEMENT_TIMEOUT_MS: '1000' }, { proxied: true });
    admin = new pg.Client({ connectionString: ledger.database.connectionString });
    await admin.connect();
    headers = { ...(await authorization(ledger.baseUrl, 'client')), 'content-type': 'application/json' };
  });
  afterAll(async () => {
    await admin?.end();
    await ledger?.close();
  });

  const call = (method: string, route: string, body?: unknown) => answer(ledger, headers, method, route, body);

  it('is answered 503 on each frozen connection, which is then closed: the service goes on, on new ones', async () => {
    const { body: session } = await call('POST', '/v1/sessions', {});
    expect(
      (await call('POST', `/v1/sessions/${session.id}/messages`, { role: 'user', content: 'before' })).status,
    ).toBe(201);
    expect((await call('GET', `/v1/sessions/${session.id}`)).status).toBe(200);
    // Every connection open now (pooled, leading a projection, listening) is frozen; new ones are forwarded. The
    // server ends their sessions, as its keep-alive probes do once unanswered: what they held (a projection's lead)
    // is free again, and the service, which never hears of it, must give up on them by itself.
    const frozen = ledger.proxy!.freezeAll();
    await admin.query('SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE client_port = ANY($1)', [frozen]);

    const refusals = new Set<string>();
    const written = await eventually(
      'a message recorded on new connections',
      async () => {
        const answer = await call('POST', `/v1/sessions/${session.id}/messages`, { role: 'user', content: 'after' });
        if (answer.status === 201) return answer.body;
        refusals.add(`${answer.status} ${answer.body.error.code}`);
      },
      30_000,
    );
    const read = await eventually(
      'the message read back once the projections are on new connections too',
      async () => {
        const answer = await call('GET', `/v1/sessions/${session.id}?minPosition=${written.position}`);
        if (answer.status === 200) return answer.body;
        refusals.add(`${answer.status} ${answer.body.error.code}`);
      },
      30_000,
    );
    expect(read.messages.map((message: { content: string }) => message.content)).toEqual(['before', 'after']);
    // A write on a connection that stopped answering may have been stored; a read is told to retry.
    expect([...refusals].filter((refusal) => !refusal.startsWith('503 database_'))).toEqual([]);
    expect(refusals.has('503 database_connection_lost')).toBe(true);
    expect((await call('GET', '/health')).status).toBe(200);
  }, 90_000);

  it("asks the server to probe its side of each connection, so that a vanished client's session ends", async () => {
    const settings = await ledger.app.get<pg.Pool>(PG_POOL).query<{ name: string; setting: string }>(
      `SELECT name, setting FROM pg_settings
        WHERE name LIKE 'tcp_keepalives_%' OR name = 'statement_timeout'
        ORDER BY name`,
    );
    expect(settings.rows).toEqual([
      { name: 'statement_timeout', setting: '1000' },
      { name: 'tcp_keepalives_count', setting: '3' },
      { name: 'tcp_keepalives_idle', setting: '10' },
      { name: 'tcp_keepalives_interval', setting: '5' },
    ]);
  });

  it('a statement held past the statement timeout is cancelled: 503 database_timeout, nothing stored', async () => {
    const { body: session } = await call('POST', '/v1/sessions', {});
    // Every append waits for this lock (one writer at a time across instances).
    await admin.query('SELECT pg_advisory_lock($1)', [APPEND_LOCK_KEY]);
    let refused: Awaited<ReturnType<typeof call>>;
    try {
      refused = await call('POST', `/v1/sessions/${session.id}/messages`, { id: 'held', role: 'user', content: 'x' });
    } finally {
      await admin.query('SELECT pg_advisory_unlock($1)', [APPEND_LOCK_KEY]);
    }
    expect(refused).toEqual({
      status: 503,
      retryAfter: '1',
      body: {
        error: {
          code: 'database_timeout',
          message: 'the database did not finish the request in time; nothing was done; retry later',
        },
      },
    });
    const events = await call('GET', `/v1/sessions/${session.id}/events`);
    expect(events.body.events.map((event: { type: string }) => event.type)).toEqual(['session.opened']);

    // Read once the session is in the read model, so that the read does not wait for the projection of it.
    await eventually(
      'the session read',
      async () => ((await call('GET', `/v1/sessions/${session.id}`)).status === 200 ? true : undefined),
      10_000,
    );
    await admin.query('BEGIN');
    try {
      await admin.query('LOCK TABLE sessions IN ACCESS EXCLUSIVE MODE');
      const read = await call('GET', `/v1/sessions/${session.id}`);
      expect({ status: read.status, code: read.body.error?.code }).toEqual({ status: 503, code: 'database_timeout' });
    } finally {
      await admin.query('COMMIT');
    }
    expect((await call('GET', `/v1/sessions/${session.id}`)).status).toBe(200);
  }, 30_000);
});

/**
 * A flood of reads that keeps every pooled connection busy is load, not an outage: found by the thirty-seventh round's
 * review, where one credential's 500 concurrent reads made `/health` answer 503 (its ping waited in the read pool).
 */
describe('health while the pools are full', () => {
  let ledger: LedgerUnderTest;
  beforeAll(async () => {
    ledger = await startLedger();
  });
  afterAll(() => ledger?.close());

  it('answers up to a flood of probes from a connection of its own', async () => {
    const pools = [
      ledger.app.get<pg.Pool>(PG_POOL),
      (ledger.app.get(DataSource).driver as unknown as { master: pg.Pool }).master,
    ];
    // Every connection not in use already (the projections hold theirs as long as they lead).
    const free = (pool: pg.Pool) => pool.options.max - pool.totalCount + pool.idleCount;
    const held = await Promise.all(pools.flatMap((pool) => Array.from({ length: free(pool) }, () => pool.connect())));
    expect(pools.map((pool) => pool.totalCount - pool.idleCount)).toEqual(pools.map((pool) => pool.options.max));
    try {
      const probes = await Promise.all(
        Array.from({ length: 50 }, () => fetch(`${ledger.baseUrl}/health`).then((response) => response.status)),
      );
      expect(new Set(probes)).toEqual(new Set([200]));
    } finally {
      for (const client of held) client.release();
    }
  });
});

/** A failover that leaves the address on a standby, or a server read-only by setting: every append would fail. */
describe('health on a database that takes no writes', () => {
  let ledger: LedgerUnderTest;
  beforeAll(async () => {
    ledger = await startLedger();
  });
  afterAll(() => ledger?.close());

  it('says the event log is down, naming why', async () => {
    const admin = new pg.Client({ connectionString: ledger.database.connectionString });
    await admin.connect();
    try {
      // Sessions opened from now on: the health checks' own connections open on their first check.
      await admin.query(`ALTER DATABASE "${admin.database}" SET default_transaction_read_only = on`);
    } finally {
      await admin.end();
    }
    const response = await fetch(`${ledger.baseUrl}/health`);
    expect(response.status).toBe(503);
    expect(await response.json()).toMatchObject({
      error: { eventLog: { status: 'down', message: 'the database takes no writes' } },
      info: { database: { status: 'up' } },
    });
  });
});
