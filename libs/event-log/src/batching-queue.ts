import { EventLogClosedError } from './errors.js';

interface Queued<Item, Result> {
  readonly item: Item;
  readonly resolve: (result: Result) => void;
  readonly reject: (error: Error) => void;
}

/**
 * Group commit's engine: callers push items, one loop hands whatever is waiting to `process` as
 * one batch, and every caller receives its own result or error. `process` returns one entry per
 * item (an `Error` entry fails that caller alone); if it throws, every caller of the batch fails.
 */
export class BatchingQueue<Item, Result> {
  private queue: Queued<Item, Result>[] = [];
  private draining: Promise<void> | undefined;
  private closed = false;

  constructor(
    private readonly process: (items: readonly Item[]) => Promise<readonly (Result | Error)[]>,
    /** How many of the waiting items the next batch takes (at least one). */
    private readonly batchSize: (waiting: readonly Item[]) => number = (waiting) => waiting.length,
  ) {}

  push(item: Item): Promise<Result> {
    if (this.closed) return Promise.reject(new EventLogClosedError());
    return new Promise((resolve, reject) => {
      this.queue.push({ item, resolve, reject });
      this.draining ??= this.drain();
    });
  }

  get idle(): boolean {
    return this.draining === undefined;
  }

  /** Refuses new items and waits for the queued ones. */
  async close(): Promise<void> {
    this.closed = true;
    await this.draining;
  }

  private async drain(): Promise<void> {
    try {
      while (this.queue.length > 0) {
        const count = Math.max(1, this.batchSize(this.queue.map((queued) => queued.item)));
        const batch = this.queue.splice(0, count);
        try {
          const results = await this.process(batch.map((queued) => queued.item));
          batch.forEach((queued, index) => {
            const result = results[index]!;
            if (result instanceof Error) queued.reject(result);
            else queued.resolve(result);
          });
        } catch (error) {
          for (const queued of batch) queued.reject(error as Error);
        }
      }
    } finally {
      // Cleared in the same tick as the last look at the queue (callers resume only after it),
      // so no item can be queued behind a loop that has already stopped.
      this.draining = undefined;
    }
  }
}
