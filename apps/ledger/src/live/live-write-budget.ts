import type { SseOptions } from './sse-stream.js';

/** The longest a crowd stretches a stream's coalescing window. */
const MAX_WINDOW_MS = 1_000;

/**
 * How long a write keeps its stream counted as writing: twice the longest window, so a stream held to
 * that window stays counted between its writes even when its timer fires late.
 */
const WRITING_HORIZON_MS = 2 * MAX_WINDOW_MS;

/**
 * A stream's coalescing window with `writingStreams` streams writing: `coalesceMs`, stretched so that
 * they together make about `writesPerSecond` writes a second, at most a second. Each write is a system
 * call per client, on the thread that also acknowledges ingest (decision 0033). A `coalesceMs` of 0
 * turns coalescing off, crowd or not.
 */
export function coalescingWindowMs(writingStreams: number, options: SseOptions): number {
  if (options.coalesceMs === 0) return 0;
  const shared = (writingStreams * 1_000) / options.writesPerSecond;
  return Math.min(Math.max(options.coalesceMs, MAX_WINDOW_MS), Math.max(options.coalesceMs, shared));
}

/**
 * The write budget the live streams of one process share. Only streams that wrote lately count: a
 * watcher of a quiet session costs no writes, so a crowd of idle streams (one tenant's, at its cap)
 * does not slow the feeds that are busy (decision 0033).
 */
export class LiveWriteBudget {
  /** Each writing stream's last write, oldest first (a write moves its stream to the end). */
  private readonly lastWrites = new Map<object, number>();

  constructor(private readonly options: SseOptions) {}

  /** The window `stream` waits between two writes now, counting itself as writing. */
  windowMs(stream: object, now = performance.now()): number {
    this.forgetWritesBefore(now - WRITING_HORIZON_MS);
    const writing = this.lastWrites.size + (this.lastWrites.has(stream) ? 0 : 1);
    return coalescingWindowMs(writing, this.options);
  }

  wrote(stream: object, now = performance.now()): void {
    this.lastWrites.delete(stream);
    this.lastWrites.set(stream, now);
  }

  closed(stream: object): void {
    this.lastWrites.delete(stream);
  }

  private forgetWritesBefore(horizon: number): void {
    for (const [stream, at] of this.lastWrites) {
      if (at >= horizon) return;
      this.lastWrites.delete(stream);
    }
  }
}
