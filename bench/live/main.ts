/**
 * Live delivery: the time from a chunk POST to its arrival at watchers over SSE, beside a
 * client that polls the read API every 100 ms, in the same run, against the service as its own
 * process. Two shapes (DESIGN §8):
 *   A. SESSIONS sessions streaming at once, one SSE watcher each (and POLLERS pollers on some of them);
 *   B. WATCHERS SSE watchers of one streaming session (and one poller).
 * Each POST's text ends with a marker; a watcher's latency for a POST is when it first holds a
 * state with that marker or a later one (coalescing may skip intermediate states). The producer
 * holds a producer key; watchers and pollers hold reader keys, WATCHERS_PER_KEY to a key (the
 * service's default cap on live connections per credential).
 *
 *   npm run bench:live
 */
import http from 'node:http';
import os from 'node:os';
import { connectSse, type SseConnection } from '../../test/support/sse-client.js';
import {
  bearer,
  mintBenchKeys,
  openBenchDatabase,
  percentile,
  post,
  printTable,
  startLedgerProcess,
} from '../support/bench-database.js';

const SESSIONS = Number(process.env.BENCH_SESSIONS ?? 1_000);
const WATCHERS = Number(process.env.BENCH_WATCHERS ?? 1_000);
const ROUNDS = 10;
/** A: each session posts once per this many ms, so SESSIONS sessions make SESSIONS / (ms/1000) POSTs/s. */
const ROUND_MS_MANY = Number(process.env.BENCH_ROUND_MS ?? 4_000);
const ROUND_MS_ONE = 1_000;
const POLLERS = 20;
const POLL_MS = 100;
/** LEDGER_LIVE_MAX_PER_CREDENTIAL's default. */
const WATCHERS_PER_KEY = 100;

http.globalAgent.maxSockets = Infinity;

interface Target {
  readonly sessionId: string;
  readonly messageId: string;
  /** Marker → when its POST was sent. */
  readonly sent: Map<number, number>;
}

/** Records, for every marker up to the one in `text`, the latency of its first sighting by this observer. */
function observer(target: Target, samples: number[]) {
  let seen = 0;
  return (text: unknown) => {
    const marker = typeof text === 'string' ? Number(/#(\d+)$/.exec(text)?.[1] ?? 0) : 0;
    const now = performance.now();
    for (; seen < marker; seen += 1) {
      const sent = target.sent.get(seen + 1);
      if (sent !== undefined) samples.push(now - sent);
    }
  };
}

/** The producer's key, and reader keys for watchers and pollers. */
interface BenchKeys {
  readonly producer: string;
  readonly readers: readonly string[];
}

async function openTarget(url: string, key: string): Promise<Target> {
  const { id: sessionId } = await post(`${url}/v1/sessions`, {}, key);
  await post(`${url}/v1/sessions/${sessionId}/messages`, { role: 'user', content: 'q' }, key);
  const { id: messageId } = await post(`${url}/v1/sessions/${sessionId}/messages`, { role: 'assistant' }, key);
  const opening = [
    { seq: 1, type: 'llm_response_created' },
    { seq: 2, type: 'text.start' },
  ];
  await post(`${url}/v1/sessions/${sessionId}/messages/${messageId}/chunks`, opening, key);
  return { sessionId, messageId, sent: new Map() };
}

/** The `index`-th watcher of the run, on its share of the reader keys. */
function watch(url: string, target: Target, samples: number[], keys: BenchKeys, index: number) {
  const see = observer(target, samples);
  return connectSse(`${url}/v1/sessions/${target.sessionId}/live`, {
    key: keys.readers[Math.floor(index / WATCHERS_PER_KEY)],
    onEvent: (event) => event.event === 'block' && event.data.type === 'main_text' && see(event.data.content),
  });
}

/** Waits for every watcher's stream to open; a refused one (401, 429) would otherwise just see nothing. */
async function allOpened(watchers: readonly SseConnection[]): Promise<void> {
  const refused = (await Promise.all(watchers.map((watcher) => watcher.opened))).find(({ status }) => status !== 200);
  if (refused === undefined) return;
  watchers.forEach((watcher) => watcher.close());
  throw new Error(`a watcher was refused: HTTP ${refused.status}`);
}

function poll(url: string, target: Target, samples: number[], keys: BenchKeys): () => void {
  const see = observer(target, samples);
  const headers = bearer(keys.readers[0]);
  const poll = async () => {
    const message: any = await fetch(`${url}/v1/sessions/${target.sessionId}/messages/${target.messageId}`, { headers })
      .then((response) => response.json())
      .catch(() => undefined);
    see(message?.blocks?.find((block: { type: string }) => block.type === 'main_text')?.content);
  };
  const timer = setInterval(() => void poll(), POLL_MS);
  return () => clearInterval(timer);
}

/** Each target posts ROUNDS text deltas, one per roundMs, spread evenly over the round; returns each POST's time to acknowledgement. */
async function produce(url: string, targets: readonly Target[], roundMs: number, key: string): Promise<number[]> {
  const acks: number[] = [];
  await Promise.all(
    targets.map(async (target, index) => {
      await new Promise((resolve) => setTimeout(resolve, (roundMs * index) / targets.length));
      for (let round = 1; round <= ROUNDS; round += 1) {
        const started = performance.now();
        target.sent.set(round, started);
        const delta = { seq: round + 2, type: 'text.delta', text: `${'word '.repeat(round * 5)}#${round}` };
        await post(`${url}/v1/sessions/${target.sessionId}/messages/${target.messageId}/chunks`, [delta], key);
        acks.push(performance.now() - started);
        await new Promise((resolve) => setTimeout(resolve, Math.max(0, roundMs - (performance.now() - started))));
      }
    }),
  );
  await new Promise((resolve) => setTimeout(resolve, 1_500));
  return acks;
}

const summary = (samples: number[], expected: number) => [
  `${percentile(samples, 50).toFixed(1)}`,
  `${percentile(samples, 99).toFixed(1)}`,
  `${samples.length.toLocaleString('en-US')} / ${expected.toLocaleString('en-US')}`,
];

async function main(): Promise<void> {
  const database = await openBenchDatabase(54_392);
  // Shape B gets keys of its own: A's connections may still count against theirs while closing.
  const readerKeys = Math.ceil(SESSIONS / WATCHERS_PER_KEY) + Math.ceil(WATCHERS / WATCHERS_PER_KEY);
  const [producer, ...readers] = await mintBenchKeys(database.connectionString, [
    { name: 'bench producer', roles: ['producer'] },
    ...Array.from({ length: readerKeys }, (_, index) => ({
      name: `bench watcher ${index}`,
      roles: ['reader'] as const,
    })),
  ]);
  const keys: BenchKeys = { producer: producer, readers };
  const ledger = await startLedgerProcess(database.connectionString);
  try {
    // A: many sessions, one watcher each; pollers on the first POLLERS of them.
    const targets = await Promise.all(Array.from({ length: SESSIONS }, () => openTarget(ledger.url, keys.producer)));
    const sseA: number[] = [];
    const pollA: number[] = [];
    const watchers = targets.map((target, index) => watch(ledger.url, target, sseA, keys, index));
    await allOpened(watchers);
    const stopPolling = targets.slice(0, POLLERS).map((target) => poll(ledger.url, target, pollA, keys));
    const acksA = await produce(ledger.url, targets, ROUND_MS_MANY, keys.producer);
    stopPolling.forEach((stop) => stop());
    watchers.forEach((watcher) => watcher.close());

    // B: one session, many watchers, one poller.
    const [single] = [await openTarget(ledger.url, keys.producer)];
    const sseB: number[] = [];
    const pollB: number[] = [];
    const firstKeyOfB = Math.ceil(SESSIONS / WATCHERS_PER_KEY) * WATCHERS_PER_KEY;
    const crowd = Array.from({ length: WATCHERS }, (_, index) =>
      watch(ledger.url, single, sseB, keys, firstKeyOfB + index),
    );
    await allOpened(crowd);
    const stop = poll(ledger.url, single, pollB, keys);
    const acksB = await produce(ledger.url, [single], ROUND_MS_ONE, keys.producer);
    stop();
    crowd.forEach((watcher) => watcher.close());

    console.log(
      `chunk POST → client sees it; ${ROUNDS} posts per session (A: one per ${ROUND_MS_MANY} ms each, B: one per ${ROUND_MS_ONE} ms); ${os.cpus().length} cores, Node ${process.version}; service in its own process`,
    );
    const rows = [
      [`A: POST acknowledged (${SESSIONS} sessions)`, ...summary(acksA, SESSIONS * ROUNDS)],
      [`A: ${SESSIONS} streaming sessions, 1 SSE watcher each`, ...summary(sseA, SESSIONS * ROUNDS)],
      [
        `A: polling the read API every ${POLL_MS} ms (${POLLERS} of those sessions)`,
        ...summary(pollA, POLLERS * ROUNDS),
      ],
      [`B: POST acknowledged`, ...summary(acksB, ROUNDS)],
      [`B: 1 streaming session, ${WATCHERS} SSE watchers`, ...summary(sseB, WATCHERS * ROUNDS)],
      [`B: polling the read API every ${POLL_MS} ms (1 client)`, ...summary(pollB, ROUNDS)],
    ];
    printTable(['case', 'p50 ms', 'p99 ms', 'samples / posts×clients'], rows);
    console.log(
      `ratios, SSE / polling: A p50 ${(percentile(sseA, 50) / percentile(pollA, 50)).toFixed(2)}×, p99 ${(percentile(sseA, 99) / percentile(pollA, 99)).toFixed(2)}×; B p50 ${(percentile(sseB, 50) / percentile(pollB, 50)).toFixed(2)}×, p99 ${(percentile(sseB, 99) / percentile(pollB, 99)).toFixed(2)}×`,
    );
  } finally {
    await ledger.stop();
    await database.close();
  }
}

await main();
