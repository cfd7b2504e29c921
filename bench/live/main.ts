/**
 * Live delivery: the time from a chunk POST to its arrival at watchers over SSE, beside a
 * client that polls the read API every 100 ms, in the same run, against the service as its own
 * process. Two shapes (DESIGN §8):
 *   A. SESSIONS sessions streaming at once, one SSE watcher each (and POLLERS pollers on some of them);
 *   B. WATCHERS SSE watchers of one streaming session (and one poller);
 *   C. what watchers cost ingest: FLEET sessions post every FLEET_ROUND_MS, first with no watchers, then with
 *      COST_WATCHERS SSE watchers spread over them, then with none again; acknowledgement p50 of each phase
 *      (same-run ratio) and the service's heap before, during and after the watchers (from its /metrics, each read
 *      after a full collection the bench has the service run).
 *   D. an idle crowd: IDLE_WATCHERS SSE watchers of quiet sessions, and FLEET sessions posting every FLEET_ROUND_MS
 *      with one watcher each; how soon those watchers see each POST (idle streams should not stretch their windows).
 * BENCH_SHAPES (default `ABCD`) picks the shapes to run.
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
  mintBenchKeys,
  openBenchDatabase,
  percentile,
  printTable,
  startLedgerProcess,
  type LedgerProcess,
} from '../support/bench-database.js';
import { bearer, post } from '../support/bench-http.js';

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
const SHAPES = process.env.BENCH_SHAPES ?? 'ABCD';
const FLEET = Number(process.env.BENCH_FLEET ?? 20);
const FLEET_ROUND_MS = 100;
const FLEET_ROUNDS = Number(process.env.BENCH_FLEET_ROUNDS ?? 100);
const COST_WATCHERS = Number(process.env.BENCH_COST_WATCHERS ?? 2_000);
const COST_CYCLES = Number(process.env.BENCH_COST_CYCLES ?? 3);
const IDLE_WATCHERS = Number(process.env.BENCH_IDLE_WATCHERS ?? 1_800);
/** How long a stream's catch-up counts against the write budget (live-write-budget.ts), and a margin. */
const CATCH_UP_COUNTED_MS = 2_500;

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
  readonly admin: string;
  readonly readers: readonly string[];
}

async function openTarget(url: string, key: string): Promise<Target> {
  const { id: sessionId } = (await post(`${url}/v1/sessions`, {}, key)) as { id: string };
  await post(`${url}/v1/sessions/${sessionId}/messages`, { role: 'user', content: 'q' }, key);
  const assistant = (await post(`${url}/v1/sessions/${sessionId}/messages`, { role: 'assistant' }, key)) as {
    id: string;
  };
  const messageId = assistant.id;
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
    onEvent: (event) => {
      const block = event.data as { type?: string; content?: unknown };
      if (event.event === 'block' && block.type === 'main_text') see(block.content);
    },
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
  const messageUrl = `${url}/v1/sessions/${target.sessionId}/messages/${target.messageId}`;
  const timer = setInterval(() => {
    void fetch(messageUrl, { headers })
      .then((response) => response.json() as Promise<{ blocks?: { type: string; content?: unknown }[] }>)
      .catch(() => undefined)
      .then((message) => see(message?.blocks?.find((block) => block.type === 'main_text')?.content));
  }, POLL_MS);
  return () => clearInterval(timer);
}

interface Production {
  readonly roundMs: number;
  readonly rounds: number;
  /** Rounds already posted to these targets (their chunk seqs and markers continue from there). */
  readonly after?: number;
  /** A delta's text before its marker; by default it grows with the round, so the message keeps growing. */
  readonly text?: (round: number) => string;
}

/** Each target posts `rounds` text deltas, one per roundMs, spread evenly over the round; returns each POST's time to acknowledgement. */
async function produce(url: string, targets: readonly Target[], production: Production, key: string) {
  const { roundMs, rounds, after = 0, text = (round: number) => 'word '.repeat(round * 5) } = production;
  const acks: number[] = [];
  await Promise.all(
    targets.map(async (target, index) => {
      await new Promise((resolve) => setTimeout(resolve, (roundMs * index) / targets.length));
      for (let round = after + 1; round <= after + rounds; round += 1) {
        const started = performance.now();
        target.sent.set(round, started);
        const delta = { seq: round + 2, type: 'text.delta', text: `${text(round)}#${round}` };
        await post(`${url}/v1/sessions/${target.sessionId}/messages/${target.messageId}/chunks`, [delta], key);
        acks.push(performance.now() - started);
        await new Promise((resolve) => setTimeout(resolve, Math.max(0, roundMs - (performance.now() - started))));
      }
    }),
  );
  await new Promise((resolve) => setTimeout(resolve, 1_500));
  return acks;
}

/**
 * A watcher that only counts what it receives, so the cost measured is the service's, not the
 * load generator's parsing.
 */
function countingWatcher(url: string, key: string) {
  let bytes = 0;
  const request = http.get(url, { headers: { accept: 'text/event-stream', ...bearer(key) } });
  const opened = new Promise<number>((resolve, reject) => {
    request.on('response', (response) => {
      response.on('data', (chunk: Buffer) => (bytes += chunk.length));
      response.on('error', () => undefined);
      resolve(response.statusCode ?? 0);
    });
    request.on('error', reject);
  });
  return { opened, received: () => bytes, close: () => request.destroy() };
}

/** `count` counting watchers spread over `targets`, on reader keys from `firstReaderKey` on; resolves once all are open. */
async function crowd(url: string, targets: readonly Target[], count: number, keys: BenchKeys, firstReaderKey: number) {
  const watchers = Array.from({ length: count }, (_, index) =>
    countingWatcher(
      `${url}/v1/sessions/${targets[index % targets.length].sessionId}/live`,
      keys.readers[firstReaderKey + Math.floor(index / WATCHERS_PER_KEY)],
    ),
  );
  const refused = (await Promise.all(watchers.map((watcher) => watcher.opened))).find((status) => status !== 200);
  if (refused !== undefined) throw new Error(`a watcher was refused: HTTP ${refused}`);
  return watchers;
}

/** The service's own gauges, from its /metrics (admin key). */
async function serviceGauges(url: string, adminKey: string) {
  const text = await (await fetch(`${url}/metrics`, { headers: bearer(adminKey) })).text();
  const gauge = (name: string) => Number(new RegExp(`^${name}(?:\\{[^}]*\\})? (\\S+)$`, 'm').exec(text)?.[1] ?? NaN);
  return {
    heapMiB: gauge('nodejs_heap_size_used_bytes') / 2 ** 20,
    rssMiB: gauge('process_resident_memory_bytes') / 2 ** 20,
    liveClients: gauge('ledger_live_clients'),
  };
}

/**
 * C: ingest acknowledgement with no watchers and with COST_WATCHERS, alternating COST_CYCLES times
 * (the machine's other load drifts; alternating spreads it over both), then with none again once
 * they all left; the service's heap at each step. Each phase streams into fresh sessions, so the
 * messages are the same size in all of them.
 */
async function watcherCost(ledger: LedgerProcess, keys: BenchKeys, firstReaderKey: number) {
  const { url } = ledger;
  /** The heap's gauges after a full collection: what the service holds, not what it has yet to collect. */
  const heldGauges = async () => {
    await ledger.collectGarbage();
    return serviceGauges(url, keys.admin);
  };
  const fleet = () => Promise.all(Array.from({ length: FLEET }, () => openTarget(url, keys.producer)));
  const stream = async (targets: readonly Target[]) =>
    produce(
      url,
      targets,
      { roundMs: FLEET_ROUND_MS, rounds: FLEET_ROUNDS, text: () => 'word '.repeat(5) },
      keys.producer,
    );
  const before: number[] = [];
  const watched: number[] = [];
  let starved = 0;
  const heapBefore = await heldGauges();
  let heapWatched = heapBefore;
  for (let cycle = 0; cycle < COST_CYCLES; cycle += 1) {
    before.push(...(await stream(await fleet())));
    const watchedFleet = await fleet();
    const watchers = await crowd(url, watchedFleet, COST_WATCHERS, keys, firstReaderKey);
    watched.push(...(await stream(watchedFleet)));
    heapWatched = await heldGauges();
    starved += watchers.filter((watcher) => watcher.received() < 1_000).length;
    watchers.forEach((watcher) => watcher.close());
    for (let attempt = 0; attempt < 100 && (await serviceGauges(url, keys.admin)).liveClients > 0; attempt += 1)
      await new Promise((resolve) => setTimeout(resolve, 100));
  }
  const after = await stream(await fleet());
  const heapAfter = await heldGauges();
  return { before, watched, after, heapBefore, heapWatched, heapAfter, starved };
}

const summary = (samples: number[], expected: number) => [
  `${percentile(samples, 50).toFixed(1)}`,
  `${percentile(samples, 99).toFixed(1)}`,
  `${samples.length.toLocaleString('en-US')} / ${expected.toLocaleString('en-US')}`,
];

/** A and B: how soon watchers see each POST, against polling. */
async function delivery(url: string, keys: BenchKeys): Promise<void> {
  // A: many sessions, one watcher each; pollers on the first POLLERS of them.
  const targets = await Promise.all(Array.from({ length: SESSIONS }, () => openTarget(url, keys.producer)));
  const sseA: number[] = [];
  const pollA: number[] = [];
  const watchers = targets.map((target, index) => watch(url, target, sseA, keys, index));
  await allOpened(watchers);
  const stopPolling = targets.slice(0, POLLERS).map((target) => poll(url, target, pollA, keys));
  const acksA = await produce(url, targets, { roundMs: ROUND_MS_MANY, rounds: ROUNDS }, keys.producer);
  stopPolling.forEach((stop) => stop());
  watchers.forEach((watcher) => watcher.close());

  // B: one session, many watchers, one poller.
  const [single] = [await openTarget(url, keys.producer)];
  const sseB: number[] = [];
  const pollB: number[] = [];
  const firstKeyOfB = Math.ceil(SESSIONS / WATCHERS_PER_KEY) * WATCHERS_PER_KEY;
  const crowd = Array.from({ length: WATCHERS }, (_, index) => watch(url, single, sseB, keys, firstKeyOfB + index));
  await allOpened(crowd);
  const stop = poll(url, single, pollB, keys);
  const acksB = await produce(url, [single], { roundMs: ROUND_MS_ONE, rounds: ROUNDS }, keys.producer);
  stop();
  crowd.forEach((watcher) => watcher.close());

  console.log(
    `chunk POST → client sees it; ${ROUNDS} posts per session (A: one per ${ROUND_MS_MANY} ms each, ` +
      `B: one per ${ROUND_MS_ONE} ms); ${os.cpus().length} cores, Node ${process.version}; service in its own process`,
  );
  const rows = [
    [`A: POST acknowledged (${SESSIONS} sessions)`, ...summary(acksA, SESSIONS * ROUNDS)],
    [`A: ${SESSIONS} streaming sessions, 1 SSE watcher each`, ...summary(sseA, SESSIONS * ROUNDS)],
    [`A: polling the read API every ${POLL_MS} ms (${POLLERS} of those sessions)`, ...summary(pollA, POLLERS * ROUNDS)],
    [`B: POST acknowledged`, ...summary(acksB, ROUNDS)],
    [`B: 1 streaming session, ${WATCHERS} SSE watchers`, ...summary(sseB, WATCHERS * ROUNDS)],
    [`B: polling the read API every ${POLL_MS} ms (1 client)`, ...summary(pollB, ROUNDS)],
  ];
  printTable(['case', 'p50 ms', 'p99 ms', 'samples / posts×clients'], rows);
  const ratio = (sse: number[], poll: number[], p: number) => (percentile(sse, p) / percentile(poll, p)).toFixed(2);
  console.log(
    `ratios, SSE / polling: A p50 ${ratio(sseA, pollA, 50)}×, p99 ${ratio(sseA, pollA, 99)}×; ` +
      `B p50 ${ratio(sseB, pollB, 50)}×, p99 ${ratio(sseB, pollB, 99)}×`,
  );
}

async function printWatcherCost(ledger: LedgerProcess, keys: BenchKeys, firstReaderKey: number): Promise<void> {
  const cost = await watcherCost(ledger, keys, firstReaderKey);
  const posts = FLEET * FLEET_ROUNDS;
  const cycles = posts * COST_CYCLES;
  console.log(
    `\nC: ${FLEET} sessions posting one delta every ${FLEET_ROUND_MS} ms; ` +
      `${COST_WATCHERS} SSE watchers spread over them in every other phase, ${COST_CYCLES} cycles (${cost.starved} watchers received under 1 kB);` +
      ` heap after a full collection: at the start, at the end of the last watched phase, at the end`,
  );
  const memory = (gauges: { heapMiB: number; rssMiB: number }) => [gauges.heapMiB.toFixed(1), gauges.rssMiB.toFixed(1)];
  printTable(
    ['phase', 'ack p50 ms', 'ack p99 ms', 'posts', 'heap used MiB (end)', 'RSS MiB (end)'],
    [
      ['no watchers', ...summary(cost.before, cycles), ...memory(cost.heapBefore)],
      [`${COST_WATCHERS} watchers`, ...summary(cost.watched, cycles), ...memory(cost.heapWatched)],
      ['after they left', ...summary(cost.after, posts), ...memory(cost.heapAfter)],
    ],
  );
  const p50 = (samples: number[]) => percentile(samples, 50);
  console.log(
    `ack p50 with ${COST_WATCHERS} watchers / without: ${(p50(cost.watched) / p50(cost.before)).toFixed(2)}×; ` +
      `heap after they left − before: ${(cost.heapAfter.heapMiB - cost.heapBefore.heapMiB).toFixed(1)} MiB`,
  );
}

/** D: busy sessions' watchers beside IDLE_WATCHERS watchers of quiet sessions. */
async function idleCrowd(url: string, keys: BenchKeys, firstReaderKey: number): Promise<void> {
  const quiet = await Promise.all(Array.from({ length: FLEET }, () => openTarget(url, keys.producer)));
  const idle = await crowd(url, quiet, IDLE_WATCHERS, keys, firstReaderKey);
  const busy = await Promise.all(Array.from({ length: FLEET }, () => openTarget(url, keys.producer)));
  const seen: number[] = [];
  const firstBusyWatcher = (firstReaderKey + Math.ceil(IDLE_WATCHERS / WATCHERS_PER_KEY)) * WATCHERS_PER_KEY;
  const watchers = busy.map((target, index) => watch(url, target, seen, keys, firstBusyWatcher + index));
  await allOpened(watchers);
  await new Promise((resolve) => setTimeout(resolve, CATCH_UP_COUNTED_MS));
  const acks = await produce(
    url,
    busy,
    { roundMs: FLEET_ROUND_MS, rounds: FLEET_ROUNDS, text: () => 'word '.repeat(5) },
    keys.producer,
  );
  watchers.forEach((watcher) => watcher.close());
  idle.forEach((watcher) => watcher.close());
  const posts = FLEET * FLEET_ROUNDS;
  console.log(
    `\nD: ${IDLE_WATCHERS} SSE watchers of ${FLEET} quiet sessions; ${FLEET} other sessions posting one delta every ` +
      `${FLEET_ROUND_MS} ms, one watcher each`,
  );
  printTable(
    ['case', 'p50 ms', 'p99 ms', 'samples / posts×clients'],
    [
      ['D: POST acknowledged', ...summary(acks, posts)],
      [`D: busy sessions' watchers, beside ${IDLE_WATCHERS} idle ones`, ...summary(seen, posts)],
    ],
  );
}

async function main(): Promise<void> {
  const database = await openBenchDatabase(54_392);
  // Each shape gets reader keys of its own: an earlier shape's connections may still count against theirs while closing.
  const keysOfA = SHAPES.includes('A') || SHAPES.includes('B') ? Math.ceil(SESSIONS / WATCHERS_PER_KEY) : 0;
  const keysOfB = SHAPES.includes('B') ? Math.ceil(WATCHERS / WATCHERS_PER_KEY) : 0;
  const keysOfC = SHAPES.includes('C') ? Math.ceil(COST_WATCHERS / WATCHERS_PER_KEY) : 0;
  const keysOfD = SHAPES.includes('D') ? Math.ceil(IDLE_WATCHERS / WATCHERS_PER_KEY) + 1 : 0;
  const [producer, admin, ...readers] = await mintBenchKeys(database.connectionString, [
    { name: 'bench producer', roles: ['producer'] },
    { name: 'bench admin', roles: ['admin'] },
    ...Array.from({ length: keysOfA + keysOfB + keysOfC + keysOfD }, (_, index) => ({
      name: `bench watcher ${index}`,
      roles: ['reader'] as const,
    })),
  ]);
  const keys: BenchKeys = { producer, admin, readers };
  // Every watcher here is one tenant's: its cap on live streams (decision 0029) is raised like the connection cap.
  const connections = String(Math.max(WATCHERS, COST_WATCHERS, SESSIONS, IDLE_WATCHERS + FLEET) + 500);
  const ledger = await startLedgerProcess(database.connectionString, {
    LEDGER_HTTP_MAX_CONNECTIONS: connections,
    LEDGER_LIVE_MAX_PER_TENANT: connections,
  });
  try {
    if (SHAPES.includes('A') || SHAPES.includes('B')) await delivery(ledger.url, keys);
    if (SHAPES.includes('C')) await printWatcherCost(ledger, keys, keysOfA + keysOfB);
    if (SHAPES.includes('D')) await idleCrowd(ledger.url, keys, keysOfA + keysOfB + keysOfC);
  } finally {
    await ledger.stop();
    await database.close();
  }
}

await main();
