import { rm } from 'node:fs/promises';
import net from 'node:net';
import {
  freePort,
  reachableTempDir,
  startService,
  waitUntilHealthy,
  type ServiceProcess,
} from '../support/service-process.js';
import { connectSse, type SseConnection } from '../support/sse-client.js';
import { createTestDatabase, type TestDatabase } from '../support/test-database.js';
import { authorization } from '../support/test-credentials.js';
import { startLedger, type LedgerUnderTest } from '../support/ledger-http.js';
import { assembled, LiveState, readView } from './live-state.js';

const words = (count: number) => Array.from({ length: count }, (_, index) => `w${index}`);

/** An assistant response: thinking, a tool call, then a long streamed answer, posted in batches. */
function response(length: number): object[] {
  const chunks: object[] = [
    { type: 'llm_response_created' },
    { type: 'thinking.start' },
    { type: 'thinking.delta', text: 'hmm' },
    { type: 'thinking.complete', text: 'hmm' },
  ];
  const tool = { id: 'call_1', tool: { name: 'search', serverId: 's' }, arguments: { q: 'x' }, status: 'pending' };
  chunks.push(
    { type: 'mcp_tool_pending', responses: [tool] },
    { type: 'mcp_tool_complete', responses: [{ ...tool, status: 'done', response: 'found' }] },
  );
  chunks.push({ type: 'llm_response_created' }, { type: 'text.start' });
  let text = '';
  for (const word of words(length)) {
    text += ` ${word}`;
    chunks.push({ type: 'text.delta', text });
  }
  chunks.push({ type: 'text.complete', text }, { type: 'block_complete' });
  return chunks.map((chunk, index) => ({ seq: index + 1, ...chunk }));
}

async function until(condition: () => boolean | Promise<boolean>, what: string, timeoutMs = 20_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await condition())) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 10));
  }
}

/** A session with a user message and an assistant message `a1` to stream into, as the principal named `as`. */
async function conversation(ledger: LedgerUnderTest, as?: string) {
  const post = (path: string, body: object) => ledger.request('POST', path, body, undefined, as);
  const sessionId: string = (await post('/v1/sessions', { title: 'live' })).body.id;
  await post(`/v1/sessions/${sessionId}/messages`, { id: 'u1', role: 'user', content: 'go' });
  const created = await post(`/v1/sessions/${sessionId}/messages`, { id: 'a1', role: 'assistant' });
  return { sessionId, position: created.body.position as number };
}

async function stream(
  ledger: LedgerUnderTest,
  sessionId: string,
  messageId: string,
  chunks: object[],
  batch: number,
  pauseMs: number,
  as?: string,
): Promise<number> {
  let position = 0;
  for (let start = 0; start < chunks.length; start += batch) {
    const appended = await ledger.request(
      'POST',
      `/v1/sessions/${sessionId}/messages/${messageId}/chunks`,
      chunks.slice(start, start + batch),
      undefined,
      as,
    );
    expect(appended.status).toBe(200);
    position = appended.body.position;
    if (pauseMs > 0) await new Promise((resolve) => setTimeout(resolve, pauseMs));
  }
  return position;
}

describe('live session feed, every update delivered (no coalescing)', () => {
  let ledger: LedgerUnderTest;
  beforeAll(async () => {
    ledger = await startLedger({ LEDGER_LIVE_COALESCE_MS: '0', LEDGER_LIVE_HEARTBEAT_MS: '100' });
  });
  afterAll(async () => {
    await ledger?.close();
  });

  it('resumes across 20 disconnects with no gap and no duplicate: at every id the client holds exactly the log state at that position', async () => {
    const { sessionId } = await conversation(ledger);
    const url = `${ledger.baseUrl}/v1/sessions/${sessionId}/live`;
    const producing = stream(ledger, sessionId, 'a1', response(200), 4, 15);

    let state = new LiveState();
    const ids: bigint[] = [];
    const checkpoints: { id: string; state: LiveState }[] = [];
    let resumeFrom: string | undefined;
    for (let connection = 0; connection <= 20; connection += 1) {
      const cutAfter = connection === 20 ? Infinity : 3 + ((connection * 7) % 11);
      let received = 0;
      let committed = state.clone();
      const client: SseConnection = connectSse(url, {
        lastEventId: resumeFrom,
        onEvent: (event) => {
          state.apply(event);
          if (event.id !== undefined) {
            ids.push(BigInt(event.id));
            committed = state.clone();
          }
          received += 1;
          if (received >= cutAfter) client.close();
        },
      });
      expect((await client.opened).status).toBe(200);
      // A resume's catch-up is the difference to now, in a few updates: once the producer is done, a connection
      // may never get `cutAfter` more (a client behind it on a busy machine). It, and the last, end holding the end.
      const ended = client.ended.then(() => 'ended' as const);
      const end = await Promise.race([producing, ended]);
      if (end !== 'ended') {
        await until(() => received >= cutAfter || BigInt(client.lastEventId() ?? 0) >= BigInt(end), 'the last update');
        client.close();
      }
      await client.ended;
      // Updates after the last id belong to a position not wholly received: the resume sends that position again.
      state = committed.clone();
      resumeFrom = client.lastEventId();
      if (resumeFrom) checkpoints.push({ id: resumeFrom, state: committed });
    }

    expect(ids.length).toBeGreaterThan(20);
    ids.forEach((id, index) => index > 0 && expect(id).toBeGreaterThan(ids[index - 1]));
    for (const { id, state: held } of checkpoints) {
      const atThatPosition = await ledger.request('GET', `/v1/sessions/${sessionId}?at=${id}`);
      expect({
        id,
        messages: assembled(
          held,
          atThatPosition.body.messages.map((m: { id: string }) => m.id),
        ),
      }).toEqual({ id, messages: readView(atThatPosition.body.messages) });
    }
    const final = await ledger.request('GET', `/v1/sessions/${sessionId}?minPosition=${ids.at(-1)}`);
    expect(assembled(state, ['u1', 'a1'])).toEqual(readView(final.body.messages));
    expect(final.body.messages[1].blocks.at(-1).content).toBe(` ${words(200).join(' ')}`);
  });

  it('a snapshot read, then live from its position, loses and repeats nothing; heartbeats keep an idle stream open', async () => {
    const { sessionId } = await conversation(ledger);
    const streamed = await stream(ledger, sessionId, 'a1', response(10).slice(0, 6), 6, 0);
    const snapshot = await ledger.request('GET', `/v1/sessions/${sessionId}?minPosition=${streamed}`);
    const state = new LiveState();
    for (const message of snapshot.body.messages) {
      state.messages.set(message.id, message);
      message.blocks.forEach((block: object, index: number) =>
        state.blocks.set((block as { id: string }).id, { ...block, index }),
      );
    }
    const seen: string[] = [];
    const client = connectSse(`${ledger.baseUrl}/v1/sessions/${sessionId}/live?from=${snapshot.body.position}`, {
      onEvent: (event) => {
        state.apply(event);
        if (event.id) seen.push(event.id);
      },
    });
    expect((await client.opened).status).toBe(200);
    await until(() => client.comments.includes('heartbeat'), 'a heartbeat');
    expect(client.events).toEqual([]);
    const end = await stream(ledger, sessionId, 'a1', response(10).slice(6), 3, 0);
    await until(() => client.lastEventId() === String(end), 'the last update');
    client.close();
    expect(seen.every((id) => BigInt(id) > BigInt(snapshot.body.position))).toBe(true);
    const final = await ledger.request('GET', `/v1/sessions/${sessionId}?minPosition=${end}`);
    expect(assembled(state, ['u1', 'a1'])).toEqual(readView(final.body.messages));
  });

  it('refuses a resume point it never sent, an unknown session and unstorable prefixes, before streaming', async () => {
    const { sessionId } = await conversation(ledger);
    const ahead = connectSse(`${ledger.baseUrl}/v1/sessions/${sessionId}/live`, { lastEventId: '999999999' });
    expect(await ahead.opened).toMatchObject({
      status: 422,
      body: { error: { code: 'position_beyond_head', field: 'Last-Event-ID' } },
    });
    const garbage = connectSse(`${ledger.baseUrl}/v1/sessions/${sessionId}/live?from=abc`);
    expect(await garbage.opened).toMatchObject({ status: 400, body: { error: { field: 'from' } } });
    expect((await connectSse(`${ledger.baseUrl}/v1/sessions/missing/live`).opened).status).toBe(404);
    // The raw feed's prefixes are bound for PostgreSQL, which takes no NUL.
    for (const [query, field] of [
      ['types=chunk.%00', 'types'],
      ['streams=session-%00', 'streams'],
    ])
      expect(await connectSse(`${ledger.baseUrl}/v1/events/live?${query}`).opened).toMatchObject({
        status: 400,
        body: { error: { field } },
      });
  });
});

describe('live session feed for many clients (coalescing on)', () => {
  let ledger: LedgerUnderTest;
  beforeAll(async () => {
    ledger = await startLedger({ LEDGER_LIVE_MAX_BUFFERED_BYTES: '65536', LEDGER_LIVE_MAX_PER_CREDENTIAL: '1000' });
  });
  afterAll(async () => {
    await ledger?.close();
  });

  it('200 concurrent clients each end with the state of the read model; updates are coalesced', async () => {
    const { sessionId } = await conversation(ledger);
    const clients = Array.from({ length: 200 }, () => {
      const state = new LiveState();
      const connection = connectSse(`${ledger.baseUrl}/v1/sessions/${sessionId}/live`, {
        onEvent: (event) => state.apply(event),
      });
      return { state, connection };
    });
    for (const { connection } of clients) expect((await connection.opened).status).toBe(200);
    const chunks = response(150);
    const end = await stream(ledger, sessionId, 'a1', chunks, 2, 0);
    await until(
      () => clients.every(({ connection }) => connection.lastEventId() === String(end)),
      'every client to reach the end',
      60_000,
    );
    const final = await ledger.request('GET', `/v1/sessions/${sessionId}?minPosition=${end}`);
    for (const { state, connection } of clients) {
      expect(assembled(state, ['u1', 'a1'])).toEqual(readView(final.body.messages));
      connection.close();
    }
    // The answer's block had ~150 states; clients got fewer, the last one always.
    const answerUpdates = clients.map(
      ({ connection }) =>
        connection.events.filter((event) => event.event === 'block' && event.data.type === 'main_text').length,
    );
    expect(Math.min(...answerUpdates)).toBeGreaterThan(0);
    expect(Math.max(...answerUpdates)).toBeLessThan(150);
  });

  it('a stalled client is cut off with its resume id while the others get everything, and it resumes to the full state', async () => {
    const { sessionId } = await conversation(ledger);
    const live = `${ledger.baseUrl}/v1/sessions/${sessionId}/live`;
    const stalled = connectSse(live);
    const healthy = new LiveState();
    const other = connectSse(live, { onEvent: (event) => healthy.apply(event) });
    expect((await stalled.opened).status).toBe(200);
    expect((await other.opened).status).toBe(200);
    stalled.stall();
    // Long snapshots: the answer's updates carry ~60 KB each, ~12 MB in all, more than the socket buffers take.
    const big = response(20_000)
      .filter(
        (chunk, index, all) =>
          (chunk as { type: string }).type !== 'text.delta' || index % 100 === 0 || index === all.length - 3,
      )
      .map((chunk, index) => ({ ...chunk, seq: index + 1 }));
    const end = await stream(ledger, sessionId, 'a1', big, 1, 20);
    await until(() => other.lastEventId() === String(end), 'the healthy client to get everything', 60_000);
    const final = await ledger.request('GET', `/v1/sessions/${sessionId}?minPosition=${end}`);
    expect(assembled(healthy, ['u1', 'a1'])).toEqual(readView(final.body.messages));
    other.close();

    const metrics = await fetch(`${ledger.baseUrl}/metrics`, {
      headers: await authorization(ledger.baseUrl, 'admin'),
    }).then((response) => response.text());
    expect(metrics).toMatch(/ledger_live_disconnects_total\{reason="slow_client"\} [1-9]/);
    // The stalled client comes back with the last id it got and catches up to exactly the read model.
    stalled.close();
    const state = new LiveState();
    for (const event of stalled.events) state.apply(event);
    const resumed = connectSse(live, { lastEventId: stalled.lastEventId(), onEvent: (event) => state.apply(event) });
    await until(() => resumed.lastEventId() === String(end), 'the resumed client to catch up');
    resumed.close();
    expect(assembled(state, ['u1', 'a1'])).toEqual(readView(final.body.messages));
  });
});

describe('live feeds share a write budget (decision 0033)', () => {
  let ledger: LedgerUnderTest;
  beforeAll(async () => {
    // 10 writes a second for all streams together: a stream held back alone gets a 100 ms window.
    ledger = await startLedger({ LEDGER_LIVE_WRITES_PER_SECOND: '10', LEDGER_LIVE_COALESCE_MS: '20' });
  });
  afterAll(async () => {
    await ledger?.close();
  });

  const mainTextUpdates = (connection: SseConnection) =>
    connection.events.filter((event) => event.event === 'block' && event.data.type === 'main_text').length;

  it('watchers of a quiet session do not slow the feed of a busy one', async () => {
    const quiet = await conversation(ledger);
    const idle = Array.from({ length: 30 }, () => connectSse(`${ledger.baseUrl}/v1/sessions/${quiet.sessionId}/live`));
    for (const connection of idle) expect((await connection.opened).status).toBe(200);
    await until(() => idle.every((connection) => connection.events.length > 0), "the idle watchers' catch-ups");
    // Their catch-ups were prompt writes (15 a second, over the budget): they count for two seconds.
    await new Promise((resolve) => setTimeout(resolve, 2_200));
    const { sessionId } = await conversation(ledger);
    const busy = connectSse(`${ledger.baseUrl}/v1/sessions/${sessionId}/live`);
    expect((await busy.opened).status).toBe(200);
    const started = performance.now();
    const end = await stream(ledger, sessionId, 'a1', response(40), 1, 50);
    const elapsed = performance.now() - started;
    await until(() => busy.lastEventId() === String(end), 'the busy watcher');
    // Held back alone: a window of about 100 ms. Were the 30 idle ones counted as shares, it would be a second.
    expect(mainTextUpdates(busy)).toBeGreaterThan(elapsed / 400);
    for (const connection of [...idle, busy]) connection.close();
  });

  /**
   * The neighbour tenant's one busy feed, streamed beside a session of the default tenant that
   * streams `loudChunks` one per `loudPauseMs` to the feeds `openLoud` opens for it.
   */
  async function besideLoudTenant(
    openLoud: (sessionId: string) => SseConnection[],
    loudChunks: number,
    loudPauseMs: number,
  ) {
    await ledger.credentials.key('neighbour', { tenant: 'neighbour-tenant' });
    const loud = await conversation(ledger);
    const own = await conversation(ledger, 'neighbour');
    const loudFeeds = openLoud(loud.sessionId);
    const neighbour = connectSse(`${ledger.baseUrl}/v1/sessions/${own.sessionId}/live`, { as: 'neighbour' });
    for (const connection of [...loudFeeds, neighbour]) expect((await connection.opened).status).toBe(200);
    await until(() => neighbour.events.length > 0, "the neighbour's catch-up");
    await new Promise((resolve) => setTimeout(resolve, 2_200));
    const started = performance.now();
    const [loudEnd, end] = await Promise.all([
      stream(ledger, loud.sessionId, 'a1', response(loudChunks), 1, loudPauseMs),
      stream(ledger, own.sessionId, 'a1', response(100), 1, 50, 'neighbour'),
    ]);
    const elapsed = performance.now() - started;
    await until(() => neighbour.lastEventId() === String(end), "the neighbour's watcher");
    return { loud, loudFeeds, loudEnd, neighbour, elapsed };
  }

  it("one tenant's crowd of busy feeds does not stretch another tenant's window", async () => {
    const { loudFeeds, neighbour, elapsed } = await besideLoudTenant(
      (sessionId) => Array.from({ length: 8 }, () => connectSse(`${ledger.baseUrl}/v1/sessions/${sessionId}/live`)),
      100,
      50,
    );
    // Each tenant gets half the budget: the neighbour's one held-back stream a 200 ms window, the
    // crowd's eight a second each. Shared by stream, all nine would get 900 ms.
    expect(mainTextUpdates(neighbour)).toBeGreaterThan(elapsed / 400);
    for (const connection of [...loudFeeds, neighbour]) connection.close();
  });

  it("another tenant's raw feeds do not stretch a tenant's busy session feed", async () => {
    const {
      loud,
      loudFeeds: raw,
      loudEnd,
      neighbour,
      elapsed,
    } = await besideLoudTenant(
      () => Array.from({ length: 6 }, () => connectSse(`${ledger.baseUrl}/v1/events/live`)),
      70,
      100,
    );
    // Raw feeds pay the budget too, out of their own tenant's half: the neighbour keeps a 200 ms
    // window. Counted as everyone's prompt writes, six raw feeds took the whole budget.
    expect(mainTextUpdates(neighbour)).toBeGreaterThan(elapsed / 400);
    // Every raw event still arrives, each with its own id, in order: all that the loud session
    // recorded after its feeds opened, nothing missing, nothing twice.
    await until(
      () => raw.every((connection) => connection.lastEventId() === String(loudEnd)),
      'the raw feeds to reach the end',
    );
    const recorded = (await ledger.request('GET', `/v1/sessions/${loud.sessionId}/events?limit=1000`)).body.events as {
      position: number;
    }[];
    const expected = recorded.map((event) => String(event.position)).filter((id) => Number(id) > loud.position);
    expect(expected.length).toBeGreaterThan(70);
    for (const connection of raw) expect(connection.events.map((event) => event.id)).toEqual(expected);
    for (const connection of [...raw, neighbour]) connection.close();
  });
});

describe('a catch-up larger than the slow-client limit', () => {
  let ledger: LedgerUnderTest;
  beforeAll(async () => {
    ledger = await startLedger({ LEDGER_LIVE_MAX_BUFFERED_BYTES: '1048576' });
  });
  afterAll(async () => {
    await ledger?.close();
  });

  it('does not get a client that reads cut off by a change right after it', async () => {
    const { sessionId } = await conversation(ledger);
    // About 12 MB of answers: more than the socket buffers take at once.
    const answer = 'x'.repeat(800_000);
    for (let index = 0; index < 15; index += 1) {
      const id = `big${index}`;
      await ledger.request('POST', `/v1/sessions/${sessionId}/messages`, { id, role: 'assistant' });
      const chunks = [
        { seq: 1, type: 'llm_response_created' },
        { seq: 2, type: 'text.start' },
        { seq: 3, type: 'text.delta', text: answer },
      ];
      expect((await ledger.request('POST', `/v1/sessions/${sessionId}/messages/${id}/chunks`, chunks)).status).toBe(
        200,
      );
    }
    const reader = connectSse(`${ledger.baseUrl}/v1/sessions/${sessionId}/live`);
    expect((await reader.opened).status).toBe(200);
    const change = await ledger.request(
      'POST',
      `/v1/sessions/${sessionId}/messages/a1/chunks`,
      response(1).slice(0, 3),
    );
    expect(change.status).toBe(200);
    await until(
      () => reader.lastEventId() === String(change.body.position) || reader.events.some((e) => e.event === 'overflow'),
      'the change or a cut-off',
    );
    expect(reader.events.filter((event) => event.event === 'overflow')).toEqual([]);
    reader.close();
  });

  it('gives back the connection of a client that hung up while its stream was being set up', async () => {
    const { authorization: credential } = await authorization(ledger.baseUrl, 'client');
    const { hostname, port } = new URL(ledger.baseUrl);
    for (let attempt = 0; attempt < 10; attempt += 1) {
      const socket = net.connect(Number(port), hostname);
      await new Promise((resolve) => socket.once('connect', resolve));
      socket.write(
        `GET /v1/events/live HTTP/1.1\r\nhost: x\r\naccept: text/event-stream\r\nauthorization: ${credential}\r\n\r\n`,
      );
      socket.destroy();
    }
    const admin = await authorization(ledger.baseUrl, 'admin');
    const openClients = async () =>
      Number(
        /^ledger_live_clients (\d+)/m.exec(
          await fetch(`${ledger.baseUrl}/metrics`, { headers: admin }).then((response) => response.text()),
        )?.[1],
      );
    // Time for the service to take up every request; a stream left open stays open.
    await new Promise((resolve) => setTimeout(resolve, 1_000));
    await until(async () => (await openClients()) === 0, 'every stream to be closed', 5_000);
  });
});

describe('live feeds with two service instances on one database', () => {
  let database: TestDatabase;
  let first: ServiceProcess;
  let second: ServiceProcess;
  let dataDir: string | undefined;
  beforeAll(async () => {
    database = await createTestDatabase();
    // One data folder: whichever instance makes the admin key writes it there for both.
    const shared = await reachableTempDir('two-instances');
    dataDir = shared;
    const start = async () =>
      startService({
        PORT: String(await freePort()),
        DATABASE_URL: database.connectionString,
        LEDGER_DATA_DIR: shared,
      });
    [first, second] = await Promise.all([start(), start()]);
    await Promise.all([waitUntilHealthy(first), waitUntilHealthy(second)]);
  });
  afterAll(async () => {
    for (const service of [first, second]) {
      service?.child.kill('SIGTERM');
      await service?.exited;
    }
    await database?.drop();
    if (dataDir) await rm(dataDir, { recursive: true, force: true });
  });

  it('appends through one instance and watches through the other: session and raw feeds both get everything', async () => {
    const via = (service: ServiceProcess) => async (method: string, path: string, body?: unknown) => {
      const headers = { ...(await authorization(service.baseUrl, 'client')), 'content-type': 'application/json' };
      const response = await fetch(`${service.baseUrl}${path}`, {
        method,
        headers,
        body: body === undefined ? undefined : JSON.stringify(body),
      });
      return { status: response.status, body: (await response.json()) as any };
    };
    const writer = via(first);
    const sessionId: string = (await writer('POST', '/v1/sessions', {})).body.id;
    const state = new LiveState();
    const watcher = connectSse(`${second.baseUrl}/v1/sessions/${sessionId}/live`, {
      onEvent: (event) => state.apply(event),
    });
    const auditor = connectSse(
      `${second.baseUrl}/v1/events/live?types=chunk.text,message.&streams=session-${sessionId}`,
    );
    expect((await watcher.opened).status).toBe(200);
    expect((await auditor.opened).status).toBe(200);

    await writer('POST', `/v1/sessions/${sessionId}/messages`, { id: 'u1', role: 'user', content: 'go' });
    await writer('POST', `/v1/sessions/${sessionId}/messages`, { id: 'a1', role: 'assistant' });
    let end = 0;
    const chunks = response(60);
    for (let start = 0; start < chunks.length; start += 5)
      end = (await writer('POST', `/v1/sessions/${sessionId}/messages/a1/chunks`, chunks.slice(start, start + 5))).body
        .position;

    await until(() => watcher.lastEventId() === String(end), 'the watcher on the other instance');
    const read = await via(second)('GET', `/v1/sessions/${sessionId}?minPosition=${end}`);
    expect(assembled(state, ['u1', 'a1'])).toEqual(readView(read.body.messages));

    const { events } = (await writer('GET', `/v1/sessions/${sessionId}/events?limit=1000`)).body;
    const expected = events.filter(
      (event: { type: string }) => event.type.startsWith('chunk.text') || event.type.startsWith('message.'),
    );
    await until(() => auditor.events.length >= expected.length, 'the raw feed');
    expect(auditor.events.map((event) => [event.id, event.data.type, event.data.id])).toEqual(
      expected.map((event: { position: number; type: string; id: string }) => [
        String(event.position),
        event.type,
        event.id,
      ]),
    );

    // The raw feed resumes after the id it was given, on either instance.
    auditor.close();
    const middle = expected[Math.floor(expected.length / 2)];
    const resumed = connectSse(
      `${first.baseUrl}/v1/events/live?types=chunk.text,message.&streams=session-${sessionId}`,
      { lastEventId: String(middle.position) },
    );
    const rest = expected.filter((event: { position: number }) => event.position > middle.position);
    await until(() => resumed.events.length >= rest.length, 'the resumed raw feed');
    expect(resumed.events.map((event) => event.data.id)).toEqual(rest.map((event: { id: string }) => event.id));
    resumed.close();
    watcher.close();
  });
});

describe('a long coalescing window holds growing content, not the states a client waits for', () => {
  let ledger: LedgerUnderTest;
  beforeAll(async () => {
    ledger = await startLedger({ LEDGER_LIVE_COALESCE_MS: '10000' });
  });
  afterAll(async () => {
    await ledger?.close();
  });

  it('a message reaching its end goes out at once, with the content held for the window before it', async () => {
    const { sessionId } = await conversation(ledger);
    const watcher = connectSse(`${ledger.baseUrl}/v1/sessions/${sessionId}/live`);
    expect((await watcher.opened).status).toBe(200);
    await until(() => watcher.events.length > 0, 'the catch-up');
    const chunks = response(20);
    await stream(ledger, sessionId, 'a1', chunks.slice(0, -1), 1, 0);
    const end = await stream(ledger, sessionId, 'a1', chunks.slice(-1), 1, 0);
    // The window is ten seconds from the first delta's write: only the message's end, urgent, brings
    // the held content within three seconds of the last POST.
    await until(() => watcher.lastEventId() === String(end), 'the end of the message', 3_000);
    const last = (event: string) => watcher.events.filter((received) => received.event === event).at(-1)!.data;
    expect(last('message')).toMatchObject({ id: 'a1', status: 'success' });
    const answer = watcher.events.filter(
      (received) => received.event === 'block' && received.data.type === 'main_text',
    );
    expect(answer.at(-1)!.data).toMatchObject({ content: ` ${words(20).join(' ')}` });
    // The 20 deltas themselves were held and coalesced, not written one by one.
    expect(answer.length).toBeLessThan(5);
    watcher.close();
  });
});
