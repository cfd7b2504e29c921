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
 * The most writes a second one tenant's held-back streams get of `available`, shared max-min fairly
 * between tenants (water-filling): a tenant that needs less than an even share gets what it needs,
 * and the others share the rest evenly. `tenantsHolding` maps a number of held-back streams to how
 * many tenants hold that many; each stream needs at most `streamRate` writes a second. Infinite when
 * every tenant gets what it needs.
 */
export function tenantShare(
  tenantsHolding: ReadonlyMap<number, number>,
  available: number,
  streamRate: number,
): number {
  let left = available;
  let tenants = 0;
  for (const count of tenantsHolding.values()) tenants += count;
  for (const held of [...tenantsHolding.keys()].sort((a, b) => a - b)) {
    const even = left / tenants;
    if (held * streamRate > even) return even;
    const count = tenantsHolding.get(held)!;
    left -= count * held * streamRate;
    tenants -= count;
  }
  return Number.POSITIVE_INFINITY;
}

/**
 * The write budget the live streams of one process share, sized on the writes they make. A watcher of
 * a quiet session costs nothing, and one that writes now and then costs its few writes (counted over
 * the last two seconds), not a share: neither slows the feeds that are busy. Writes that go out at
 * once take what they take; the held-back streams share the rest, fairly between tenants first, so
 * one tenant's crowd does not stretch another tenant's windows. A held-back stream counts as a share
 * until two of its windows have passed since its last write (decision 0033).
 */
export class LiveWriteBudget {
  /** Each held-back stream's deadline bucket: it counts until that bucket ends. */
  private readonly heldBackUntil = new Map<BudgetedStream, number>();
  /** The held-back streams by deadline bucket; deadlines come out of time order, windows differ. */
  private readonly heldBackByBucket = new Map<number, Set<BudgetedStream>>();
  /** Held-back streams per tenant, and how many tenants hold each such number (for `tenantShare`). */
  private readonly heldBackPerTenant = new Map<string, number>();
  private readonly tenantsHolding = new Map<number, number>();
  /** Writes that went out at once, per bucket of `BUCKET_MS`, oldest first. */
  private readonly promptPerBucket = new Map<number, number>();
  private promptWrites = 0;

  constructor(private readonly options: SseOptions) {}

  /** The window `stream` waits between two writes now, counting itself as held back. */
  windowMs(stream: BudgetedStream, now = performance.now()): number {
    this.forgetPast(now);
    if (this.options.coalesceMs === 0) return 0;
    // The oldest bucket kept may start before the horizon: divide by the time the buckets cover.
    const covered = now - bucketOf(now - HORIZON_MS) * BUCKET_MS;
    const available = this.options.writesPerSecond - (this.promptWrites * 1_000) / covered;
    const counted = this.heldBackPerTenant.get(stream.tenant) ?? 0;
    const own = counted + (this.heldBackUntil.has(stream) ? 0 : 1);
    const streamRate = 1_000 / this.options.coalesceMs;
    // Its tenant's share as if it were held back already, then the counts as they were.
    this.holding(stream.tenant, own);
    const share = tenantShare(this.tenantsHolding, available, streamRate);
    this.holding(stream.tenant, counted);
    return coalescingWindowMs(own, Math.min(own * streamRate, share), this.options);
  }

  /** A write by `stream`: held back by its window, or out at once (after a quiet spell, a catch-up, a raw feed). */
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
    this.promptPerBucket.set(bucket, (this.promptPerBucket.get(bucket) ?? 0) + 1);
    this.promptWrites += 1;
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
    this.holding(stream.tenant, this.heldBackPerTenant.get(stream.tenant)! - 1);
  }

  /** Sets how many held-back streams `tenant` holds. */
  private holding(tenant: string, heldBack: number): void {
    const before = this.heldBackPerTenant.get(tenant) ?? 0;
    if (before === heldBack) return;
    if (before > 0) {
      const tenants = this.tenantsHolding.get(before)! - 1;
      if (tenants === 0) this.tenantsHolding.delete(before);
      else this.tenantsHolding.set(before, tenants);
    }
    if (heldBack > 0) {
      this.tenantsHolding.set(heldBack, (this.tenantsHolding.get(heldBack) ?? 0) + 1);
      this.heldBackPerTenant.set(tenant, heldBack);
    } else this.heldBackPerTenant.delete(tenant);
  }

  private countHeldBack(stream: BudgetedStream, deadlineBucket: number): void {
    this.heldBackUntil.set(stream, deadlineBucket);
    this.holding(stream.tenant, (this.heldBackPerTenant.get(stream.tenant) ?? 0) + 1);
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
      for (const stream of streams) this.forget(stream);
    }
    const oldestKept = bucketOf(now - HORIZON_MS);
    for (const [bucket, writes] of this.promptPerBucket) {
      if (bucket >= oldestKept) break;
      this.promptPerBucket.delete(bucket);
      this.promptWrites -= writes;
    }
  }
}
