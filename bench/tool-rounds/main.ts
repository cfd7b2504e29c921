/**
 * What a message's tool calls cost. For each size, one producer opens that many tool calls on one
 * assistant message (one call a chunk, BENCH_CHUNKS_PER_POST chunks a POST, as an agent's long turn
 * would), then streams BENCH_DELTAS text deltas on the same message one POST at a time, then
 * completes every call in one chunk (a round of parallel calls answered at once). The ledger is a
 * separate process, as deployed. The message of the smallest size is the baseline: a chunk should
 * cost about the same whatever the message already holds.
 *
 * Per size: the service's and PostgreSQL's CPU per chunk for the calls opened and for the deltas
 * (from /proc, projection included), each delta's acknowledgement p50, and how long the completion
 * took to be acknowledged and then to reach the read model (a read with `?minPosition=`), and the CPU it took
 * to get there. The body limit is
 * raised to 8 MiB for that chunk.
 *
 *   npm run bench:tool-rounds        BENCH_CALLS=10,1000,9000 BENCH_CHUNKS_PER_POST=500 BENCH_DELTAS=200 by default
 */
import pg from 'pg';
import {
  mintBenchKeys,
  openBenchDatabase,
  percentile,
  printTable,
  startLedgerProcess,
} from '../support/bench-database.js';
import { post, read } from '../support/bench-http.js';
import { postmasterPid, processTicks, processTreeTicks, ticksToMs } from '../support/process-cpu.js';

const CALLS = (process.env.BENCH_CALLS ?? '10,1000,9000').split(',').map(Number);
const CHUNKS_PER_POST = Number(process.env.BENCH_CHUNKS_PER_POST ?? 500);
const DELTAS = Number(process.env.BENCH_DELTAS ?? 200);

const tool = { id: 'fs-read', name: 'read_file', serverId: 'fs', serverName: 'filesystem' };
const call = (index: number, status: string) => ({
  id: `call-${index}`,
  tool,
  arguments: { path: `/src/file-${index}.ts` },
  status,
  ...(status === 'done' ? { response: { content: [{ type: 'text', text: `contents of file ${index}` }] } } : {}),
});

interface Measured {
  readonly openMsPerChunk: { readonly service: number; readonly postgres: number };
  readonly deltaMsPerChunk: { readonly service: number; readonly postgres: number };
  readonly deltaAckMs: number;
  readonly completionAckMs: number;
  readonly completionProjectedMs: number;
  readonly completionCpuMs: { readonly service: number; readonly postgres: number };
}

async function measure(
  url: string,
  key: string,
  calls: number,
  cpu: () => Promise<{ service: number; postgres: number }>,
): Promise<Measured> {
  const sessionId = (await post(`${url}/v1/sessions`, {}, key)).id;
  await post(`${url}/v1/sessions/${sessionId}/messages`, { id: 'turn', role: 'assistant' }, key);
  const chunks = `${url}/v1/sessions/${sessionId}/messages/turn/chunks`;
  const perChunk = (before: { service: number; postgres: number }, after: typeof before, count: number) => ({
    service: (after.service - before.service) / count,
    postgres: (after.postgres - before.postgres) / count,
  });

  /**
   * Until the read model holds `position`: a read waits a few seconds for it, then answers 503. The
   * session's tree, which leaves blocks out: reading thousands of them would be counted as the phase's.
   */
  const projected = async (position: number) => {
    const readTree = `${url}/v1/sessions/${sessionId}/tree?minPosition=${position}`;
    const behind = (error: Error) => (error.message.endsWith(': 503') ? false : Promise.reject(error));
    while (!(await read(readTree, key).then(() => true, behind)));
  };

  let seq = 0;
  const opening = { ...(await cpu()), position: 0 };
  for (let first = 0; first < calls; first += CHUNKS_PER_POST) {
    const batch = Array.from({ length: Math.min(CHUNKS_PER_POST, calls - first) }, (_, offset) => ({
      seq: ++seq,
      type: 'mcp_tool_pending',
      responses: [call(first + offset, 'pending')],
    }));
    opening.position = (await post(chunks, batch, key)).position;
  }
  // Each phase is measured with its projection, and alone: none is counted in the next.
  await projected(opening.position);
  const opened = await cpu();

  await post(chunks, [{ seq: ++seq, type: 'text.start' }], key);
  const deltaAcks: number[] = [];
  let text = '';
  const streaming = await cpu();
  let lastDelta = 0;
  for (let delta = 0; delta < DELTAS; delta += 1) {
    text += `word${delta} `;
    const sentAt = performance.now();
    lastDelta = (await post(chunks, [{ seq: ++seq, type: 'text.delta', text }], key)).position;
    deltaAcks.push(performance.now() - sentAt);
  }
  await projected(lastDelta);
  const streamed = await cpu();

  const responses = Array.from({ length: calls }, (_, index) => call(index, 'done'));
  const completing = await cpu();
  const sentAt = performance.now();
  const { position } = await post(chunks, [{ seq: ++seq, type: 'mcp_tool_complete', responses }], key);
  const acknowledgedAt = performance.now();
  await projected(position);
  const projectedAt = performance.now();
  const completed = await cpu();
  return {
    openMsPerChunk: perChunk(opening, opened, calls),
    deltaMsPerChunk: perChunk(streaming, streamed, DELTAS),
    deltaAckMs: percentile(deltaAcks, 50),
    completionAckMs: acknowledgedAt - sentAt,
    completionProjectedMs: projectedAt - acknowledgedAt,
    completionCpuMs: perChunk(completing, completed, 1),
  };
}

async function main(): Promise<void> {
  const database = await openBenchDatabase(Number(process.env.BENCH_PG_PORT ?? 54_397));
  const [key] = await mintBenchKeys(database.connectionString, [{ name: 'bench tool rounds', roles: ['producer'] }]);
  const sql = new pg.Client({ connectionString: database.connectionString });
  await sql.connect();
  const postmaster = await postmasterPid(sql);
  // The completion of 9,000 calls is one chunk of about 1.5 MB.
  const ledger = await startLedgerProcess(database.connectionString, { LEDGER_MAX_BODY_BYTES: String(8 << 20) });
  const cpu = async () => ({
    service: ticksToMs(await processTicks(ledger.pid)),
    postgres: ticksToMs(await processTreeTicks(postmaster)),
  });
  try {
    // Not measured: the service's first requests compile its code.
    await measure(ledger.url, key, 10, cpu);
    const results = [];
    for (const calls of CALLS) {
      results.push({ calls, ...(await measure(ledger.url, key, calls, cpu)) });
      console.log(`${calls} calls measured`);
    }
    const [baseline] = results;
    const microseconds = (ms: number) => Math.round(ms * 1_000).toLocaleString('en-US');
    const ratio = (value: number, base: number) => `${(value / base).toFixed(1)}×`;
    console.log(
      `\nTool calls opened ${CHUNKS_PER_POST} chunks a POST, then ${DELTAS} text deltas one POST each on the same message; ` +
        `ratios against the ${baseline.calls}-call message`,
    );
    printTable(
      [
        'calls',
        'open: service / PostgreSQL µs a chunk',
        'delta: service / PostgreSQL µs a chunk',
        'delta service ÷ baseline',
        'delta ack p50 ms',
        'completion ack / projected ms',
        'completion: service / PostgreSQL CPU ms',
      ],
      results.map((result) => [
        result.calls.toLocaleString('en-US'),
        `${microseconds(result.openMsPerChunk.service)} / ${microseconds(result.openMsPerChunk.postgres)}`,
        `${microseconds(result.deltaMsPerChunk.service)} / ${microseconds(result.deltaMsPerChunk.postgres)}`,
        ratio(result.deltaMsPerChunk.service, baseline.deltaMsPerChunk.service),
        result.deltaAckMs.toFixed(1),
        `${Math.round(result.completionAckMs)} / ${Math.round(result.completionProjectedMs)}`,
        `${Math.round(result.completionCpuMs.service)} / ${Math.round(result.completionCpuMs.postgres)}`,
      ]),
    );
  } finally {
    await ledger.stop();
    await sql.end();
    await database.close();
  }
}

await main();
