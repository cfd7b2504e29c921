import { spawn } from 'node:child_process';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { jest } from '@jest/globals';
import type { Config } from '@jest/types';
import { createPostgresEventLog, type EventLog, type ProjectionEvent } from '#event-log';
import pg from 'pg';
import { loadBlockVectors, numberedChunks } from '../../libs/core/src/testing/block-vectors.js';
import { loadConfig } from '../../apps/ledger/src/config/ledger-config.js';
import { createLedgerApp } from '../../apps/ledger/src/ledger-app.js';
import type { ProjectionDefinition } from '../../apps/ledger/src/projections/projection.js';
import { rebuildReadModels } from '../../apps/ledger/src/projections/read-model-projections.js';
import { rebuildProjection } from '../../apps/ledger/src/projections/rebuild.js';
import { startLedger, type LedgerUnderTest } from '../support/ledger-http.js';

/** A hash over every read-model row in a fixed order: equal hashes, equal tables. */
async function readModelHash(database: pg.Client): Promise<Record<string, string>> {
  const hashes: Record<string, string> = {};
  for (const table of ['sessions', 'messages', 'message_blocks']) {
    const { rows } = await database.query<{ hash: string; count: string }>(
      `SELECT md5(coalesce(string_agg(to_jsonb(t)::text, '|' ORDER BY t.id), '')) AS hash, count(*) AS count FROM ${table} t`,
    );
    hashes[table] = `${rows[0].count}:${rows[0].hash}`;
  }
  return hashes;
}

const EVERYTHING_BUT_DATE: Config.FakeableAPI[] = [
  'hrtime',
  'nextTick',
  'performance',
  'queueMicrotask',
  'setImmediate',
  'clearImmediate',
  'setInterval',
  'clearInterval',
  'setTimeout',
  'clearTimeout',
];

/** `npm run rebuild`: the CLI in a process of its own, on the same database. */
function rebuildWithCli(databaseUrl: string): Promise<{ code: number | null; output: string }> {
  const cli = spawn(process.execPath, [path.resolve('dist/apps/ledger/src/cli.js'), 'rebuild'], {
    env: { ...process.env, DATABASE_URL: databaseUrl, LOG_LEVEL: 'warn' },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let output = '';
  cli.stdout.on('data', (chunk: Buffer) => (output += chunk.toString()));
  cli.stderr.on('data', (chunk: Buffer) => (output += chunk.toString()));
  return new Promise((resolve) => cli.once('exit', (code) => resolve({ code, output })));
}

async function scratchSchemas(database: pg.Client): Promise<string[]> {
  const { rows } = await database.query<{ name: string }>(
    `SELECT nspname AS name FROM pg_namespace WHERE nspname LIKE 'rebuild%'`,
  );
  return rows.map((row) => row.name);
}

describe('rebuilding the read models from the log', () => {
  let ledger: LedgerUnderTest;
  let database: pg.Client;
  beforeAll(async () => {
    ledger = await startLedger();
    database = new pg.Client({ connectionString: ledger.database.connectionString });
    await database.connect();
  });
  afterAll(async () => {
    await database.end();
    await ledger.close();
  });

  it('gives rows equal to the live ones, keeps serving reads meanwhile, and the live projection carries on after the swap', async () => {
    let last = 0;
    let sessionId = '';
    for (const vector of loadBlockVectors()) {
      sessionId = (await ledger.request('POST', '/v1/sessions', { title: vector.file })).body.id;
      await ledger.request('POST', `/v1/sessions/${sessionId}/messages`, { role: 'user', content: 'q' });
      const messageId = (await ledger.request('POST', `/v1/sessions/${sessionId}/messages`, { role: 'assistant' })).body
        .id;
      last = (
        await ledger.request('POST', `/v1/sessions/${sessionId}/messages/${messageId}/chunks`, numberedChunks(vector))
      ).body.position;
    }
    expect((await ledger.request('GET', `/v1/sessions/${sessionId}?minPosition=${last}`)).status).toBe(200);
    const live = await readModelHash(database);
    expect(Number(live.message_blocks.split(':')[0])).toBeGreaterThan(20);

    let reading = true;
    const readStatuses: number[] = [];
    const reader = (async () => {
      while (reading) readStatuses.push((await ledger.request('GET', `/v1/sessions/${sessionId}`)).status);
    })();
    const rebuilt = await ledger.request('POST', '/v1/admin/rebuild', undefined, undefined, 'admin');
    reading = false;
    await reader;
    expect(rebuilt).toMatchObject({ status: 200, body: { position: last } });
    expect(rebuilt.body.events).toBeGreaterThan(100);
    expect(readStatuses.length).toBeGreaterThan(0);
    expect(readStatuses.every((status) => status === 200)).toBe(true);
    expect(await readModelHash(database)).toEqual(live);
    // The swapped-in tables come with statistics of what they hold, not none until autovacuum comes round.
    const { rows: statistics } = await database.query<{ table: string; tuples: number }>(
      `SELECT relname AS table, reltuples::float8 AS tuples FROM pg_class
        WHERE relnamespace = 'public'::regnamespace AND relname = ANY($1) ORDER BY relname`,
      [['sessions', 'messages', 'message_blocks']],
    );
    expect(Object.fromEntries(statistics.map((row) => [row.table, row.tuples]))).toEqual(
      Object.fromEntries(Object.entries(live).map(([table, hash]) => [table, Number(hash.split(':')[0])])),
    );

    // A new response after the swap reaches the rebuilt tables through the live projection.
    const assistant = (await ledger.request('POST', `/v1/sessions/${sessionId}/messages`, { role: 'assistant' })).body
      .id;
    const after = await ledger.request('POST', `/v1/sessions/${sessionId}/messages/${assistant}/chunks`, [
      { seq: 1, type: 'text.start' },
      { seq: 2, type: 'text.delta', text: 'after the rebuild' },
    ]);
    const read = await ledger.request(
      'GET',
      `/v1/sessions/${sessionId}/messages/${assistant}?minPosition=${after.body.position}`,
    );
    expect(read.body.blocks).toMatchObject([{ type: 'main_text', status: 'streaming', content: 'after the rebuild' }]);
  });

  it('in pages of a few events, the next pages read while one is written, gives the same rows', async () => {
    const live = await readModelHash(database);
    const pool = new pg.Pool({ connectionString: ledger.database.connectionString, max: 3 });
    const eventLog = await createPostgresEventLog({ connectionString: ledger.database.connectionString });
    const pages: (number | undefined)[] = [];
    const reads: { from: bigint | undefined; checkpoint: bigint }[] = [];
    const counted: EventLog = {
      ...eventLog,
      readAllForProjections: async (options) => {
        pages.push(options?.maxCount);
        const page = await eventLog.readAllForProjections(options);
        reads.push({ from: options?.fromPosition, checkpoint: page.checkpoint });
        return page;
      },
    };
    try {
      const [{ result }] = await rebuildReadModels(pool, counted, ['block-read-models'], 7);
      expect(result.events).toBeGreaterThan(100);
      expect(pages.length).toBeGreaterThanOrEqual(result.events / 7);
      expect(new Set(pages)).toEqual(new Set([7]));
      // Each page read from where the one before it ended, and none after the one that caught up.
      expect(reads.map(({ from }) => from ?? 0n)).toEqual([
        0n,
        ...reads.slice(0, -1).map(({ checkpoint }) => checkpoint),
      ]);
      expect(reads.at(-1)!.checkpoint).toBe(result.position);
      expect(await readModelHash(database)).toEqual(live);
    } finally {
      await eventLog.close();
      await pool.end();
    }
  });

  it('fails whole when a page read ahead fails, leaving the live rows and no scratch schema', async () => {
    const live = await readModelHash(database);
    const pool = new pg.Pool({ connectionString: ledger.database.connectionString, max: 3 });
    const eventLog = await createPostgresEventLog({ connectionString: ledger.database.connectionString });
    let reads = 0;
    const failing: EventLog = {
      ...eventLog,
      readAllForProjections: (options) =>
        ++reads === 5 ? Promise.reject(new Error('page 5 lost')) : eventLog.readAllForProjections(options),
    };
    try {
      await expect(rebuildReadModels(pool, failing, ['block-read-models'], 7)).rejects.toThrow('page 5 lost');
      expect(reads).toBe(5);
      expect(await readModelHash(database)).toEqual(live);
      const { rows } = await pool.query(`SELECT nspname FROM pg_namespace WHERE nspname LIKE 'rebuild_%'`);
      expect(rows).toEqual([]);
    } finally {
      await eventLog.close();
      await pool.end();
    }
  });

  it('starts no read once handling a page has failed, however late the read under way comes back', async () => {
    const pool = new pg.Pool({ connectionString: ledger.database.connectionString, max: 3 });
    const eventLog = await createPostgresEventLog({ connectionString: ledger.database.connectionString });
    let releaseSecond!: () => void;
    const secondHeld = new Promise<void>((resolve) => (releaseSecond = resolve));
    const reads: Promise<unknown>[] = [];
    const held: EventLog = {
      ...eventLog,
      readAllForProjections: (options) => {
        const read = (async () => {
          if (reads.length === 1) await secondHeld;
          return eventLog.readAllForProjections(options);
        })();
        reads.push(read);
        return read;
      },
    };
    const failing: ProjectionDefinition<ProjectionEvent> = {
      name: 'failing-handle',
      version: 1,
      filter: {},
      reset: () => undefined,
      handle: () => Promise.reject(new Error('handle broke')),
    };
    try {
      await expect(rebuildProjection(pool, held, failing, ['sessions'], 7)).rejects.toThrow('handle broke');
      releaseSecond();
      await reads[1];
      // Past every microtask the second read's page could have chained a third read on.
      await new Promise((resolve) => setImmediate(resolve));
      expect(reads).toHaveLength(2);
    } finally {
      await eventLog.close();
      await pool.end();
    }
  });

  it('serializes concurrent rebuilds, from HTTP and from the CLI in another process: all end well', async () => {
    const sessionId = (await ledger.request('POST', '/v1/sessions', { title: 'concurrent rebuilds' })).body.id;
    const messages = `/v1/sessions/${sessionId}/messages`;
    await ledger.request('POST', messages, { role: 'user', content: 'q' });
    const messageId = (await ledger.request('POST', messages, { role: 'assistant' })).body.id;
    // Posted in small batches, each projected before the next: the live rows come from many projection batches,
    // the rebuilt ones from one, and they must still be equal, block positions included.
    const chunks = numberedChunks(loadBlockVectors().find((vector) => vector.file.includes('multi-round-tool-loop'))!);
    let last = 0;
    for (let start = 0; start < chunks.length; start += 3) {
      last = (await ledger.request('POST', `${messages}/${messageId}/chunks`, chunks.slice(start, start + 3))).body
        .position;
      expect((await ledger.request('GET', `/v1/sessions/${sessionId}?minPosition=${last}`)).status).toBe(200);
    }
    const alone = await readModelHash(database);

    // The clock stands still in this process, so its rebuilds start in the same millisecond.
    jest.useFakeTimers({ doNotFake: EVERYTHING_BUT_DATE, now: Date.now() });
    const [first, second, third, cli] = await Promise.all([
      ledger.request('POST', '/v1/admin/rebuild', undefined, undefined, 'admin'),
      ledger.request('POST', '/v1/admin/rebuild', undefined, undefined, 'admin'),
      ledger.request('POST', '/v1/admin/rebuild', undefined, undefined, 'admin'),
      rebuildWithCli(ledger.database.connectionString),
    ]).finally(() => jest.useRealTimers());
    expect([first.status, second.status, third.status]).toEqual([200, 200, 200]);
    expect(cli).toMatchObject({ code: 0 });
    expect(first.body.position).toBe(last);
    expect(second.body.position).toBe(last);
    expect(await readModelHash(database)).toEqual(alone);
    expect(await scratchSchemas(database)).toEqual([]);
  });

  it('drops the scratch schema a killed rebuild left behind, on the next rebuild and on the next start', async () => {
    const leaveScratchSchema = async (name: string) => {
      await database.query(`CREATE SCHEMA ${name}`);
      await database.query(`CREATE TABLE ${name}.message_blocks (LIKE public.message_blocks INCLUDING ALL)`);
    };
    await leaveScratchSchema('rebuild_block_read_models_1763800000000');
    expect(
      (await ledger.request('POST', '/v1/admin/rebuild?projection=tool-calls', undefined, undefined, 'admin')).status,
    ).toBe(200);
    expect(await scratchSchemas(database)).toEqual([]);

    await leaveScratchSchema('rebuild_tool_calls_1763800000001');
    const { connectionString } = ledger.database;
    // A data folder of its own: the default one (`.data`) may remember a checkpoint of another database.
    const dataDir = await mkdtemp(path.join(tmpdir(), 'rebuild-restart-'));
    const config = loadConfig({ LOG_LEVEL: 'silent', LEDGER_DATA_DIR: dataDir });
    const restarted = await createLedgerApp({ config, connectionString });
    try {
      await restarted.init();
      expect(await scratchSchemas(database)).toEqual([]);
    } finally {
      await restarted.close();
      await rm(dataDir, { recursive: true, force: true });
    }
  });
});
