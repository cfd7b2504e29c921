/**
 * What an answer's length costs the recording gateway. The gateway appends an answer's provider
 * events every 50 ms while it streams, and the block projection writes the block's whole text at
 * each batch it folds: an answer of S bytes is written about S ÷ (bytes per batch) times, its text
 * growing each time. Per answer size, answers through the gateway (to the provider double, a
 * process of its own) totalling about BENCH_MB_PER_SIZE MB, one at a time, in deltas of
 * BENCH_CHUNK_CHARS every BENCH_DELAY_MS: the service's and PostgreSQL's CPU and the WAL PostgreSQL
 * wrote, per MB answered, and how long after the last stream ended the read models held it. The
 * smallest size is the baseline of the ratio columns; the sizes run twice, in opposite orders.
 *
 *   npm run bench:gateway-answers        BENCH_ANSWER_KB=64,512,2048 BENCH_MB_PER_SIZE=4 by default
 */
import pg from 'pg';
import { mintBenchKeys, openBenchDatabase, printTable } from '../support/bench-database.js';
import { postmasterPid, processTicks, processTreeTicks, ticksToMs } from '../support/process-cpu.js';
import { startGatewayUnderBench, stream } from './gateway-under-bench.js';

const ANSWER_KB = (process.env.BENCH_ANSWER_KB ?? '64,512,2048').split(',').map(Number);
const MB_PER_SIZE = Number(process.env.BENCH_MB_PER_SIZE ?? 4);
const CHUNK_CHARS = Number(process.env.BENCH_CHUNK_CHARS ?? 1024);
const DELAY_MS = Number(process.env.BENCH_DELAY_MS ?? 5);
/** Answers of a size that make about MB_PER_SIZE MB. */
const answersOf = (kilobytes: number) => Math.max(1, Math.round((MB_PER_SIZE * 1e6) / (kilobytes * 1024)));
/** How often the bench reads whether the read models hold the log's head. */
const SETTLED_POLL_MS = 20;

interface Measured {
  readonly serviceMsPerMb: number;
  readonly postgresMsPerMb: number;
  readonly walBytesPerByte: number;
  readonly projectedAfterMs: number;
}

async function main(): Promise<void> {
  const database = await openBenchDatabase(Number(process.env.BENCH_PG_PORT ?? 54_397));
  const [producerKey] = await mintBenchKeys(database.connectionString, [
    { name: 'bench gateway answers', roles: ['producer'] },
  ]);
  const sql = new pg.Client({ connectionString: database.connectionString });
  await sql.connect();
  const postmaster = await postmasterPid(sql);
  const gateway = await startGatewayUnderBench(database.connectionString, {
    BENCH_CHUNK_CHARS: String(CHUNK_CHARS),
    BENCH_DELAY_MS: String(DELAY_MS),
  });
  const counters = async () => ({
    service: ticksToMs(await processTicks(gateway.ledger.pid)),
    postgres: ticksToMs(await processTreeTicks(postmaster)),
    wal: Number((await sql.query<{ lsn: string }>("SELECT pg_current_wal_lsn() - '0/0' AS lsn")).rows[0].lsn),
  });

  /** Waits until the block projection has folded the log's head, and the head has not moved for a poll. */
  async function settled(): Promise<void> {
    let last = '';
    for (;;) {
      const { rows: heads } = await sql.query<{ head: string; projected: string }>(
        `SELECT (SELECT position FROM event_log_head) AS head,
                (SELECT position FROM projection_checkpoints WHERE name = 'block-read-models') AS projected`,
      );
      const { head, projected } = heads[0];
      if (head === projected && head === last) return;
      last = head;
      await new Promise((resolve) => setTimeout(resolve, SETTLED_POLL_MS));
    }
  }

  async function answers(kilobytes: number, label: string): Promise<Measured> {
    const bytes = kilobytes * 1024;
    const count = answersOf(kilobytes);
    await settled();
    const before = await counters();
    let endedAt = 0;
    for (let answer = 0; answer < count; answer += 1) {
      const headers = { authorization: `Bearer ${producerKey}`, 'x-ledger-session': `${label}-${kilobytes}-${answer}` };
      await stream(`${gateway.ledger.url}/gateway/openai/v1/chat/completions`, headers, `answer-${bytes}`);
      endedAt = performance.now();
    }
    await settled();
    const projectedAfterMs = performance.now() - endedAt - SETTLED_POLL_MS;
    const after = await counters();
    const megabytes = (count * bytes) / 1e6;
    return {
      serviceMsPerMb: (after.service - before.service) / megabytes,
      postgresMsPerMb: (after.postgres - before.postgres) / megabytes,
      walBytesPerByte: (after.wal - before.wal) / (count * bytes),
      projectedAfterMs,
    };
  }

  try {
    // Not measured: the service compiles its paths first.
    await answers(ANSWER_KB[0], 'warm-up');
    const rounds = [ANSWER_KB, [...ANSWER_KB].reverse()];
    const measured = new Map<number, Measured[]>(ANSWER_KB.map((kilobytes) => [kilobytes, []]));
    for (const [round, sizes] of rounds.entries())
      for (const kilobytes of sizes) measured.get(kilobytes)!.push(await answers(kilobytes, `round-${round}`));
    const baseline = measured.get(ANSWER_KB[0])!;
    const both = (values: readonly number[], digits = 0) => values.map((value) => value.toFixed(digits)).join(' / ');
    const table = ANSWER_KB.map((kilobytes) => {
      const runs = measured.get(kilobytes)!;
      const ratio = (pick: (run: Measured) => number) =>
        runs.map((run, index) => `${(pick(run) / pick(baseline[index])).toFixed(1)}×`).join(' / ');
      return [
        `${kilobytes} KiB`,
        String(answersOf(kilobytes)),
        both(runs.map((run) => run.serviceMsPerMb)),
        ratio((run) => run.serviceMsPerMb),
        both(runs.map((run) => run.postgresMsPerMb)),
        ratio((run) => run.postgresMsPerMb),
        both(
          runs.map((run) => run.walBytesPerByte),
          1,
        ),
        both(runs.map((run) => run.projectedAfterMs)),
      ];
    });
    console.log(
      `\nanswers through the gateway, one at a time: ${CHUNK_CHARS}-character deltas every ${DELAY_MS} ms, ` +
        `about ${MB_PER_SIZE} MB per size; each cell is the two rounds`,
    );
    printTable(
      [
        'answer',
        'answers',
        'service CPU ms/MB',
        'service ÷ smallest',
        'PostgreSQL CPU ms/MB',
        'PostgreSQL ÷ smallest',
        'WAL bytes per byte',
        'projected after (ms)',
      ],
      table,
    );
  } finally {
    await gateway.stop();
    await sql.end();
    await database.close();
  }
}

await main();
