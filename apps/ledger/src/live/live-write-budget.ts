import type { SseOptions } from './sse-stream.js';

/** The longest a crowd stretches a stream's coalescing window. */
const MAX_WINDOW_MS = 1_000;

/** How far back prompt writes count: twice the longest window. */
const HORIZON_MS = 2 * MAX_WINDOW_MS;

/** Writes and deadlines are counted per this many ms, so counting them takes no memory per write. */
const BUCKET_MS = 100;

const bucketOf = (at: number) => Math.floor(at / BUCKET_MS);

/** A stream as the budget knows it: writes are shared fairly between tenants first. */
export interface BudgetedStream {
  readonly tenant: string;
}

/**
 * A stream's coalescing window: `coalesceMs`, stretched so that `heldBack` streams, those that had
 * more to send than their window let out, make about `writesPerSecond` writes a second together, one
 * per window each, at most a second. Each write is a system call per client, on the thread that also
 * acknowledges ingest (decision 0033). A `coalesceMs` of 0 turns coalescing off, crowd or not.
 */
export function coalescingWindowMs(heldBack: number, writesPerSecond: number, options: SseOptions): number {
  if (options.coalesceMs === 0) return 0;
  const shared = writesPerSecond > 0 ? (heldBack * 1_000) / writesPerSecond : Number.POSITIVE_INFINITY;
  return Math.min(Math.max(options.coalesceMs, MAX_WINDOW_MS), Math.max(options.coalesceMs, shared));
}

/**
 * Max-min fair shares of `available` (water-filling): whoever asks for less than an even share gets
 * what it asks, and the others share the rest evenly. Returns that even share, the most any one of
 * `demands` gets; infinite when every demand is met.
 */
export function fairLevel(demands: readonly number[], available: number): number {
  const ascending = [...demands].sort((a, b) => a - b);
  let left = available;
  for (const [index, demand] of ascending.entries()) {
    const even = left / (ascending.length - index);
    if (demand > even) return even;
    left -= demand;
  }
  return Number.POSITIVE_INFINITY;
}

/** One tenant's part of the budget: its held-back streams, and its prompt writes of the last two seconds. */
interface TenantWrites {
  heldBack: number;
  prompt: number;
}

/**
 * The write budget the live streams of one process share, sized on the writes they make. A watcher of
 * a quiet session costs nothing, and one that writes now and then costs its few writes (counted over
 * the last two seconds), not a share: neither slows the feeds that are busy. The budget is shared
 * max-min fairly between tenants: each tenant asks for its prompt writes (those that went out at
 * once) plus one write per `coalesceMs` for each of its held-back streams (those whose last write
 * waited for their window), and its held-back streams share what its part leaves after its own prompt
 * writes. One tenant's crowd, prompt or held back, does not stretch another tenant's windows. A
 * held-back stream counts until two of its windows have passed since its last write (decision 0033).
 */
export class LiveWriteBudget {
  /** Each held-back stream's deadline bucket: it counts until that bucket ends. */
  private readonly heldBackUntil = new Map<BudgetedStream, number>();
  /** The held-back streams by deadline bucket; deadlines come out of time order, windows differ. */
  private readonly heldBackByBucket = new Map<number, Set<BudgetedStream>>();
  /** Prompt writes per bucket and tenant, oldest bucket first. */
  private readonly promptByBucket = new Map<number, Map<string, number>>();
  /** Tenants that hold a held-back stream or made a prompt write in the last two seconds. */
  private readonly tenants = new Map<string, TenantWrites>();
  /** Per tenant, whether urgent writes stay within its part: decided once per bucket. */
  private readonly urgentVerdicts = new Map<string, boolean>();
  private urgentVerdictsBucket = Number.NaN;

  constructor(private readonly options: SseOptions) {}

  /** The window `stream` waits between two writes now, counting itself as held back. */
  windowMs(stream: BudgetedStream, now = performance.now()): number {
    this.forgetPast(now);
    if (this.options.coalesceMs === 0) return 0;
    const { heldBack, prompt, part } = this.share(stream, now);
    return coalescingWindowMs(heldBack, part - prompt, this.options);
  }

  /**
   * Whether an urgent write by `stream` may go out now, out of its window (decision 0035). Not in a
   * burst: its tenant's prompt writes in the current bucket stay under half the budget's share of a
   * bucket (one count, whatever the crowd). And not past the budget: its tenant asks for no more than
   * its fair part, or its window could not stretch anyway. That verdict is kept for the bucket, so
   * a crowd of watchers told of the same change pays for it once.
   */
  mayWriteUrgently(stream: BudgetedStream, now = performance.now()): boolean {
    if (this.options.coalesceMs === 0) return true;
    const bucket = bucketOf(now);
    const inBucket = this.promptByBucket.get(bucket)?.get(stream.tenant) ?? 0;
    if (inBucket >= (this.options.writesPerSecond * BUCKET_MS) / 1_000 / 2) return false;
    if (this.options.coalesceMs >= MAX_WINDOW_MS) return true;
    if (this.urgentVerdictsBucket !== bucket) {
      this.urgentVerdicts.clear();
      this.urgentVerdictsBucket = bucket;
    }
    let verdict = this.urgentVerdicts.get(stream.tenant);
    if (verdict === undefined) {
      this.forgetPast(now);
      const { asks, part } = this.share(stream, now);
      this.urgentVerdicts.set(stream.tenant, (verdict = asks <= part));
    }
    return verdict;
  }

  /** What `stream`'s tenant asks for (its prompt writes and one write a window per held-back stream, `stream` counted) and its fair part of the budget. */
  private share(stream: BudgetedStream, now: number) {
    // The oldest bucket kept may start before the horizon: rate prompt writes over the time the buckets cover.
    const perSecond = 1_000 / (now - bucketOf(now - HORIZON_MS) * BUCKET_MS);
    const streamRate = 1_000 / this.options.coalesceMs;
    const own = this.tenants.get(stream.tenant);
    const heldBack = (own?.heldBack ?? 0) + (this.heldBackUntil.has(stream) ? 0 : 1);
    const prompt = (own?.prompt ?? 0) * perSecond;
    const asks = prompt + heldBack * streamRate;
    const demands = [asks];
    for (const [tenant, writes] of this.tenants)
      if (tenant !== stream.tenant) demands.push(writes.prompt * perSecond + writes.heldBack * streamRate);
    return { heldBack, prompt, asks, part: Math.min(asks, fairLevel(demands, this.options.writesPerSecond)) };
  }

  /** A write by `stream`: held back by its window, or out at once (after a quiet spell, or a catch-up). */
  wrote(stream: BudgetedStream, heldBack: boolean, now = performance.now()): void {
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
    let perTenant = this.promptByBucket.get(bucket);
    if (!perTenant) this.promptByBucket.set(bucket, (perTenant = new Map<string, number>()));
    perTenant.set(stream.tenant, (perTenant.get(stream.tenant) ?? 0) + 1);
    this.add(stream.tenant, 0, 1);
  }

  closed(stream: BudgetedStream): void {
    this.uncount(stream);
  }

  private uncount(stream: BudgetedStream): void {
    const bucket = this.heldBackUntil.get(stream);
    if (bucket === undefined) return;
    this.forget(stream);
    const streams = this.heldBackByBucket.get(bucket)!;
    streams.delete(stream);
    if (streams.size === 0) this.heldBackByBucket.delete(bucket);
  }

  /** Takes `stream` out of the counts, but not out of its bucket. */
  private forget(stream: BudgetedStream): void {
    this.heldBackUntil.delete(stream);
    this.add(stream.tenant, -1, 0);
  }

  private countHeldBack(stream: BudgetedStream, deadlineBucket: number): void {
    this.heldBackUntil.set(stream, deadlineBucket);
    this.add(stream.tenant, 1, 0);
    const streams = this.heldBackByBucket.get(deadlineBucket);
    if (streams) streams.add(stream);
    else this.heldBackByBucket.set(deadlineBucket, new Set([stream]));
  }

  /** Adds to a tenant's counts; a tenant with nothing counted takes no memory. */
  private add(tenant: string, heldBack: number, prompt: number): void {
    let writes = this.tenants.get(tenant);
    if (!writes) this.tenants.set(tenant, (writes = { heldBack: 0, prompt: 0 }));
    writes.heldBack += heldBack;
    writes.prompt += prompt;
    if (writes.heldBack === 0 && writes.prompt === 0) this.tenants.delete(tenant);
  }

  /** Forgets prompt writes older than the horizon, and held-back streams whose deadline's bucket has ended. */
  private forgetPast(now: number): void {
    // Deadlines lie at most two windows ahead: a few dozen buckets at most, in no particular order.
    const current = bucketOf(now);
    for (const [bucket, streams] of this.heldBackByBucket) {
      if (bucket >= current) continue;
      this.heldBackByBucket.delete(bucket);
      for (const stream of streams) this.forget(stream);
    }
    const oldestKept = bucketOf(now - HORIZON_MS);
    for (const [bucket, perTenant] of this.promptByBucket) {
      if (bucket >= oldestKept) break;
      this.promptByBucket.delete(bucket);
      for (const [tenant, writes] of perTenant) this.add(tenant, 0, -writes);
    }
  }
}
