/**
 * Ingest through HTTP, authenticated, to the ledger service (a separate process, as deployed) and
 * to a naive baseline service, on the same database in the same run.
 *
 * Closed loop: PRODUCERS concurrent producers, each with an API key of its own (as deployed: a key
 * per agent, so per-credential rate limits apply per producer), each streaming MESSAGES realistic
 * assistant responses (thinking, text deltas of a few tokens, tool rounds) in batches of BATCH
 * chunks, the next batch once the last is acknowledged. Prints ingest events/s, projection lag
 * (append → visible in the read model, p50/p99), Merkle log lag (append → leaf in the tree, polled
 * every MERKLE_POLL_MS), rebuild events/s, and log bytes per message against the snapshot lengths.
 *
 * Open-loop fleet (fleet-process.ts, its own process): for each size in BENCH_FLEET_SIZES, that
 * many sessions streaming at once for BENCH_FLEET_SECONDS, to each service in turn and to the
 * floor (floor-service.ts: answers each POST, stores nothing). Prints
 * offered and acknowledged chunks/s, acknowledgement latency, projection and live-feed lag, CPU
 * of the service and of PostgreSQL (from /proc), and PostgreSQL's own counts per POST
 * (transactions from pg_stat_database, statements from pg_stat_statements). Before the first size,
 * the ledger and the naive service each take BENCH_FLEET_WARM_UP_SECONDS (15 by default) of its
 * load, not measured, so that the rows are of services that have finished compiling.
 *
 * BENCH_FLEET_TWO_PROCESSES=1 starts a second ledger process on the same database and adds, per
 * size, a row for the fleet split between the two (the second core, decision 0028);
 * BENCH_FLEET_ONLY=1 skips the closed loop and the rebuild; BENCH_PG_PORT moves the embedded
 * PostgreSQL off 54391 (another bench on the machine may hold it).
 *
 *   npm run bench:ingest            BENCH_FLEET_SIZES=100,250,500 BENCH_FLEET_SECONDS=15 by default
 */
import os from 'node:os';
import pg from 'pg';
import { MERKLE_LOG_TABLES } from '../../apps/ledger/src/verifiable-log/merkle-store.js';
import {
  formatRate,
  formatRatio,
  mintBenchKeys,
  openBenchDatabase,
  percentile,
  printTable,
  startLedgerProcess,
} from '../support/bench-database.js';
import { post, read } from '../support/bench-http.js';
import { assistantMessage } from './assistant-message.js';
import { runFleetComparison } from './fleet.js';
import { startNaiveService } from './naive-service.js';

const PRODUCERS = 16;
const MESSAGES = 4;
const BATCH = 20;
const MERKLE_POLL_MS = 2;
/** The fleet's sessions share this many producer keys (each within its per-credential rate limit). */
const FLEET_KEYS = 50;
const FLEET_ONLY = process.env.BENCH_FLEET_ONLY === '1';
const TWO_PROCESSES = process.env.BENCH_FLEET_TWO_PROCESSES === '1';

interface LeafProbe {
  readonly position: number;
  readonly resolve: () => void;
  readonly reject: (error: Error) => void;
}

/**
 * The Merkle consumer's progress, polled every MERKLE_POLL_MS by one query for the last leaf's
 * position while any probe waits (its leaves go in position order). One poller for all probes, so
 * that the bench's own queries do not take PostgreSQL's core from the service it measures.
 */
class MerkleTreeWatch {
  private readonly sql: pg.Client;
  private readonly waiting: LeafProbe[] = [];
  private timer: NodeJS.Timeout | undefined;
  private polling: Promise<void> = Promise.resolve();
  private stopped = false;

  constructor(connectionString: string) {
    this.sql = new pg.Client({ connectionString });
  }

  async start(): Promise<void> {
    await this.sql.connect();
  }

  /** Resolves once the leaf of the event at `position` is in the tree; rejects if a poll fails or the watch stops first. */
  reached(position: number): Promise<void> {
    if (this.stopped) return Promise.reject(new Error('the Merkle tree watch has stopped'));
    return new Promise((resolve, reject) => {
      this.waiting.push({ position, resolve, reject });
      this.timer ??= this.schedule();
    });
  }

  async stop(): Promise<void> {
    this.stopped = true;
    clearTimeout(this.timer);
    await this.polling;
    this.settle((probe) => probe.reject(new Error('the Merkle tree watch stopped before the leaf arrived')));
    await this.sql.end();
  }

  private schedule(): NodeJS.Timeout {
    return setTimeout(() => {
      this.polling = this.poll();
    }, MERKLE_POLL_MS);
  }

  /**
   * One query; never rejects: a failure fails the waiting probes instead. The fired timer stays set until the
   * query is answered, so that a probe arriving meanwhile does not start a second query on the same client.
   */
  private async poll(): Promise<void> {
    try {
      const { rows } = await this.sql.query<{ position: string | null }>(
        'SELECT max(position) AS position FROM log_leaves',
      );
      const last = Number(rows[0].position ?? 0);
      this.settle(
        (probe) => probe.resolve(),
        (probe) => probe.position <= last,
      );
    } catch (error) {
      this.settle((probe) => probe.reject(error as Error));
    }
    this.timer = this.waiting.length > 0 && !this.stopped ? this.schedule() : undefined;
  }

  /** Takes the waiting probes that `which` picks (all by default) out of the list and settles them with `how`. */
  private settle(how: (probe: LeafProbe) => void, which: (probe: LeafProbe) => boolean = () => true): void {
    for (let index = this.waiting.length - 1; index >= 0; index -= 1) {
      if (!which(this.waiting[index])) continue;
      how(this.waiting[index]);
      this.waiting.splice(index, 1);
    }
  }
}

async function main(): Promise<void> {
  const database = await openBenchDatabase(Number(process.env.BENCH_PG_PORT ?? 54_391), { countStatements: true });
  const producerKeys = await mintBenchKeys(
    database.connectionString,
    Array.from({ length: PRODUCERS }, (_, producer) => ({ name: `bench producer ${producer}`, roles: ['producer'] })),
  );
  const [adminKey] = await mintBenchKeys(database.connectionString, [{ name: 'bench admin', roles: ['admin'] }]);
  const fleetKeys = await mintBenchKeys(
    database.connectionString,
    Array.from({ length: FLEET_KEYS }, (_, index) => ({ name: `bench fleet ${index}`, roles: ['producer'] })),
  );
  const ledger = await startLedgerProcess(database.connectionString);
  const naive = await startNaiveService(database.connectionString);
  const sql = new pg.Client({ connectionString: database.connectionString });
  await sql.connect();
  const merkleTree = new MerkleTreeWatch(database.connectionString);
  await merkleTree.start();
  /** The closed loop, the rebuild and the log's bytes per message; returns the chunks it posted. */
  async function closedLoop(): Promise<number> {
    const plans = Array.from({ length: PRODUCERS * MESSAGES }, () =>
      assistantMessage({ thinkingDeltas: 40, answerDeltas: 160 }),
    );
    const totalChunks = plans.reduce((sum, plan) => sum + plan.chunks.length, 0);

    // Ledger: sessions and messages first (not timed), each opened by the producer that streams into it.
    const targets = await Promise.all(
      plans.map(async (_, message) => {
        const key = producerKeys[message % PRODUCERS];
        const { id: sessionId } = await post(`${ledger.url}/v1/sessions`, {}, key);
        await post(`${ledger.url}/v1/sessions/${sessionId}/messages`, { role: 'user', content: 'q' }, key);
        const messages = `${ledger.url}/v1/sessions/${sessionId}/messages`;
        const { id: messageId } = await post(messages, { role: 'assistant' }, key);
        return { sessionId, messageId };
      }),
    );
    const lags: number[] = [];
    const merkleLags: number[] = [];
    const lagProbes: Promise<void>[] = [];
    let started = performance.now();
    await Promise.all(
      Array.from({ length: PRODUCERS }, async (_, producer) => {
        const key = producerKeys[producer];
        for (let message = producer; message < plans.length; message += PRODUCERS) {
          const { sessionId, messageId } = targets[message];
          const chunks = plans[message].chunks;
          for (let from = 0; from < chunks.length; from += BATCH) {
            const route = `${ledger.url}/v1/sessions/${sessionId}/messages/${messageId}/chunks`;
            const { position } = await post(route, chunks.slice(from, from + BATCH), key);
            const acknowledged = performance.now();
            if (from % (BATCH * 4) === 0) {
              lagProbes.push(
                read(`${ledger.url}/v1/sessions/${sessionId}/messages/${messageId}?minPosition=${position}`, key).then(
                  () => void lags.push(performance.now() - acknowledged),
                ),
                merkleTree.reached(position).then(() => void merkleLags.push(performance.now() - acknowledged)),
              );
            }
          }
        }
      }),
    );
    const ledgerIngest = totalChunks / ((performance.now() - started) / 1_000);
    await Promise.all(lagProbes);

    started = performance.now();
    await Promise.all(
      Array.from({ length: PRODUCERS }, async (_, producer) => {
        for (let message = producer; message < plans.length; message += PRODUCERS) {
          const chunks = plans[message].chunks;
          for (let from = 0; from < chunks.length; from += BATCH)
            await post(`${naive.url}/chunks/naive-${message}`, chunks.slice(from, from + BATCH));
        }
      }),
    );
    const naiveIngest = totalChunks / ((performance.now() - started) / 1_000);

    const rebuild = await post(`${ledger.url}/v1/admin/rebuild?projection=block-read-models`, {}, adminKey);
    const ledgerRebuild = rebuild.events / (rebuild.durationMs / 1_000);
    started = performance.now();
    const naiveRows = await naive.rebuild();
    const naiveRebuild = naiveRows / ((performance.now() - started) / 1_000);

    const { rows } = await sql.query<{ bytes: string }>(
      `SELECT sum(octet_length(data::text)) AS bytes FROM event_log_events WHERE type IN ('chunk.text.delta', 'chunk.thinking.delta')`,
    );
    const logBytesPerMessage = Number(rows[0].bytes) / plans.length;
    const snapshotBytesPerMessage = plans.reduce((sum, plan) => sum + plan.snapshotBytes, 0) / plans.length;

    const shape = `${PRODUCERS} producers × ${MESSAGES} responses × ${plans[0].chunks.length} chunks`;
    const machine = `${os.cpus().length} cores, Node ${process.version}`;
    console.log(`ingest over HTTP, an API key per producer: ${shape}, batches of ${BATCH}; ${machine}`);
    printTable(
      ['measure', 'block-ledger', 'naive service', 'ledger / naive'],
      [
        [
          'ingest, chunks/s (durable, acknowledged)',
          formatRate(ledgerIngest),
          formatRate(naiveIngest),
          formatRatio(ledgerIngest / naiveIngest),
        ],
        [
          'projection lag p50 / p99, ms (append → read model)',
          `${percentile(lags, 50).toFixed(1)} / ${percentile(lags, 99).toFixed(1)}`,
          'inline (0)',
          '—',
        ],
        [
          'Merkle log lag p50 / p99, ms (append → leaf)',
          `${percentile(merkleLags, 50).toFixed(1)} / ${percentile(merkleLags, 99).toFixed(1)}`,
          '—',
          '—',
        ],
        [
          'rebuild, events/s',
          formatRate(ledgerRebuild),
          formatRate(naiveRebuild),
          formatRatio(ledgerRebuild / naiveRebuild),
        ],
        [
          'delta bytes in the log per message (vs snapshots)',
          formatRate(logBytesPerMessage),
          formatRate(snapshotBytesPerMessage),
          formatRatio(logBytesPerMessage / snapshotBytesPerMessage),
        ],
      ],
    );
    console.log();
    return totalChunks;
  }

  try {
    const closedLoopChunks = FLEET_ONLY ? 0 : await closedLoop();
    const { ledgerChunks } = await runFleetComparison({
      sql,
      ledger,
      startSecondLedger: TWO_PROCESSES ? () => startLedgerProcess(database.connectionString) : undefined,
      naive,
      keys: fleetKeys,
    });
    const { rows: disk } = await sql.query<{ events: string; bytes: string }>(
      `SELECT count(*) AS events,
              pg_total_relation_size('event_log_events') + pg_total_relation_size('event_log_streams')
                + pg_total_relation_size('event_log_envelopes') AS bytes
         FROM event_log_events`,
    );
    const perEvent = Number(disk[0].bytes) / Number(disk[0].events);
    console.log(
      `\nevent log on disk (events, streams and envelopes: tables, TOAST and indexes): ${formatRate(perEvent)} bytes per event over ${disk[0].events} events`,
    );
    const { rows: merkle } = await sql.query<{ leaves: string; bytes: string }>(
      `SELECT count(*) AS leaves,
              ${MERKLE_LOG_TABLES.map((table) => `pg_total_relation_size('${table}')`).join(' + ')} AS bytes
         FROM log_leaves`,
    );
    const perLeaf = formatRate(Number(merkle[0].bytes) / Number(merkle[0].leaves));
    console.log(
      `verifiable log on disk (${MERKLE_LOG_TABLES.join(', ')}: tables and indexes): ${perLeaf} bytes per leaf over ${merkle[0].leaves} leaves`,
    );
    console.log(`ledger chunks acknowledged in this run: ${closedLoopChunks + ledgerChunks}`);
  } finally {
    await sql.end();
    await merkleTree.stop();
    await naive.close();
    await ledger.stop();
    await database.close();
  }
}

await main();
