/**
 * What governance costs a tool call: the time from the producer's `mcp_tool_pending` POST to
 * the result on the session's live feed (a `toolcall` item with status succeeded), beside
 * calling the same MCP server directly with the same client, in the same run. The call is
 * `filesystem/read_text_file`: the firewall allows it, the guardian (an LLM review against the
 * local Chat Completions test server, cached after the first) rates it low, so it runs without a
 * person. Every governed call records its seven steps on its stream and, once the verdict is
 * cached, two block updates on the session (decision 0027: three appends per call). The
 * producer and the watcher hold API keys of their own, minted through the admin route with an
 * admin key the service's store made before it started. The service runs with its defaults:
 * live feeds coalesce (50 ms), and a call's steps, urgent, are not held for that window. Before it measures, the
 * service takes BENCH_WARM_UP_CALLS governed calls from the concurrent callers, not measured.
 *
 *   npm run bench:governance        BENCH_CALLS=200 BENCH_CONCURRENCY=20 BENCH_PER_PRODUCER=10 BENCH_WARM_UP_CALLS=400 by default
 */
import path from 'node:path';
import pg from 'pg';
import { McpExecutor } from '../../apps/ledger/src/governance/mcp-executor.js';
import { loadMcpServers } from '../../apps/ledger/src/governance/mcp-servers-config.js';
import { governedToolCallId, toolCallStreamId } from '#core';
import { createPostgresEventLog } from '#event-log';
import { governanceFixture, PRODUCER, toolRequestChunks } from '../../test/support/governance-fixture.js';
import { connectSse } from '../../test/support/sse-client.js';
import { credentialsOf, registerCredentials, TestCredentials } from '../../test/support/test-credentials.js';
import { post } from '../support/bench-http.js';
import { postmasterPid, processTicks, processTreeTicks, ticksToMs } from '../support/process-cpu.js';
import {
  formatRate,
  formatRatio,
  mintBenchKeys,
  openBenchDatabase,
  percentile,
  printTable,
  startLedgerProcess,
} from '../support/bench-database.js';
import { postgresCounters, statementsCounted, statementsPerUnit } from '../support/postgres-counters.js';

const SEQUENTIAL = Number(process.env.BENCH_CALLS ?? 200);
const CONCURRENT = Number(process.env.BENCH_CONCURRENCY ?? 20);
/**
 * Calls each concurrent caller makes in turn: ten make a phase of about a second, where its start
 * and tail weigh; 50 measure the steady rate.
 */
const PER_PRODUCER = Number(process.env.BENCH_PER_PRODUCER ?? 10);
/**
 * Governed calls, not measured, that the service takes first from the concurrent callers: one started moments before
 * spends part of a core compiling, and measured cold it took 8.9–9.6 ms of CPU a call against 5.4–7.2 warm (issue 15's
 * thirty-fourth round).
 */
const WARM_UP_CALLS = Number(process.env.BENCH_WARM_UP_CALLS ?? 400);
/** Statements below this many calls per governed call are left out of the list. */
const LISTED_CALLS_PER_CALL = 0.1;

interface Cpu {
  readonly service: number;
  readonly postgres: number;
  readonly bench: number;
}

/** CPU used so far, in ms: the service process, PostgreSQL (server and backends), this process. */
async function cpuOf(servicePid: number, sql: pg.ClientBase): Promise<Cpu> {
  const postmaster = await postmasterPid(sql);
  const { user, system } = process.cpuUsage();
  return {
    service: ticksToMs(await processTicks(servicePid)),
    postgres: ticksToMs(await processTreeTicks(postmaster)),
    bench: (user + system) / 1_000,
  };
}

/** A sequential call, by the bench's clock (the service's, on this machine): its chunk POST sent and answered, its result seen live. */
interface CallTimeline {
  readonly toolCallId: string;
  readonly sentAt: number;
  readonly acknowledgedAt: number;
  readonly seenAt: number;
}

/**
 * Where a call's time goes, from the times its stream's commits were recorded (milliseconds): from
 * the chunk POST to its answer and to the first commit, from commit to commit (each named by the
 * events it holds), and from the last to the result on the live feed. Steps seen in under half of
 * the calls (the first call's guardian review, say) are left out.
 */
async function callSteps(connectionString: string, timelines: readonly CallTimeline[]): Promise<string[][]> {
  const eventLog = await createPostgresEventLog({ connectionString });
  const steps = new Map<string, number[]>();
  const step = (name: string, ms: number) => listAt(steps, name).push(ms);
  try {
    for (const { toolCallId, sentAt, acknowledgedAt, seenAt } of timelines) {
      step('chunk POST sent → answered', acknowledgedAt - sentAt);
      const commits = new Map<string, string[]>();
      for (const event of await eventLog.readStream(toolCallStreamId('default', toolCallId))) {
        listAt(commits, event.metadata.recordedAt).push(event.type.replace('toolcall.', ''));
      }
      let previous = { name: 'chunk POST sent', at: sentAt };
      for (const [recordedAt, types] of commits) {
        const current = { name: types.join(' + '), at: Date.parse(recordedAt) };
        step(`${previous.name} → ${current.name}`, current.at - previous.at);
        previous = current;
      }
      step(`${previous.name} → result on the live feed`, seenAt - previous.at);
    }
  } finally {
    await eventLog.close();
  }
  return [...steps]
    .filter(([, times]) => times.length >= timelines.length / 2)
    .map(([name, times]) => [
      name,
      String(times.length),
      percentile(times, 50).toFixed(1),
      percentile(times, 90).toFixed(1),
    ]);
}

/** The list `map` holds at `key`, added empty when there is none. */
function listAt<K, V>(map: Map<K, V[]>, key: K): V[] {
  let list = map.get(key);
  if (!list) map.set(key, (list = []));
  return list;
}

async function timed<T>(work: () => Promise<T>): Promise<number> {
  const started = performance.now();
  await work();
  return performance.now() - started;
}

async function main(): Promise<void> {
  const fixture = await governanceFixture();
  const env = fixture.env();
  const database = await openBenchDatabase(54_393, { countStatements: true });
  const sql = new pg.Client({ connectionString: database.connectionString });
  await sql.connect();
  const counted = await statementsCounted(sql);
  const [adminKey] = await mintBenchKeys(database.connectionString, [{ name: 'bench admin', roles: ['admin'] }]);
  const ledger = await startLedgerProcess(database.connectionString, env);
  registerCredentials(new TestCredentials(ledger.url, adminKey));
  const direct = new McpExecutor(loadMcpServers(env.LEDGER_MCP_SERVERS), {
    callTimeoutMs: 20_000,
    toolListTtlMs: 60_000,
  });
  const tool = { server: 'filesystem', name: 'read_text_file' };
  const args = { path: path.join(fixture.workspace, 'hello.txt') };
  try {
    await direct.call(tool, args);
    const directLatencies: number[] = [];
    for (let index = 0; index < SEQUENTIAL; index += 1)
      directLatencies.push(await timed(() => direct.call(tool, args)));
    const directConcurrentMs = await timed(() =>
      Promise.all(
        Array.from({ length: CONCURRENT }, async () => {
          for (let index = 0; index < PER_PRODUCER; index += 1) await direct.call(tool, args);
        }),
      ),
    );

    // The producers post with undici's `request`, which costs the bench a fraction of what `fetch` does: the
    // bench shares the two cores with the service.
    const key = await credentialsOf(ledger.url).key(PRODUCER);
    /** A producer's turn that hands one tool call to the ledger; the call is timed from its chunk POST. */
    const requestTool = async (sessionId: string, toolId: string) => {
      const messages = `${ledger.url}/v1/sessions/${sessionId}/messages`;
      await post(messages, { role: 'user', content: `please run ${tool.name}` }, key);
      const { id: messageId } = await post(messages, { role: 'assistant', model: 'test-model' }, key);
      const chunksSentAt = performance.now();
      const sentAt = Date.now();
      await post(`${messages}/${messageId}/chunks`, toolRequestChunks(toolId, tool, args), key);
      const toolCallId = governedToolCallId('default', sessionId, messageId, toolId);
      return { toolCallId, chunksSentAt, sentAt, acknowledgedAt: Date.now() };
    };

    /** One producer: a session watched live; each call is timed from its chunk POST to its result on the feed. */
    const producer = async (calls: number, latencies: number[], timelines?: CallTimeline[]) => {
      const { id: sessionId } = await post(`${ledger.url}/v1/sessions`, {}, key);
      const succeeded = new Set<string>();
      const waiting = new Map<string, () => void>();
      const live = connectSse(`${ledger.url}/v1/sessions/${sessionId}/live`, {
        onEvent: (event) => {
          if (event.event !== 'toolcall' || event.data.status !== 'succeeded') return;
          succeeded.add(event.data.toolCallId);
          waiting.get(event.data.toolCallId)?.();
        },
      });
      await live.opened;
      for (let index = 0; index < calls; index += 1) {
        const { toolCallId, chunksSentAt, sentAt, acknowledgedAt } = await requestTool(sessionId, `call_${index}`);
        if (!succeeded.has(toolCallId)) await new Promise<void>((resolve) => waiting.set(toolCallId, resolve));
        latencies.push(performance.now() - chunksSentAt);
        timelines?.push({ toolCallId, sentAt, acknowledgedAt, seenAt: Date.now() });
      }
      live.close();
    };
    await producer(5, []);
    await Promise.all(Array.from({ length: CONCURRENT }, () => producer(Math.ceil(WARM_UP_CALLS / CONCURRENT), [])));
    const governedLatencies: number[] = [];
    if (counted) await sql.query('SELECT pg_stat_statements_reset()');
    const before = await postgresCounters(sql, counted);
    const timelines: CallTimeline[] = [];
    await producer(SEQUENTIAL, governedLatencies, timelines);
    const after = await postgresCounters(sql, counted);
    const commitsPerCall = (after.transactions - before.transactions) / SEQUENTIAL;
    const statementsPerCall = counted ? (after.statements! - before.statements!) / SEQUENTIAL : undefined;
    const listedStatements = counted ? await statementsPerUnit(sql, SEQUENTIAL, LISTED_CALLS_PER_CALL) : [];
    const cpuBefore = await cpuOf(ledger.pid, sql);
    const governedConcurrentMs = await timed(() =>
      Promise.all(Array.from({ length: CONCURRENT }, () => producer(PER_PRODUCER, []))),
    );
    const cpuAfter = await cpuOf(ledger.pid, sql);

    const ms = (value: number) => value.toFixed(1);
    printTable(
      ['measure', 'direct MCP call', 'governed through the ledger', 'cost of governance'],
      [
        [
          'latency p50, ms (one caller)',
          ms(percentile(directLatencies, 50)),
          ms(percentile(governedLatencies, 50)),
          formatRatio(percentile(governedLatencies, 50) / percentile(directLatencies, 50)),
        ],
        [
          'latency p99, ms (one caller)',
          ms(percentile(directLatencies, 99)),
          ms(percentile(governedLatencies, 99)),
          formatRatio(percentile(governedLatencies, 99) / percentile(directLatencies, 99)),
        ],
        [
          `calls/s (${CONCURRENT} callers)`,
          formatRate((CONCURRENT * PER_PRODUCER * 1_000) / directConcurrentMs),
          formatRate((CONCURRENT * PER_PRODUCER * 1_000) / governedConcurrentMs),
          formatRatio(governedConcurrentMs / directConcurrentMs),
        ],
      ],
    );
    // Everything a call brings about: the producer's three POSTs, the saga's appends, the consumers' batches.
    console.log(
      `PostgreSQL per governed call (one caller): ${commitsPerCall.toFixed(1)} transactions, ` +
        `${statementsPerCall?.toFixed(1) ?? 'n/a'} statements`,
    );
    if (listedStatements.length > 0) printTable(['calls / call', 'source', 'statement'], listedStatements);
    printTable(
      ['step of a call (one caller)', 'calls', 'p50 ms', 'p90 ms'],
      await callSteps(database.connectionString, timelines),
    );
    // The two cores are shared by all of them: at the row's 300 calls/s, 6.7 ms of CPU per call in all.
    const perCall = (key: keyof Cpu) => ((cpuAfter[key] - cpuBefore[key]) / (CONCURRENT * PER_PRODUCER)).toFixed(2);
    console.log(
      `CPU per governed call (${CONCURRENT} callers), ms: service ${perCall('service')}, PostgreSQL ${perCall('postgres')}, ` +
        `this bench (producers, watchers, its HTTP clients) ${perCall('bench')}`,
    );
  } finally {
    await direct.close();
    await ledger.stop();
    await sql.end();
    await database.close();
    await fixture.close();
  }
}

main().catch((error: unknown) => {
  console.error(error);
  process.exit(1);
});
