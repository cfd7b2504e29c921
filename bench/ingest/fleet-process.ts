/**
 * The open-loop fleet's load generator, run as its own process so that it does not share the
 * service's event loop: SESSIONS sessions at once, each streaming an assistant message of about
 * 400 chunks at its own token rate, posting whatever accumulated every 50–100 ms (after the
 * previous POST's acknowledgement, as a producer keeps order). Sessions start staggered over the
 * first seconds; when a message is done its session ends and a new one starts, until the run's
 * duration is over. Offered load does not depend on how fast the service answers.
 *
 * Ledger target: each session is opened (session, user message, assistant message) by one of
 * the given API keys; every PROBE_EVERY-th chunk POST of a session is followed by a read with
 * `?minPosition` (projection lag), and every WATCH_EVERY-th session has an SSE watcher on its live
 * feed (live-feed lag: acknowledgement → first event whose id reaches the POST's position).
 * Naive target: the same chunks to the naive service, no setup, no lag. With several URLs (service
 * instances on one database), session i goes to URL i mod their number, all its requests alike.
 *
 *   node dist/bench/ingest/fleet-process.js '<FleetConfig as JSON>'   (prints a FleetResult as JSON)
 */
import { request } from 'undici';
import { bearer, post, read } from '../support/bench-http.js';
import { assistantMessage, type Chunk } from './assistant-message.js';

export interface FleetConfig {
  readonly target: 'ledger' | 'naive';
  readonly urls: readonly string[];
  readonly keys: readonly string[];
  readonly sessions: number;
  readonly durationMs: number;
  /** Mean token (chunk) rate of one session; each session draws its own within ±25 %. */
  readonly chunksPerSecond: number;
}

export interface FleetResult {
  readonly elapsedMs: number;
  readonly offeredChunks: number;
  readonly acknowledgedChunks: number;
  readonly chunkPosts: number;
  readonly setupPosts: number;
  readonly failures: number;
  /** The first few distinct failure messages. */
  readonly errors: readonly string[];
  readonly sessionsStarted: number;
  readonly ackMs: readonly number[];
  readonly projectionLagMs: readonly number[];
  readonly liveLagMs: readonly number[];
}

/** Lag probes on a session's 1st, 11th, 21st… chunk POST. */
const PROBE_EVERY = 10;
const LIVE_WAIT_MS = 30_000;
const WATCH_EVERY = 10;
const STAGGER_MS = 2_000;
const MESSAGE = assistantMessage({ thinkingDeltas: 100, answerDeltas: 290 }).chunks;

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

async function run(config: FleetConfig): Promise<FleetResult> {
  const result = {
    offeredChunks: 0,
    acknowledgedChunks: 0,
    chunkPosts: 0,
    setupPosts: 0,
    failures: 0,
    errors: [] as string[],
    sessionsStarted: 0,
    ackMs: [] as number[],
    projectionLagMs: [] as number[],
    liveLagMs: [] as number[],
  };
  const started = performance.now();
  const deadline = started + config.durationMs;
  // The parent reads CPU over the load alone, not over setup and the wait for the last probes.
  process.send?.('load-started');
  const pending = new Set<Promise<unknown>>();
  const fail = (error: Error) => {
    result.failures += 1;
    // A socket error's message may say little; why (refused, reset, timed out) can be in its cause.
    const cause = error.cause instanceof Error ? `: ${error.cause.message}` : '';
    const message = `${error.message}${cause}`;
    if (result.errors.length < 3 && !result.errors.includes(message)) result.errors.push(message);
  };
  const track = (work: Promise<unknown>) => {
    const settled = work.catch(fail).finally(() => pending.delete(settled));
    pending.add(settled);
  };

  async function open(url: string, key: string): Promise<string> {
    const { id } = await post(`${url}/v1/sessions`, {}, key);
    const messages = `${url}/v1/sessions/${id}/messages`;
    await post(messages, { role: 'user', content: 'q' }, key);
    const { id: messageId } = await post(messages, { role: 'assistant' }, key);
    result.setupPosts += 3;
    return `${url}/v1/sessions/${id}/messages/${messageId}`;
  }

  /**
   * One session: open it, stream its message at its own rate, until done or the deadline. The
   * model starts generating when the session starts, however long opening it takes, so that the
   * offered load is the same for every service.
   */
  async function session(index: number): Promise<void> {
    const key = config.keys.length > 0 ? config.keys[index % config.keys.length] : undefined;
    const url = config.urls[index % config.urls.length];
    const streamStart = performance.now();
    const messageUrl = config.target === 'ledger' ? await open(url, key!) : `${url}/chunks/fleet-${index}`;
    const chunksUrl = config.target === 'ledger' ? `${messageUrl}/chunks` : messageUrl;
    const watcher = config.target === 'ledger' && index % WATCH_EVERY === 0 ? watch(messageUrl, key!) : undefined;
    const rate = config.chunksPerSecond * (0.75 + Math.random() * 0.5);
    const generated = (at: number) =>
      Math.min(MESSAGE.length, Math.floor(((Math.min(at, deadline) - streamStart) * rate) / 1_000));
    let sent = 0;
    let posts = 0;
    while (sent < MESSAGE.length && performance.now() < deadline) {
      await sleep(50 + Math.random() * 50);
      const available = generated(performance.now());
      if (available === sent) continue;
      const batch: Chunk[] = MESSAGE.slice(sent, available);
      sent = available;
      const posted = performance.now();
      const { position } = await post(chunksUrl, batch, key);
      const acknowledged = performance.now();
      result.ackMs.push(acknowledged - posted);
      result.acknowledgedChunks += batch.length;
      result.chunkPosts += 1;
      posts += 1;
      if (position === undefined) continue;
      watcher?.expect(position, acknowledged);
      if (posts % PROBE_EVERY === 1) track(probe(messageUrl, key!, position, acknowledged));
    }
    // Offered: what the model generated until it was done or the run ended, posted or not.
    result.offeredChunks += generated(performance.now());
    if (watcher) track(watcher.finish());
  }

  async function probe(messageUrl: string, key: string, position: number, acknowledged: number): Promise<void> {
    await read(`${messageUrl}?minPosition=${position}`, key);
    result.projectionLagMs.push(performance.now() - acknowledged);
  }

  /** The session's live feed; each acknowledged position is matched to the first event id at or past it. */
  function watch(messageUrl: string, key: string) {
    const liveUrl = messageUrl.replace(/\/messages\/[^/]+$/, '/live');
    const abort = new AbortController();
    const expected: { position: number; acknowledged: number }[] = [];
    const seen: { position: number; at: number }[] = [];
    let lastExpected = 0;
    /** Set while `finish` waits for the last expected position; an earlier position's arrival must not end that wait. */
    let reached: (() => void) | undefined;
    const reading = (async () => {
      const response = await request(liveUrl, { headers: bearer(key), signal: abort.signal });
      const decoder = new TextDecoder();
      let buffered = '';
      for await (const part of response.body) {
        const at = performance.now();
        buffered += decoder.decode(part as Uint8Array, { stream: true });
        const frames = buffered.split('\n\n');
        buffered = frames.pop()!;
        for (const frame of frames) {
          const id = /^id: (\d+)$/m.exec(frame);
          if (!id) continue;
          seen.push({ position: Number(id[1]), at });
          if (Number(id[1]) >= lastExpected) reached?.();
        }
      }
    })().catch((error: Error) => {
      if (error.name !== 'AbortError') throw error;
    });
    return {
      expect(position: number, acknowledged: number) {
        expected.push({ position, acknowledged });
        lastExpected = position;
      },
      async finish() {
        if (expected.length > 0 && !seen.some((event) => event.position >= lastExpected))
          await Promise.race([new Promise<void>((resolve) => (reached = resolve)), sleep(LIVE_WAIT_MS)]);
        abort.abort();
        await reading;
        for (const { position, acknowledged } of expected) {
          const first = seen.find((event) => event.position >= position);
          if (first) result.liveLagMs.push(Math.max(0, first.at - acknowledged));
          else fail(new Error(`live feed: position ${position} never seen`));
        }
      },
    };
  }

  let next = 0;
  const slot = async (delayMs: number) => {
    await sleep(delayMs);
    while (performance.now() < deadline) {
      const index = next++;
      result.sessionsStarted += 1;
      await session(index).catch(fail);
    }
  };
  await Promise.all(Array.from({ length: config.sessions }, (_, lane) => slot((lane * STAGGER_MS) / config.sessions)));
  const elapsedMs = performance.now() - started;
  process.send?.('load-ended');
  while (pending.size > 0) await Promise.all(pending);
  return { elapsedMs, ...result };
}

const config = JSON.parse(process.argv[2]) as FleetConfig;
process.stdout.write(`${JSON.stringify(await run(config))}\n`);
process.disconnect?.();
