import { rememberNewest } from '#core';
import type { Upstream, UpstreamKey } from './upstreams-config.js';

export interface Clock {
  /** Milliseconds since the epoch. */
  now(): number;
}

/** How one attempt with a key ended; `client_error` is a 4xx other than 401/429 (403 included), the client's own fault. */
export type AttemptOutcome =
  'ok' | 'rate_limited' | 'unauthorized' | 'server_error' | 'timeout' | 'network' | 'client_error';

/** Why a key was taken out: a 429, too many 5xx/timeouts, or a 401/403 (until the next reload). */
export type CooldownReason = 'rate_limited' | 'failure_rate' | 'unauthorized';

/** Where the pool reports the keys it takes out (LedgerMetrics). Keys are named by their short hash. */
export interface KeyPoolObserver {
  upstreamKeyCooled(upstream: string, key: string, reason: CooldownReason): void;
}

/** The rate-limit headers of a 429, as the provider sent them. */
export interface RetryAfterHeaders {
  /** Seconds, or an HTTP date. */
  readonly retryAfter?: string | undefined;
  /** Milliseconds (OpenAI sends it beside `retry-after`, and its SDK prefers it). */
  readonly retryAfterMs?: string | undefined;
}

export interface KeyPoolOptions {
  readonly clock: Clock;
  readonly observer?: KeyPoolObserver;
  /** Sessions whose key the pool remembers; the least recently used one is forgotten first. */
  readonly affinityCapacity?: number;
}

/** When no key can be tried: how long until the soonest one comes back, and why that one is out. */
export interface PoolUnavailable {
  /** `undefined`: every key is disabled until the configuration is reloaded. */
  readonly retryAfterMs: number | undefined;
  readonly reason: CooldownReason;
}

// A 429 without Retry-After: 1 s, doubling per consecutive 429, at most 60 s; a success starts over.
const BACKOFF_FIRST_MS = 1_000;
const BACKOFF_MAX_MS = 60_000;
// 5xx and timeouts: at least 3 failures making at least half of the last 10 attempts within 60 s cool the key 30 s.
const FAILURE_WINDOW_ATTEMPTS = 10;
const FAILURE_WINDOW_MS = 60_000;
const FAILURE_MIN_COUNT = 3;
const FAILURE_MIN_SHARE = 0.5;
const FAILURE_COOLDOWN_MS = 30_000;

interface KeyHealth {
  readonly key: UpstreamKey;
  /** Smooth weighted round robin's running score. */
  current: number;
  coolingUntil: number;
  coolingReason: CooldownReason;
  disabled: boolean;
  consecutiveRateLimits: number;
  /** The last attempts that say something about the key's health: when, and whether they failed. */
  recent: { at: number; failed: boolean }[];
}

/**
 * The keys of one upstream and their health. Pure logic over an injected clock: it never waits
 * and never calls anything; the caller asks for a key, tries it, and reports how it went.
 */
export class KeyPool {
  private keys: KeyHealth[] = [];
  /** Session id → key hash, in least-recently-used-first order (a Map keeps insertion order). */
  private readonly affinity = new Map<string, string>();
  private readonly clock: Clock;
  private readonly affinityCapacity: number;

  constructor(
    private upstream: Upstream,
    private readonly options: KeyPoolOptions,
  ) {
    this.clock = options.clock;
    this.affinityCapacity = options.affinityCapacity ?? 10_000;
    this.reload(upstream);
  }

  get upstreamName(): string {
    return this.upstream.name;
  }

  /**
   * The key for the next attempt: the session's own key while it is available, else the next one by
   * smooth weighted round robin, which then becomes the session's key. Keys in `exclude` (hashes
   * already tried for this request) are passed over. `undefined`: no key can be tried now.
   */
  pick(sessionId: string | undefined, exclude: ReadonlySet<string> = new Set()): UpstreamKey | undefined {
    const now = this.clock.now();
    const candidates = this.keys.filter((health) => this.isAvailable(health, now) && !exclude.has(health.key.hash));
    if (candidates.length === 0) return undefined;
    if (sessionId !== undefined) {
      const held = this.affinity.get(sessionId);
      const kept = candidates.find((health) => health.key.hash === held);
      if (kept) {
        this.remember(sessionId, held!);
        return kept.key;
      }
    }
    const chosen = this.nextByWeight(candidates);
    if (sessionId !== undefined) this.remember(sessionId, chosen.key.hash);
    return chosen.key;
  }

  /** Records how an attempt with `key` ended; a 429's headers set its cooldown. */
  report(key: UpstreamKey, outcome: AttemptOutcome, rateLimit: RetryAfterHeaders = {}): void {
    const health = this.keys.find((candidate) => candidate.key === key);
    // A key removed by a reload while its attempt ran: nothing left to update.
    if (!health) return;
    const now = this.clock.now();
    switch (outcome) {
      case 'ok':
      case 'client_error':
        health.consecutiveRateLimits = 0;
        this.pushAttempt(health, now, false);
        return;
      case 'rate_limited': {
        health.consecutiveRateLimits += 1;
        const backoff = Math.min(BACKOFF_FIRST_MS * 2 ** (health.consecutiveRateLimits - 1), BACKOFF_MAX_MS);
        this.coolDown(health, now + (retryAfterMs(rateLimit, now) ?? backoff), 'rate_limited');
        return;
      }
      case 'unauthorized':
        health.disabled = true;
        this.options.observer?.upstreamKeyCooled(this.upstream.name, key.hash, 'unauthorized');
        return;
      case 'server_error':
      case 'timeout':
      case 'network':
        this.recordFailure(health, now);
        return;
    }
  }

  /** Keys that can be tried now. */
  availableCount(): number {
    const now = this.clock.now();
    return this.keys.filter((health) => this.isAvailable(health, now)).length;
  }

  /** Why no key is available: the soonest cooling key, or every key disabled. `undefined`: one is available. */
  unavailable(): PoolUnavailable | undefined {
    if (this.availableCount() > 0) return undefined;
    const cooling = this.keys.filter((health) => !health.disabled);
    if (cooling.length === 0) return { retryAfterMs: undefined, reason: 'unauthorized' };
    const soonest = cooling.reduce((best, health) => (health.coolingUntil < best.coolingUntil ? health : best));
    return { retryAfterMs: Math.max(0, soonest.coolingUntil - this.clock.now()), reason: soonest.coolingReason };
  }

  /**
   * Takes a new configuration of this upstream: every key starts afresh (nothing cooling, nothing
   * disabled); sessions whose key is still configured keep it, so provider prompt caches still hit.
   */
  reload(upstream: Upstream): void {
    this.upstream = upstream;
    this.keys = upstream.keys.map((key) => ({
      key,
      current: 0,
      coolingUntil: 0,
      coolingReason: 'rate_limited',
      disabled: false,
      consecutiveRateLimits: 0,
      recent: [],
    }));
    const hashes = new Set(upstream.keys.map((key) => key.hash));
    for (const [session, hash] of this.affinity) if (!hashes.has(hash)) this.affinity.delete(session);
  }

  private isAvailable(health: KeyHealth, now: number): boolean {
    return !health.disabled && health.coolingUntil <= now;
  }

  // nginx's smooth weighted round robin: each pick raises every candidate by its weight and lowers
  // the chosen one by the total, so a 3:1 pair goes a,a,b,a rather than a,a,a,b.
  private nextByWeight(candidates: KeyHealth[]): KeyHealth {
    let total = 0;
    let chosen = candidates[0];
    for (const health of candidates) {
      health.current += health.key.weight;
      total += health.key.weight;
      if (health.current > chosen.current) chosen = health;
    }
    chosen.current -= total;
    return chosen;
  }

  private remember(sessionId: string, hash: string): void {
    rememberNewest(this.affinity, sessionId, hash, this.affinityCapacity);
  }

  private recordFailure(health: KeyHealth, now: number): void {
    this.pushAttempt(health, now, true);
    const recent = health.recent.filter((attempt) => attempt.at > now - FAILURE_WINDOW_MS);
    const failures = recent.filter((attempt) => attempt.failed).length;
    if (failures >= FAILURE_MIN_COUNT && failures >= FAILURE_MIN_SHARE * recent.length) {
      this.coolDown(health, now + FAILURE_COOLDOWN_MS, 'failure_rate');
    }
  }

  private pushAttempt(health: KeyHealth, now: number, failed: boolean): void {
    health.recent.push({ at: now, failed });
    if (health.recent.length > FAILURE_WINDOW_ATTEMPTS) health.recent.shift();
  }

  private coolDown(health: KeyHealth, until: number, reason: CooldownReason): void {
    health.coolingUntil = Math.max(health.coolingUntil, until);
    health.coolingReason = reason;
    this.options.observer?.upstreamKeyCooled(this.upstream.name, health.key.hash, reason);
  }
}

/**
 * A provider's day-long quota wait is honoured an hour at a time: one answer asking for ages must not take a key out
 * for good.
 */
const MAX_RETRY_AFTER_MS = 3_600_000;

/**
 * The wait a 429 asks for, in milliseconds: `retry-after-ms`, else `Retry-After` as seconds or as
 * an HTTP date, at most `MAX_RETRY_AFTER_MS`. `undefined` when neither is there or readable.
 */
export function retryAfterMs(headers: RetryAfterHeaders, now: number): number | undefined {
  const asked = askedWaitMs(headers, now);
  return asked === undefined ? undefined : Math.min(asked, MAX_RETRY_AFTER_MS);
}

function askedWaitMs(headers: RetryAfterHeaders, now: number): number | undefined {
  const milliseconds = Number(headers.retryAfterMs);
  if (headers.retryAfterMs && Number.isFinite(milliseconds) && milliseconds >= 0) return milliseconds;
  const value = headers.retryAfter?.trim();
  if (!value) return undefined;
  if (/^\d+(\.\d+)?$/.test(value)) return Math.round(Number(value) * 1_000);
  // An HTTP date names its month; Date.parse alone would take '-5' for a year.
  const date = /[A-Za-z]{3}/.test(value) ? Date.parse(value) : Number.NaN;
  return Number.isNaN(date) ? undefined : Math.max(0, date - now);
}
