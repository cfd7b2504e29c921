/**
 * What finding sessions costs beside reading one session, in the same run, on the built service:
 * `GET /v1/sessions/:sid` (a session with its active path) is the baseline; then the newest page
 * of the list, a selective and a broad full-text search, a filter, and a walk through every page.
 * Each session holds a user question and a streamed answer of about 200 words; one in a hundred
 * mentions a rare word.
 *
 *   npm run bench:session-list      (BENCH_SESSIONS, BENCH_REQUESTS)
 */
import {
  formatRatio,
  mintBenchKeys,
  openBenchDatabase,
  percentile,
  printTable,
  startLedgerProcess,
} from '../support/bench-database.js';
import { bearer, post } from '../support/bench-http.js';

const SESSIONS = Number(process.env.BENCH_SESSIONS ?? 2_000);
const REQUESTS = Number(process.env.BENCH_REQUESTS ?? 200);
const WRITERS = 8;
const WORDS = ['ledger', 'audit', 'stream', 'branch', 'model', 'token', 'answer', 'question', 'review', 'policy'];

const answerText = (index: number) =>
  Array.from({ length: 200 }, (_, word) => WORDS[(index * 7 + word * 3) % WORDS.length]).join(' ') +
  (index % 100 === 0 ? ' zanzibar' : '');

/** What a write answers. */
interface Created {
  readonly id: string;
  readonly position: number;
}

async function seed(url: string, key: string): Promise<{ lastSession: string; lastPosition: number }> {
  let next = 0;
  let last = { lastSession: '', lastPosition: 0 };
  const writer = async () => {
    for (let index = next++; index < SESSIONS; index = next++) {
      const { id } = (await post(
        `${url}/v1/sessions`,
        { title: `run ${index}`, metadata: { batch: index % 10 } },
        key,
      )) as Created;
      await post(`${url}/v1/sessions/${id}/messages`, { role: 'user', content: `question ${index}` }, key);
      const answer = (await post(
        `${url}/v1/sessions/${id}/messages`,
        { role: 'assistant', model: 'm' },
        key,
      )) as Created;
      const text = answerText(index);
      const { position } = (await post(
        `${url}/v1/sessions/${id}/messages/${answer.id}/chunks`,
        [
          { seq: 1, type: 'llm_response_created' },
          { seq: 2, type: 'text.start' },
          { seq: 3, type: 'text.delta', text },
          { seq: 4, type: 'text.complete', text },
          { seq: 5, type: 'block_complete', response: { usage: { prompt_tokens: 10, completion_tokens: 200 } } },
        ],
        key,
      )) as Created;
      if (position > last.lastPosition) last = { lastSession: id, lastPosition: position };
    }
  };
  await Promise.all(Array.from({ length: WRITERS }, writer));
  return last;
}

async function latencies(url: string, key: string, path: string): Promise<number[]> {
  const times: number[] = [];
  for (let request = 0; request < REQUESTS; request += 1) {
    const started = performance.now();
    const response = await fetch(`${url}${path}`, { headers: bearer(key) });
    if (!response.ok) throw new Error(`${path}: ${response.status} ${await response.text()}`);
    await response.arrayBuffer();
    times.push(performance.now() - started);
  }
  return times;
}

async function main(): Promise<void> {
  const database = await openBenchDatabase(54_396);
  const [key] = await mintBenchKeys(database.connectionString, [{ name: 'bench', roles: ['producer', 'reader'] }]);
  const ledger = await startLedgerProcess(database.connectionString);
  try {
    const seedStarted = performance.now();
    const { lastSession, lastPosition } = await seed(ledger.url, key);
    const read = await fetch(`${ledger.url}/v1/sessions/${lastSession}?minPosition=${lastPosition}`, {
      headers: bearer(key),
    });
    if (!read.ok) throw new Error(`the read models did not catch up: ${read.status}`);
    console.log(`${SESSIONS} sessions recorded and projected in ${Math.round(performance.now() - seedStarted)} ms`);

    const cases: [string, string][] = [
      ['one session (baseline)', `/v1/sessions/${lastSession}`],
      ['list, newest 50', '/v1/sessions'],
      ['search, 1% of sessions', '/v1/sessions?q=zanzibar'],
      ['search, every session, 50', '/v1/sessions?q=ledger%20audit'],
      ['filter hasErrors=false, 50', '/v1/sessions?hasErrors=false'],
    ];
    const rows: string[][] = [];
    let baseline = 0;
    for (const [name, path] of cases) {
      const times = await latencies(ledger.url, key, path);
      const p50 = percentile(times, 50);
      baseline ||= p50;
      rows.push([name, p50.toFixed(2), percentile(times, 99).toFixed(2), formatRatio(p50 / baseline)]);
    }
    const walkStarted = performance.now();
    let pages = 0;
    for (let cursor: string | null = ''; cursor !== null; pages += 1) {
      const page = (await (
        await fetch(`${ledger.url}/v1/sessions?limit=200${cursor ? `&cursor=${cursor}` : ''}`, { headers: bearer(key) })
      ).json()) as { nextCursor: string | null };
      cursor = page.nextCursor;
    }
    const walkMs = performance.now() - walkStarted;
    rows.push([
      `every page of 200 (${pages} pages), per page`,
      (walkMs / pages).toFixed(2),
      '',
      formatRatio(walkMs / pages / baseline),
    ]);
    printTable(['request', 'p50 ms', 'p99 ms', 'p50 / baseline'], rows);
  } finally {
    await ledger.stop();
    await database.close();
  }
}

await main();
