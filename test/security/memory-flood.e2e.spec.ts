import { rm } from 'node:fs/promises';
import { authorization } from '../support/test-credentials.js';
import { createTestDatabase, type TestDatabase } from '../support/test-database.js';
import {
  freePort,
  reachableTempDir,
  startService,
  waitUntilHealthy,
  type ServiceProcess,
} from '../support/service-process.js';

/**
 * What the service keeps in memory is bounded by counts, not bytes: the shared log feed's window
 * (10,000 recent events), the session repository's folded states and the block projection's
 * (5,000 sessions each). An event can be as large as a request body (1 MiB), and a session's
 * folded state holds all its text, so one producer of any tenant, posting large text deltas into
 * a few dozen sessions, makes the process hold several times what it posted until it runs out of
 * heap and dies, taking every tenant's requests, live feeds and governance with it.
 *
 * The service runs with a small heap so the attack costs seconds: what is posted (about 1.5 times
 * that heap) is spread over sessions of about 11 MB each, so any one session fits it many times.
 */
const HEAP_MB = 224;
const SESSIONS = 32;
const DELTAS_PER_SESSION = 12;
const DELTA_CHARACTERS = 900_000;

describe('attack: large chunks held in memory by count, not by size', () => {
  let database: TestDatabase;
  let dataDir: string;
  let service: ServiceProcess;
  beforeAll(async () => {
    database = await createTestDatabase();
    dataDir = await reachableTempDir('memory-flood');
    service = startService({
      PORT: String(await freePort()),
      DATABASE_URL: database.connectionString,
      LEDGER_DATA_DIR: dataDir,
      NODE_OPTIONS: `--max-old-space-size=${HEAP_MB}`,
    });
    await waitUntilHealthy(service);
  });
  afterAll(async () => {
    service?.child.kill('SIGTERM');
    await service?.exited;
    await database?.drop();
    await rm(dataDir, { recursive: true, force: true });
  });

  it('a producer posting about 1.5 times the heap in text deltas leaves the service running', async () => {
    const headers = { ...(await authorization(service.baseUrl, 'flooder')), 'content-type': 'application/json' };
    let exitCode: number | null | undefined;
    void service.exited.then((code) => (exitCode = code));
    const post = async (route: string, body: unknown) => {
      const response = await fetch(`${service.baseUrl}${route}`, {
        method: 'POST',
        headers,
        body: JSON.stringify(body),
      }).catch(() => undefined);
      await response?.text();
      return response?.status;
    };
    const statuses: Record<string, number> = {};
    const count = (status: number | undefined) =>
      (statuses[status ?? 'no answer'] = (statuses[status ?? 'no answer'] ?? 0) + 1);
    for (let session = 0; session < SESSIONS && exitCode === undefined; session += 1) {
      const sessionId = `flood-${session}`;
      count(await post('/v1/sessions', { id: sessionId }));
      count(await post(`/v1/sessions/${sessionId}/messages`, { id: 'answer', role: 'assistant' }));
      const chunks = `/v1/sessions/${sessionId}/messages/answer/chunks`;
      count(await post(chunks, [{ seq: 1, type: 'text.start' }]));
      for (let delta = 0; delta < DELTAS_PER_SESSION && exitCode === undefined; delta += 1) {
        const text = String.fromCharCode(97 + ((session + delta) % 26)).repeat(DELTA_CHARACTERS);
        count(await post(chunks, [{ seq: delta + 2, type: 'text.delta', text }]));
      }
    }
    const health = await fetch(`${service.baseUrl}/health`).catch(() => undefined);
    const fatal = /FATAL ERROR[^\n]*/.exec(service.output())?.[0];
    expect({ statuses, exitCode, fatal, health: health?.status }).toEqual({
      statuses: { 200: SESSIONS * (DELTAS_PER_SESSION + 1), 201: SESSIONS * 2 },
      exitCode: undefined,
      fatal: undefined,
      health: 200,
    });
  }, 180_000);
});
