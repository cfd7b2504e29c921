import { randomUUID } from 'node:crypto';
import {
  createPostgresEventLog,
  databaseConnection,
  databaseFailure,
  NO_STREAM,
  ANY,
  type EventLog,
  type RecordedEvent,
} from '#event-log';
import pg from 'pg';
import type { ProjectionDefinition } from '../../apps/ledger/src/projections/projection.js';
import { CheckpointMovedError, ProjectionRunner, within } from '../../apps/ledger/src/projections/projection-runner.js';
import { createTestDatabase, type TestDatabase } from '../support/test-database.js';

/**
 * The projection runner on a real PostgreSQL: what it stores of its checkpoint when the log grows
 * with events it ignores, on which connection its batches commit, what a batch commits when its
 * checkpoint moved under it, and when `react` hears a batch.
 */
type Form = 'transaction' | 'statement';

describe('projection runner', () => {
  let database: TestDatabase;
  let eventLog: EventLog;
  let sql: pg.Pool;
  const opened: { stop(): Promise<void> }[] = [];
  const pools: pg.Pool[] = [];

  beforeAll(async () => {
    database = await createTestDatabase();
    eventLog = await createPostgresEventLog({ connectionString: database.connectionString });
    sql = new pg.Pool({ connectionString: database.connectionString, max: 2 });
    await sql.query('CREATE TABLE runner_rows (name text, position bigint, PRIMARY KEY (name, position))');
  });

  afterAll(async () => {
    // Bounded: a runner stuck on a connection it never gets must fail its test, not hang the run.
    const settled = (work: Promise<void>) => Promise.race([work, new Promise((resolve) => setTimeout(resolve, 5_000))]);
    await settled(Promise.all(opened.map((runner) => runner.stop())).then(() => undefined));
    await settled(Promise.all([...pools, sql].map((pool) => pool.end())).then(() => undefined));
    await eventLog.close();
    await database.drop();
  });

  const event = () => ({ id: randomUUID(), type: 'test.event', data: {} });

  interface Hooks extends Partial<Pick<ProjectionDefinition, 'react' | 'writesFor'>> {
    /** Runs on each batch before its rows are written. */
    readonly before?: (events: readonly RecordedEvent[]) => Promise<void>;
    /** The statement's text, instead of the plain insert (taking the same parameters). */
    readonly text?: string;
  }

  /**
   * A projection of the events of streams starting with `kept-<name>`: one row per event, written in the batch's
   * transaction (`transaction`) or given as one statement the runner moves the checkpoint in (`statement`).
   */
  function definition(name: string, hooks: Hooks = {}, form: Form = 'transaction'): ProjectionDefinition {
    const rowsOf = async (events: readonly RecordedEvent[]) => {
      await hooks.before?.(events);
      return {
        name: hooks.text === undefined ? 'runner-rows-write' : `runner-rows-${name}`,
        text: hooks.text ?? 'INSERT INTO runner_rows (name, position) SELECT $1, unnest($2::bigint[])',
        values: [name, events.map((recorded) => recorded.position.toString())],
      };
    };
    const common = {
      name,
      version: 1,
      filter: { streamPrefixes: [`kept-${name}`] },
      reset: () => undefined,
      ...(hooks.react ? { react: hooks.react } : {}),
      ...(hooks.writesFor ? { writesFor: hooks.writesFor } : {}),
    };
    if (form === 'statement') return { ...common, writes: rowsOf };
    return {
      ...common,
      async handle(events, { client }) {
        const { text, values } = await rowsOf(events);
        await client.query(text, values);
      },
    };
  }

  function start(
    projection: ProjectionDefinition,
    {
      poolSize = 2,
      onQuery,
      ...options
    }: {
      poolSize?: number;
      idleCheckpointMs?: number;
      batchIntervalMs?: number;
      retryDelayMs?: number;
      onError?: (error: Error) => void;
      /** Hears the text of each query the runner sends, on any of its connections. */
      onQuery?: (text: string) => void;
      /** Its pool's statements bounded so, as the service's are. */
      statementTimeoutMs?: number;
    } = {},
  ) {
    const { statementTimeoutMs } = options;
    const pool = new pg.Pool({
      ...(statementTimeoutMs === undefined
        ? { connectionString: database.connectionString }
        : {
            ...databaseConnection(database.connectionString, { connectTimeoutMs: 5_000, statementTimeoutMs }),
          }),
      max: poolSize,
    });
    pools.push(pool);
    if (onQuery)
      pool.on('connect', (client) => {
        const query = client.query.bind(client) as (...args: unknown[]) => unknown;
        (client as { query: unknown }).query = (config: string | { text: string }, ...rest: unknown[]) => {
          onQuery(typeof config === 'string' ? config : config.text);
          return query(config, ...rest);
        };
      });
    const runner = new ProjectionRunner(pool, eventLog, projection, { retryDelayMs: 20, ...options });
    runner.start();
    opened.push(runner);
    return runner;
  }

  async function stored(name: string): Promise<bigint> {
    const { rows } = await sql.query<{ position: string }>(
      'SELECT position FROM projection_checkpoints WHERE name = $1',
      [name],
    );
    return BigInt(rows[0]?.position ?? -1);
  }

  async function rows(name: string): Promise<bigint[]> {
    const result = await sql.query<{ position: string }>(
      'SELECT position FROM runner_rows WHERE name = $1 ORDER BY position',
      [name],
    );
    return result.rows.map((row) => BigInt(row.position));
  }

  /** Backends waiting on a lock that backend `pid` holds. */
  async function blockedBy(pid: number): Promise<number> {
    const { rows } = await sql.query<{ count: number }>(
      'SELECT count(*)::int AS count FROM pg_stat_activity WHERE $1 = ANY (pg_blocking_pids(pid))',
      [pid],
    );
    return rows[0].count;
  }

  async function eventually(check: () => Promise<boolean>, what: string): Promise<void> {
    const deadline = Date.now() + 10_000;
    while (!(await check())) {
      if (Date.now() > deadline) throw new Error(`not within 10 s: ${what}`);
      await new Promise((resolve) => setTimeout(resolve, 20));
    }
  }

  it('past events it ignores, it reaches the head at once and stores that checkpoint only with its next batch', async () => {
    const runner = start(definition('lazy'), { idleCheckpointMs: 600_000 });
    const first = await eventLog.append('kept-lazy-1', [event()], NO_STREAM);
    expect(await runner.waitForPosition(first.position, 10_000)).toBe(true);
    expect(await stored('lazy')).toBe(first.position);

    const ignored = await eventLog.append('other-lazy', [event(), event(), event()], NO_STREAM);
    expect(await runner.waitForPosition(ignored.position, 10_000)).toBe(true);
    // The reads of this instance see the head; the stored checkpoint stays where the last batch left it.
    expect(await runner.position()).toBe(ignored.position);
    expect(await stored('lazy')).toBe(first.position);

    const next = await eventLog.append('kept-lazy-1', [event()], ANY);
    expect(await runner.waitForPosition(next.position, 10_000)).toBe(true);
    await eventually(async () => (await stored('lazy')) === next.position, 'the next batch stores its checkpoint');
    expect(await rows('lazy')).toEqual([first.position, next.position]);
  });

  it('stores a checkpoint moved only past ignored events once idle, so an instance that does not lead sees it', async () => {
    start(definition('idle'), { idleCheckpointMs: 50 });
    const kept = await eventLog.append('kept-idle-1', [event()], NO_STREAM);
    await eventually(async () => (await stored('idle')) === kept.position, 'the first batch is stored');
    // A second instance of the same projection: it does not lead, so it knows only the stored checkpoint.
    const follower = start(definition('idle'), { idleCheckpointMs: 50 });
    const ignored = await eventLog.append('other-idle', [event(), event()], NO_STREAM);
    expect(await follower.waitForPosition(ignored.position, 10_000)).toBe(true);
    expect(await stored('idle')).toBe(ignored.position);
    expect(await rows('idle')).toEqual([kept.position]);
  });

  it('under steady traffic of events it ignores, its stored checkpoint still moves, so a follower sees it', async () => {
    start(definition('steady'), { idleCheckpointMs: 100 });
    const kept = await eventLog.append('kept-steady-1', [event()], NO_STREAM);
    await eventually(async () => (await stored('steady')) === kept.position, 'the first batch is stored');
    const follower = start(definition('steady'), { idleCheckpointMs: 100 });
    const first = await eventLog.append('other-steady', [event()], NO_STREAM);
    // Other events keep coming, each well within the idle time of the one before.
    let flowing = true;
    const traffic = (async () => {
      while (flowing) {
        await eventLog.append('other-steady', [event()], ANY);
        await new Promise((resolve) => setTimeout(resolve, 20));
      }
    })();
    try {
      expect(await follower.waitForPosition(first.position, 5_000)).toBe(true);
    } finally {
      flowing = false;
      await traffic;
    }
  });

  describe.each(['transaction', 'statement'] as const)('with its batch written as a %s', (form) => {
    it('commits its batches and checkpoints on the connection that holds its lead: it runs on a pool of one', async () => {
      // Watched from outside: the runner's own pool has no connection to spare for its reads.
      start(definition(`single-${form}`, {}, form), { poolSize: 1, idleCheckpointMs: 50 });
      const appended = await eventLog.append(`kept-single-${form}-1`, [event(), event()], NO_STREAM);
      const ignored = await eventLog.append(`other-single-${form}`, [event()], NO_STREAM);
      await eventually(
        async () => (await stored(`single-${form}`)) === ignored.position,
        'the idle checkpoint is stored',
      );
      expect(await rows(`single-${form}`)).toEqual(appended.events.map((recorded) => recorded.position));
    });

    it('a batch whose commit runs past the statement timeout is committed in smaller slices, each row once', async () => {
      const errors: Error[] = [];
      const name = `slow-${form}`;
      // 50 ms a row: the batch of 20 takes 1 s, against statements bounded at 300 ms.
      const text = `INSERT INTO runner_rows (name, position)
                    SELECT $1, position FROM unnest($2::bigint[]) AS position, LATERAL pg_sleep(0.05 + 0 * position)`;
      start(definition(name, { text }, form), {
        statementTimeoutMs: 300,
        onError: (error) => errors.push(error),
      });
      const appended = await eventLog.append(
        `kept-${name}-1`,
        Array.from({ length: 20 }, () => event()),
        NO_STREAM,
      );
      await eventually(async () => (await stored(name)) === appended.position, 'every slice committed');
      expect(await rows(name)).toEqual(appended.events.map((recorded) => recorded.position));
      expect(errors.length).toBeGreaterThan(0);
      expect(errors.map(databaseFailure)).toEqual(errors.map(() => 'timeout'));
    });

    // Four forks of a session of 105 MB of text made one jsonb parameter past PostgreSQL's 256 MB: retried whole for
    // ever, the batch stopped the block projection for every tenant.
    it('a batch the server refuses whole for what its rows hold is committed in halves, each row once', async () => {
      const errors: Error[] = [];
      const name = `refused-${form}`;
      // Refused (division by zero) for more than two rows at once.
      const text = `INSERT INTO runner_rows (name, position)
                    SELECT $1, position FROM unnest($2::bigint[]) AS position
                     WHERE 1 / (CASE WHEN cardinality($2::bigint[]) > 2 THEN 0 ELSE 1 END) = 1`;
      start(definition(name, { text }, form), { onError: (error) => errors.push(error) });
      const appended = await eventLog.append(
        `kept-${name}-1`,
        Array.from({ length: 9 }, () => event()),
        NO_STREAM,
      );
      await eventually(async () => (await stored(name)) === appended.position, 'every half committed');
      expect(await rows(name)).toEqual(appended.events.map((recorded) => recorded.position));
      expect(errors).toEqual([]);
    });

    it('a batch whose checkpoint another runner moved meanwhile commits none of its rows, and the runner follows the moved checkpoint', async () => {
      const errors: Error[] = [];
      let moves = 1;
      // While the first batch is handled, its checkpoint moves past that batch, as another runner (or a rebuild) would move it.
      start(
        definition(
          `moved-${form}`,
          {
            before: async (events) => {
              if (moves-- > 0)
                await sql.query('UPDATE projection_checkpoints SET position = $2 WHERE name = $1', [
                  `moved-${form}`,
                  events.at(-1)!.position.toString(),
                ]);
            },
          },
          form,
        ),
        { onError: (error) => errors.push(error) },
      );
      const first = await eventLog.append(`kept-moved-${form}-1`, [event(), event()], NO_STREAM);
      await eventually(async () => errors.length > 0, 'the batch fails on its checkpoint');
      expect(errors[0]).toBeInstanceOf(CheckpointMovedError);
      expect(await stored(`moved-${form}`)).toBe(first.position);
      // The runner starts again from where the checkpoint was moved: the first batch's rows are written by no one.
      const second = await eventLog.append(`kept-moved-${form}-1`, [event()], ANY);
      await eventually(async () => (await stored(`moved-${form}`)) === second.position, 'the next batch commits');
      expect(await rows(`moved-${form}`)).toEqual([second.position]);
    });

    it.each([
      ['before its batch is written', false],
      ['while its batch waits on that row', true],
    ])('a batch whose checkpoint row is deleted %s commits none of its rows', async (_, whileWaiting) => {
      const errors: Error[] = [];
      const name = `deleted-${whileWaiting ? 'waiting-' : ''}${form}`;
      let batches = 0;
      let deleted = Promise.resolve();
      const deleteRow = (client: pg.Pool | pg.ClientBase) =>
        client.query('DELETE FROM projection_checkpoints WHERE name = $1', [name]);
      // The second batch finds its checkpoint row gone, or waits on it under another transaction's lock and finds
      // it deleted when that transaction commits: the row is still in a snapshot taken before.
      const before = async () => {
        if ((batches += 1) !== 2) return;
        if (!whileWaiting) return void (await deleteRow(sql));
        const holder = await sql.connect();
        const { rows: held } = await holder.query<{ pid: number }>('SELECT pg_backend_pid() AS pid');
        await holder.query('BEGIN');
        await holder.query('SELECT 1 FROM projection_checkpoints WHERE name = $1 FOR UPDATE', [name]);
        deleted = (async () => {
          await eventually(async () => (await blockedBy(held[0].pid)) > 0, 'the batch waits on the checkpoint row');
          await deleteRow(holder);
          await holder.query('COMMIT');
          holder.release();
        })();
      };
      const runner = start(definition(name, { before }, form), { onError: (error) => errors.push(error) });
      const first = await eventLog.append(`kept-${name}-1`, [event()], NO_STREAM);
      expect(await runner.waitForPosition(first.position, 10_000)).toBe(true);
      await eventLog.append(`kept-${name}-1`, [event()], ANY);
      await eventually(async () => errors.length > 0, 'the batch fails on its checkpoint');
      await runner.stop();
      await deleted;
      expect(errors[0]).toBeInstanceOf(CheckpointMovedError);
      expect(await rows(name)).toEqual([first.position]);
    });

    it('react hears a batch before its transaction, and again after that transaction failed; the rows are written once', async () => {
      const heard: { what: 'react' | 'handle'; positions: bigint[] }[] = [];
      const positionsOf = (events: readonly RecordedEvent[]) => events.map((recorded) => recorded.position);
      let failures = 1;
      start(
        definition(
          `react-${form}`,
          {
            react: (events) => void heard.push({ what: 'react', positions: positionsOf(events) }),
            before: (events) => {
              heard.push({ what: 'handle', positions: positionsOf(events) });
              if (failures-- > 0) return Promise.reject(new Error('the first transaction fails'));
              return Promise.resolve();
            },
          },
          form,
        ),
      );
      const appended = await eventLog.append(`kept-react-${form}-1`, [event(), event()], NO_STREAM);
      const positions = appended.events.map((recorded) => recorded.position);
      await eventually(async () => (await rows(`react-${form}`)).length === 2, 'the batch is written after the retry');
      expect(await rows(`react-${form}`)).toEqual(positions);
      const heardAll = (what: 'react' | 'handle') =>
        heard.filter((entry) => entry.what === what).flatMap((entry) => entry.positions);
      // Each event reached react once per attempt, each time before handle saw it.
      expect(heardAll('react')).toEqual([...positions, ...positions]);
      expect(heardAll('handle')).toEqual([...positions, ...positions]);
      expect(heard[0].what).toBe('react');
      expect(heard.findIndex((entry) => entry.what === 'react' && entry !== heard[0])).toBeLessThan(
        heard.findLastIndex((entry) => entry.what === 'handle'),
      );
    });

    it('commits each batch, its rows and its checkpoint, in the round trips of its form', async () => {
      const sent: string[] = [];
      const runner = start(definition(`trips-${form}`, {}, form), { onQuery: (text) => sent.push(text) });
      const first = await eventLog.append(`kept-trips-${form}-1`, [event()], NO_STREAM);
      expect(await runner.waitForPosition(first.position, 10_000)).toBe(true);
      sent.length = 0;
      for (let index = 0; index < 2; index += 1) {
        const { position } = await eventLog.append(`kept-trips-${form}-1`, [event()], ANY);
        expect(await runner.waitForPosition(position, 10_000)).toBe(true);
      }
      const batch =
        form === 'statement'
          ? [expect.stringMatching(/^WITH projection_checkpoint AS \(\s*UPDATE projection_checkpoints/)]
          : [
              'BEGIN',
              expect.stringMatching(/^INSERT INTO runner_rows/),
              expect.stringMatching(/^UPDATE projection_checkpoints/),
              'COMMIT',
            ];
      expect(sent).toEqual([...batch, ...batch]);
      expect(await rows(`trips-${form}`)).toHaveLength(3);
    });
  });

  it('a batch with no event it writes for is not handled and commits nothing; react still hears it', async () => {
    const handled: string[] = [];
    const reacted: string[] = [];
    const runner = start(
      definition('writes', {
        writesFor: (recorded) => recorded.type === 'test.event',
        react: (events) => void reacted.push(...events.map((recorded) => recorded.type)),
        before: (events) => Promise.resolve(void handled.push(...events.map((recorded) => recorded.type))),
      }),
      { idleCheckpointMs: 600_000 },
    );
    const first = await eventLog.append('kept-writes-1', [event()], NO_STREAM);
    await eventually(async () => (await stored('writes')) === first.position, 'the first batch is stored');
    const passing = await eventLog.append('kept-writes-1', [{ ...event(), type: 'test.passing' }], ANY);
    expect(await runner.waitForPosition(passing.position, 10_000)).toBe(true);
    expect(reacted).toEqual(['test.event', 'test.passing']);
    expect(handled).toEqual(['test.event']);
    expect(await stored('writes')).toBe(first.position);
    expect(await rows('writes')).toEqual([first.position]);
  });

  it('puts its checkpoint into a statement of its own WITH RECURSIVE, however spaced, and commits both', async () => {
    const text = `with
      RECURSIVE counted(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM counted WHERE n < 2)
      INSERT INTO runner_rows (name, position) SELECT $1, unnest($2::bigint[])`;
    const runner = start(definition('recursive', { text }, 'statement'));
    const appended = await eventLog.append('kept-recursive-1', [event(), event()], NO_STREAM);
    expect(await runner.waitForPosition(appended.position, 10_000)).toBe(true);
    await eventually(async () => (await stored('recursive')) === appended.position, 'the checkpoint is stored');
    expect(await rows('recursive')).toEqual(appended.events.map((recorded) => recorded.position));
  });

  it.each([
    ['a leading comment', '-- rows\nINSERT INTO runner_rows (name, position) SELECT $1, unnest($2::bigint[])'],
    [
      'a comment before its first CTE',
      'WITH /* rows */ r(n) AS (SELECT 1) INSERT INTO runner_rows (name, position) SELECT $1, unnest($2::bigint[])',
    ],
    [
      'a CTE of the checkpoint move',
      'WITH projection_checkpoint AS (SELECT 1) INSERT INTO runner_rows (name, position) SELECT $1, unnest($2::bigint[])',
    ],
  ])('refuses a batch statement with %s, naming it, and writes nothing', async (shape, text) => {
    const errors: Error[] = [];
    const name = `shape-${shape.replace(/\W/g, '-')}`;
    const runner = start(definition(name, { text }, 'statement'), { onError: (error) => errors.push(error) });
    await eventLog.append(`kept-${name}-1`, [event()], NO_STREAM);
    await eventually(async () => errors.length > 0, 'the batch is refused');
    await runner.stop();
    expect(errors[0].message).toContain(`projection statement runner-rows-${name}: it must start with WITH and`);
    expect(await rows(name)).toEqual([]);
  });

  it('stops at once while it waits: a follower between its tries for the lead, a leader between batches (the first not held back)', async () => {
    start(definition('stopping'));
    const led = await eventLog.append('kept-stopping-1', [event()], NO_STREAM);
    await eventually(async () => (await stored('stopping')) === led.position, 'the leader has run a batch');
    const queries: string[] = [];
    const follower = start(definition('stopping'), { retryDelayMs: 600_000, onQuery: (text) => queries.push(text) });
    await eventually(
      () => Promise.resolve(queries.some((text) => text.includes('pg_try_advisory_lock'))),
      'the follower has tried for the lead',
    );
    // A day: longer than any worker has run, so a first batch held back by the interval would not come.
    const paced = start(definition('paced'), { batchIntervalMs: 86_400_000 });
    const first = await eventLog.append('kept-paced-1', [event()], NO_STREAM);
    expect(await paced.waitForPosition(first.position, 10_000)).toBe(true);

    const stopped = Promise.all([follower.stop(), paced.stop()]).then(() => true);
    expect(await within(stopped, 5_000)).toBe(true);
  });

  it('with a batch interval, batches are at least that far apart and every event is handled once', async () => {
    const intervalMs = 200;
    const handledAt: number[] = [];
    const runner = start(
      definition('interval', { before: () => Promise.resolve(void handledAt.push(performance.now())) }),
      { batchIntervalMs: intervalMs },
    );
    const appended: bigint[] = [];
    for (let index = 0; index < 6; index += 1) {
      const result = await eventLog.append('kept-interval-1', [event()], ANY);
      appended.push(result.position);
      if (index === 0) expect(await runner.waitForPosition(result.position, 10_000)).toBe(true);
    }
    expect(await runner.waitForPosition(appended.at(-1)!, 10_000)).toBe(true);
    expect(await rows('interval')).toEqual(appended);
    // The interval runs from a batch's commit, after its handle; timers may fire a millisecond early.
    for (let index = 1; index < handledAt.length; index += 1)
      expect(handledAt[index] - handledAt[index - 1]).toBeGreaterThanOrEqual(intervalMs - 2);
    expect(handledAt.length).toBeGreaterThanOrEqual(2);
  });
});
