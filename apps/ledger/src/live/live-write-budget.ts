import type { SseOptions } from './sse-stream.js';

/** The longest a crowd stretches a stream's coalescing window. */
const MAX_WINDOW_MS = 1_000;

/** How far back prompt writes count: twice the longest window. */
const HORIZON_MS = 2 * MAX_WINDOW_MS;

/** Writes and deadlines are counted per this many ms, so counting them takes no memory per write. */
const BUCKET_MS = 100;

const bucketOf = (at: number) => Math.floor(at / BUCKET_MS);

/**
 * A stream's coalescing window: `coalesceMs`, stretched so that all streams together make about
 * `writesPerSecond` writes a second, at most a second. Writes that go out at once (`promptPerSecond`)
 * take what they take; the `heldBack` streams, those that had more to send than their window let
 * out, share what is left, one write per window each. Each write is a system call per client, on the
 * thread that also acknowledges ingest (decision 0033). A `coalesceMs` of 0 turns coalescing off,
 * crowd or not.
 */
export function coalescingWindowMs(heldBack: number, promptPerSecond: number, options: SseOptions): number {
  if (options.coalesceMs === 0) return 0;
  const left = options.writesPerSecond - promptPerSecond;
  const shared = left > 0 ? (heldBack * 1_000) / left : Number.POSITIVE_INFINITY;
  return Math.min(Math.max(options.coalesceMs, MAX_WINDOW_MS), Math.max(options.coalesceMs, shared));
}

/**
 * The write budget the live streams of one process share, sized on the writes they make. A watcher of
 * a quiet session costs nothing, and one that writes now and then costs its few writes (counted over
 * the last two seconds), not a share: neither slows the feeds that are busy. A held-back stream
 * counts as a share until two of its windows have passed since its last write (decision 0033).
 */
export class LiveWriteBudget {
  /** Each held-back stream's deadline bucket: it counts until that bucket ends. */
  private readonly heldBackUntil = new Map<object, number>();
  /** The held-back streams by deadline bucket; deadlines come out of time order, windows differ. */
  private readonly heldBackByBucket = new Map<number, Set<object>>();
  /** Writes that went out at once, per bucket of `BUCKET_MS`, oldest first. */
  private readonly promptPerBucket = new Map<number, number>();
  private promptWrites = 0;

  constructor(private readonly options: SseOptions) {}

  /** The window `stream` waits between two writes now, counting itself as held back. */
  windowMs(stream: object, now = performance.now()): number {
    this.forgetPast(now);
    const heldBack = this.heldBackUntil.size + (this.heldBackUntil.has(stream) ? 0 : 1);
    // The oldest bucket kept may start before the horizon: divide by the time the buckets cover.
    const covered = now - bucketOf(now - HORIZON_MS) * BUCKET_MS;
    return coalescingWindowMs(heldBack, (this.promptWrites * 1_000) / covered, this.options);
  }

  /** A write by `stream`: held back by its window, or out at once (after a quiet spell, a catch-up, a raw feed). */
  wrote(stream: object, heldBack: boolean, now = performance.now()): void {
    if (heldBack) {
      // Its next write is due one window from now (itself counted); the second window is for a
      // timer that a busy event loop fires late.
      const windowMs = this.windowMs(stream, now);
      this.uncount(stream);
      this.countHeldBack(stream, bucketOf(now + 2 * windowMs));
      return;
    }
    this.forgetPast(now);
    this.uncount(stream);
    const bucket = bucketOf(now);
    this.promptPerBucket.set(bucket, (this.promptPerBucket.get(bucket) ?? 0) + 1);
    this.promptWrites += 1;
  }

  closed(stream: object): void {
    this.uncount(stream);
  }

  private uncount(stream: object): void {
    const bucket = this.heldBackUntil.get(stream);
    if (bucket === undefined) return;
    this.heldBackUntil.delete(stream);
    const streams = this.heldBackByBucket.get(bucket)!;
    streams.delete(stream);
    if (streams.size === 0) this.heldBackByBucket.delete(bucket);
  }

  private countHeldBack(stream: object, deadlineBucket: number): void {
    this.heldBackUntil.set(stream, deadlineBucket);
    const streams = this.heldBackByBucket.get(deadlineBucket);
    if (streams) streams.add(stream);
    else this.heldBackByBucket.set(deadlineBucket, new Set([stream]));
  }

  /** Forgets prompt writes older than the horizon, and held-back streams whose deadline's bucket has ended. */
  private forgetPast(now: number): void {
    // Deadlines lie at most two windows ahead: a few dozen buckets at most, in no particular order.
    const current = bucketOf(now);
    for (const [bucket, streams] of this.heldBackByBucket) {
      if (bucket >= current) continue;
      this.heldBackByBucket.delete(bucket);
      for (const stream of streams) this.heldBackUntil.delete(stream);
    }
    const oldestKept = bucketOf(now - HORIZON_MS);
    for (const [bucket, writes] of this.promptPerBucket) {
      if (bucket >= oldestKept) break;
      this.promptPerBucket.delete(bucket);
      this.promptWrites -= writes;
    }
  }
}
