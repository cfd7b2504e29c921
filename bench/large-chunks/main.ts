/**
 * What a chunk's size costs. One producer streams SESSIONS answers of DELTAS text deltas each, of
 * one size, posting each delta once the last is answered (a model streaming a long text), to the
 * ledger (a separate process, as deployed) and then to the floor (floor-service.ts: it parses each
 * POST and stores nothing) in the same run. Per size and target: MB posted per second,
 * acknowledgement p50/p99, and the CPU each MB cost the service and PostgreSQL (from /proc). The
 * ratio to the floor is what storing a byte costs against reading it off the wire.
 *
 * A `text.delta` carries its part's text so far (rule 4): by default each delta is a text of its own, so it
 * replaces the block's text, and the log stores it whole. With BENCH_ACCUMULATED=1 each delta carries the
 * answer so far, growing by the size at each: the log stores the new text alone, the request carries the
 * whole (so a delta of 64 KiB reaches the 1 MiB body limit at the sixteenth), and the block is projected whole.
 *
 *   npm run bench:large-chunks        BENCH_DELTA_KB=16,256,900 BENCH_SESSIONS=6 BENCH_DELTAS=6 by default
 */
import pg from 'pg';
import {
  openBenchDatabase,
  mintBenchKeys,
  percentile,
  printTable,
  startLedgerProcess,
} from '../support/bench-database.js';
import { post } from '../support/bench-http.js';
import { prose } from '../support/prose.js';
import { postmasterPid, processTicks, processTreeTicks, ticksToMs } from '../support/process-cpu.js';
import { startFloorService } from '../ingest/floor-service.js';

const DELTA_KB = (process.env.BENCH_DELTA_KB ?? '16,256,900').split(',').map(Number);
const SESSIONS = Number(process.env.BENCH_SESSIONS ?? 6);
const DELTAS = Number(process.env.BENCH_DELTAS ?? 6);
/** Each delta carries the answer's text so far (the accumulated text Cherry Studio's producers send), not its own. */
const ACCUMULATED = process.env.BENCH_ACCUMULATED === '1';
/** Rounds of 1 KiB deltas the ledger takes first, not measured, so that what is measured is not its compiling. */
const WARM_UP_ROUNDS = 5;

interface Measured {
  readonly megabytesPerSecond: number;
  readonly acknowledgedMs: readonly number[];
  readonly serviceMsPerMb: number;
  readonly postgresMsPerMb: number;
}

/** SESSIONS answers of DELTAS deltas of `kilobytes` each, one POST at a time, to `url` as `key`. */
async function stream(
  url: string,
  key: string | undefined,
  kilobytes: number,
  label: string,
  cpu: () => Promise<{ service: number; postgres: number }>,
): Promise<Measured> {
  const bytes = kilobytes * 1024;
  const acknowledgedMs: number[] = [];
  const before = await cpu();
  const startedAt = performance.now();
  for (let session = 0; session < SESSIONS; session += 1) {
    const sessionId = `${label}-${kilobytes}-${session}`;
    await post(`${url}/v1/sessions`, { id: sessionId }, key);
    await post(`${url}/v1/sessions/${sessionId}/messages`, { id: 'answer', role: 'assistant' }, key);
    const chunks = `${url}/v1/sessions/${sessionId}/messages/answer/chunks`;
    await post(chunks, [{ seq: 1, type: 'text.start' }], key);
    let text = '';
    for (let delta = 0; delta < DELTAS; delta += 1) {
      const step = prose(bytes, session * DELTAS + delta);
      text = ACCUMULATED ? text + step : step;
      const sentAt = performance.now();
      await post(chunks, [{ seq: delta + 2, type: 'text.delta', text }], key);
      acknowledgedMs.push(performance.now() - sentAt);
    }
  }
  const seconds = (performance.now() - startedAt) / 1_000;
  const after = await cpu();
  const megabytes = (SESSIONS * DELTAS * bytes) / 1e6;
  return {
    megabytesPerSecond: megabytes / seconds,
    acknowledgedMs,
    serviceMsPerMb: (after.service - before.service) / megabytes,
    postgresMsPerMb: (after.postgres - before.postgres) / megabytes,
  };
}

async function main(): Promise<void> {
  const database = await openBenchDatabase(Number(process.env.BENCH_PG_PORT ?? 54_396));
  const [producerKey] = await mintBenchKeys(database.connectionString, [
    { name: 'bench large chunks', roles: ['producer'] },
  ]);
  const sql = new pg.Client({ connectionString: database.connectionString });
  await sql.connect();
  const postmaster = await postmasterPid(sql);
  const ledger = await startLedgerProcess(database.connectionString);
  const floor = await startFloorService();
  const cpuOf = (pid: number) => async () => ({
    service: ticksToMs(await processTicks(pid)),
    postgres: ticksToMs(await processTreeTicks(postmaster)),
  });
  try {
    for (let round = 0; round < WARM_UP_ROUNDS; round += 1)
      await stream(ledger.url, producerKey, 1, `warm-up-${round}`, cpuOf(ledger.pid));
    const table: string[][] = [];
    for (const kilobytes of DELTA_KB) {
      const stored = await stream(ledger.url, producerKey, kilobytes, 'ledger', cpuOf(ledger.pid));
      const floored = await stream(floor.url, undefined, kilobytes, 'floor', cpuOf(floor.pid));
      for (const [target, measured] of [
        ['ledger', stored],
        ['floor', floored],
      ] as const) {
        table.push([
          `${kilobytes} KiB`,
          target,
          measured.megabytesPerSecond.toFixed(1),
          `${percentile(measured.acknowledgedMs, 50).toFixed(1)} / ${percentile(measured.acknowledgedMs, 99).toFixed(1)}`,
          measured.serviceMsPerMb.toFixed(1),
          target === 'floor' ? '—' : measured.postgresMsPerMb.toFixed(1),
          target === 'floor' ? '1.0×' : `${(measured.serviceMsPerMb / floored.serviceMsPerMb).toFixed(1)}×`,
        ]);
      }
    }
    console.log(`\n${SESSIONS} answers of ${DELTAS} text deltas per size, one POST at a time`);
    printTable(
      [
        'delta',
        'target',
        'MB/s posted',
        'ack p50 / p99 ms',
        'service CPU ms/MB',
        'PostgreSQL CPU ms/MB',
        'service ÷ floor',
      ],
      table,
    );
  } finally {
    await floor.stop();
    await ledger.stop();
    await sql.end();
    await database.close();
  }
}

await main();
