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
 * live feeds coalesce (50 ms), and a call's steps, urgent, are not held for that window.
 *
 *   npm run bench:governance        BENCH_CALLS=200 BENCH_CONCURRENCY=20 BENCH_PER_PRODUCER=10 by default
 */
import path from 'node:path';
import pg from 'pg';
import { loadMcpServers, McpExecutor } from '../../apps/ledger/src/governance/mcp-executor.js';
import { call, governanceFixture, PRODUCER, requestTool } from '../../test/support/governance-fixture.js';
import { connectSse } from '../../test/support/sse-client.js';
import { registerCredentials, TestCredentials } from '../../test/support/test-credentials.js';
import {
  formatRate,
  formatRatio,
  mintBenchKeys,
  openBenchDatabase,
  percentile,
  printTable,
  startLedgerProcess,
} from '../support/bench-database.js';

const SEQUENTIAL = Number(process.env.BENCH_CALLS ?? 200);
const CONCURRENT = Number(process.env.BENCH_CONCURRENCY ?? 20);
/**
 * Calls each concurrent caller makes in turn: ten make a phase of about a second, where its start
 * and tail weigh; 50 measure the steady rate.
 */
const PER_PRODUCER = Number(process.env.BENCH_PER_PRODUCER ?? 10);

/** Transactions PostgreSQL committed so far (backends report when idle, at most once a second: wait first). */
async function commits(connectionString: string): Promise<number> {
  await new Promise((resolve) => setTimeout(resolve, 1_500));
  const sql = new pg.Client({ connectionString });
  await sql.connect();
  try {
    const { rows } = await sql.query<{ xact_commit: string }>(
      'SELECT xact_commit FROM pg_stat_database WHERE datname = current_database()',
    );
    return Number(rows[0].xact_commit);
  } finally {
    await sql.end();
  }
}

async function timed<T>(work: () => Promise<T>): Promise<number> {
  const started = performance.now();
  await work();
  return performance.now() - started;
}

async function main(): Promise<void> {
  const fixture = await governanceFixture();
  const env = fixture.env();
  const database = await openBenchDatabase(54_393);
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

    /** One producer: a session watched live; each call is timed from its chunk POST to its result on the feed. */
    const producer = async (calls: number, latencies: number[]) => {
      const { id: sessionId } = (await call(ledger.url, 'POST', '/v1/sessions', {}, PRODUCER)).body;
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
        const { toolCallId, chunksSentAt } = await requestTool(ledger.url, sessionId, `call_${index}`, tool, args);
        if (!succeeded.has(toolCallId)) await new Promise<void>((resolve) => waiting.set(toolCallId, resolve));
        latencies.push(performance.now() - chunksSentAt);
      }
      live.close();
    };
    await producer(5, []);
    const governedLatencies: number[] = [];
    const commitsBefore = await commits(database.connectionString);
    await producer(SEQUENTIAL, governedLatencies);
    const commitsPerCall = ((await commits(database.connectionString)) - commitsBefore) / SEQUENTIAL;
    const governedConcurrentMs = await timed(() =>
      Promise.all(Array.from({ length: CONCURRENT }, () => producer(PER_PRODUCER, []))),
    );

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
    console.log(`PostgreSQL transactions per governed call (one caller): ${commitsPerCall.toFixed(1)}`);
  } finally {
    await direct.close();
    await ledger.stop();
    await database.close();
    await fixture.close();
  }
}

main().catch((error: unknown) => {
  console.error(error);
  process.exit(1);
});
