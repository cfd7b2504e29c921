import { EventLogClosedError } from './errors.js';

interface Queued<Item, Result> {
  readonly item: Item;
  readonly resolve: (result: Result) => void;
  readonly reject: (error: unknown) => void;
}

/** An item's outcome: its result, or the error it is rejected with. */
type Outcome<Result> = { readonly result: Result } | { readonly error: unknown };

export interface BatchingOptions<Item> {
  /** How many of the waiting items the next batch takes (at least one); all of them by default. */
  readonly batchSize?: (waiting: readonly Item[]) => number;
  /**
   * Whether a batch that failed with this error is retried in halves: true when one item may be
   * the cause (data the store refuses), false when the batch as a whole could not be carried out
   * (the store is unreachable), which fails every caller of the batch at once. Always by default.
   */
  readonly splitOnFailure?: (error: Error) => boolean;
  /**
   * Whether each batch is taken a turn of the event loop later (`setImmediate`) rather than at once.
   * Callers that a batch's results wake push their next items in the microtasks that follow, and
   * requests read in the same turn push theirs in its I/O callbacks: taken at once, a batch holds
   * only the first of them and the rest wait for the one after. Off by default.
   */
  readonly gatherTurn?: boolean;
}

/**
 * Group commit's engine: callers push items, one loop hands whatever is waiting to `process` as
 * one batch, and every caller receives its own result or error. `process` returns one entry per
 * item (an `Error` entry fails that caller alone). If it throws, the batch is retried in halves,
 * then quarters, down to the item that fails alone, so one caller's bad item never fails another
 * (unless `splitOnFailure` says the failure is the whole batch's). `process` must leave nothing
 * behind when it throws: a retried half is processed afresh.
 */
export class BatchingQueue<Item, Result> {
  private queue: Queued<Item, Result>[] = [];
  private draining: Promise<void> | undefined;
  private closed = false;
  private readonly batchSize: (waiting: readonly Item[]) => number;
  private readonly splitOnFailure: (error: Error) => boolean;
  private readonly gatherTurn: boolean;

  constructor(
    private readonly process: (items: readonly Item[]) => Promise<readonly (Result | Error)[]>,
    options: BatchingOptions<Item> = {},
  ) {
    this.batchSize = options.batchSize ?? ((waiting) => waiting.length);
    this.splitOnFailure = options.splitOnFailure ?? (() => true);
    this.gatherTurn = options.gatherTurn ?? false;
  }

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

  /** Refuses new items and rejects the waiting ones with `error`; a batch under way goes on. */
  abandon(error: Error): void {
    this.closed = true;
    for (const queued of this.queue.splice(0)) queued.reject(error);
  }

  private async drain(): Promise<void> {
    try {
      for (;;) {
        if (this.gatherTurn) await new Promise<void>((resolve) => setImmediate(resolve));
        if (this.queue.length === 0) break;
        const count = Math.max(1, this.batchSize(this.queue.map((queued) => queued.item)));
        const batch = this.queue.splice(0, count);
        const outcomes = await this.settle(batch.map((queued) => queued.item));
        batch.forEach((queued, index) => {
          const outcome = outcomes[index];
          if ('error' in outcome) queued.reject(outcome.error);
          else queued.resolve(outcome.result);
        });
      }
    } finally {
      // Cleared in the same tick as the last look at the queue (callers resume only after it),
      // so no item can be queued behind a loop that has already stopped.
      this.draining = undefined;
    }
  }

  /** One outcome per item: the batch's, or, when it failed, its halves' (one after the other, keeping queue order). */
  private async settle(items: readonly Item[]): Promise<readonly Outcome<Result>[]> {
    try {
      return (await this.process(items)).map((result) => (result instanceof Error ? { error: result } : { result }));
    } catch (thrown) {
      // Not told apart by `instanceof Error`: what was thrown may come from another realm (Node's own errors under a
      // VM context), and it must reject all the same.
      const error = thrown as Error;
      if (items.length === 1 || !this.splitOnFailure(error)) return items.map(() => ({ error }));
      const middle = Math.ceil(items.length / 2);
      return [...(await this.settle(items.slice(0, middle))), ...(await this.settle(items.slice(middle)))];
    }
  }
}
