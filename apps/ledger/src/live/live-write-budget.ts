import type { SseOptions } from './sse-stream.js';

/** The longest a crowd stretches a stream's coalescing window. */
const MAX_WINDOW_MS = 1_000;

/**
 * How far back writes count: twice the longest window, so a stream held to that window stays
 * counted between its writes even when its timer fires late.
 */
const HORIZON_MS = 2 * MAX_WINDOW_MS;

/** Prompt writes are counted per this many ms, so counting them takes no memory per write. */
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
 * The write budget the live streams of one process share, sized on the writes they made in the last
 * two seconds. A watcher of a quiet session costs nothing, and one that writes now and then costs
 * its few writes, not a share: neither slows the feeds that are busy (decision 0033).
 */
export class LiveWriteBudget {
  /** Each held-back stream's last write, oldest first (a write moves its stream to the end). */
  private readonly heldBack = new Map<object, number>();
  /** Writes that went out at once, per bucket of `BUCKET_MS`, oldest first. */
  private readonly promptPerBucket = new Map<number, number>();
  private promptWrites = 0;

  constructor(private readonly options: SseOptions) {}

  /** The window `stream` waits between two writes now, counting itself as held back. */
  windowMs(stream: object, now = performance.now()): number {
    this.forgetWritesBefore(now - HORIZON_MS);
    const heldBack = this.heldBack.size + (this.heldBack.has(stream) ? 0 : 1);
    // The oldest bucket kept may start before the horizon: divide by the time the buckets cover.
    const covered = now - bucketOf(now - HORIZON_MS) * BUCKET_MS;
    return coalescingWindowMs(heldBack, (this.promptWrites * 1_000) / covered, this.options);
  }

  /** A write by `stream`: held back by its window, or out at once (after a quiet spell, a catch-up, a raw feed). */
  wrote(stream: object, heldBack: boolean, now = performance.now()): void {
    this.forgetWritesBefore(now - HORIZON_MS);
    this.heldBack.delete(stream);
    if (heldBack) {
      this.heldBack.set(stream, now);
      return;
    }
    const bucket = bucketOf(now);
    this.promptPerBucket.set(bucket, (this.promptPerBucket.get(bucket) ?? 0) + 1);
    this.promptWrites += 1;
  }

  closed(stream: object): void {
    this.heldBack.delete(stream);
  }

  private forgetWritesBefore(horizon: number): void {
    for (const [stream, at] of this.heldBack) {
      if (at >= horizon) break;
      this.heldBack.delete(stream);
    }
    const oldestKept = bucketOf(horizon);
    for (const [bucket, writes] of this.promptPerBucket) {
      if (bucket >= oldestKept) break;
      this.promptPerBucket.delete(bucket);
      this.promptWrites -= writes;
    }
  }
}
