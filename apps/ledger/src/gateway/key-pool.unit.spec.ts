import { KeyPool, retryAfterMs } from './key-pool.js';
import { parseUpstreams, type Upstream, type UpstreamKey } from './upstreams-config.js';
import { LedgerMetrics } from '../metrics/ledger-metrics.js';

/** Time stands still until a test moves it. */
class ManualClock {
  time = Date.UTC(2026, 10, 22, 12, 0, 0);
  now(): number {
    return this.time;
  }
  advance(ms: number): void {
    this.time += ms;
  }
}

function upstreamWith(keys: { key: string; weight?: number }[]): Upstream {
  const upstream = { name: 'main', protocol: 'openai', baseUrl: 'http://provider.test/v1', models: '*', keys };
  return parseUpstreams({ upstreams: [upstream] }, {})[0];
}

function keyNamed(upstream: Upstream, value: string): UpstreamKey {
  return upstream.keys.find((key) => key.value() === value)!;
}

describe('KeyPool', () => {
  let clock: ManualClock;
  beforeEach(() => {
    clock = new ManualClock();
  });

  const poolOf = (keys: { key: string; weight?: number }[], metrics?: LedgerMetrics) => {
    const upstream = upstreamWith(keys);
    return { upstream, pool: new KeyPool(upstream, { clock, observer: metrics }) };
  };
  const picks = (pool: KeyPool, count: number, session?: (index: number) => string) =>
    Array.from({ length: count }, (_, index) => pool.pick(session?.(index))!.value());

  describe('weighted round robin', () => {
    it('gives each key its weight’s share of many picks, spread rather than in runs', () => {
      const { pool } = poolOf([{ key: 'a', weight: 3 }, { key: 'b', weight: 2 }, { key: 'c' }]);
      const chosen = picks(pool, 600);
      const count = (value: string) => chosen.filter((key) => key === value).length;
      expect([count('a'), count('b'), count('c')]).toEqual([300, 200, 100]);
      // Smooth: within every cycle of 6 picks the heaviest key is never picked three times running.
      expect(chosen.join('')).not.toContain('aaa');
    });

    it('shares among the available keys only', () => {
      const { upstream, pool } = poolOf([{ key: 'a', weight: 2 }, { key: 'b' }, { key: 'c' }]);
      pool.report(keyNamed(upstream, 'b'), 'unauthorized');
      const chosen = picks(pool, 300);
      expect(chosen.filter((key) => key === 'a')).toHaveLength(200);
      expect(chosen.filter((key) => key === 'c')).toHaveLength(100);
    });

    it('passes over the keys already tried for this request', () => {
      const { upstream, pool } = poolOf([{ key: 'a' }, { key: 'b' }]);
      const tried = new Set([keyNamed(upstream, 'a').hash]);
      expect(picks(pool, 2).sort()).toEqual(['a', 'b']);
      expect(pool.pick(undefined, tried)?.value()).toBe('b');
      expect(pool.pick(undefined, new Set([...tried, keyNamed(upstream, 'b').hash]))).toBeUndefined();
    });
  });

  describe('session affinity', () => {
    it('keeps a session on its key while that key is available, whatever other sessions pick', () => {
      const { pool } = poolOf([{ key: 'a' }, { key: 'b' }, { key: 'c' }]);
      const first = pool.pick('session-1')!.value();
      for (let round = 0; round < 20; round++) {
        pool.pick(`other-${round}`);
        expect(pool.pick('session-1')!.value()).toBe(first);
      }
    });

    it('moves a session when its key cools, and keeps it on the new key', () => {
      const { upstream, pool } = poolOf([{ key: 'a' }, { key: 'b' }, { key: 'c' }]);
      const first = pool.pick('session-1')!;
      pool.report(first, 'rate_limited', { retryAfter: '10' });
      const second = pool.pick('session-1')!;
      expect(second.hash).not.toBe(first.hash);
      clock.advance(10_000);
      expect(pool.pick('session-1')!.hash).toBe(second.hash);
      expect(upstream.keys).toContain(second);
    });

    it('forgets the least recently used session past its capacity', () => {
      const upstream = upstreamWith([{ key: 'a' }, { key: 'b' }]);
      const pool = new KeyPool(upstream, { clock, affinityCapacity: 1 });
      expect(pool.pick('session-1')!.value()).toBe('a');
      expect(pool.pick('session-2')!.value()).toBe('b');
      expect(pool.pick(undefined)!.value()).toBe('a');
      // session-1 was forgotten: round robin gives it the next key, not its old one.
      expect(pool.pick('session-1')!.value()).toBe('b');
    });
  });

  describe('429', () => {
    it('cools the key for exactly its Retry-After in seconds', () => {
      const { upstream, pool } = poolOf([{ key: 'a' }]);
      pool.report(keyNamed(upstream, 'a'), 'rate_limited', { retryAfter: '7' });
      clock.advance(6_999);
      expect(pool.pick('s')).toBeUndefined();
      expect(pool.unavailable()).toEqual({ retryAfterMs: 1, reason: 'rate_limited' });
      clock.advance(1);
      expect(pool.pick('s')?.value()).toBe('a');
    });

    it('honours Retry-After as an HTTP date and retry-after-ms before Retry-After', () => {
      const { upstream, pool } = poolOf([{ key: 'a' }, { key: 'b' }]);
      pool.report(keyNamed(upstream, 'a'), 'rate_limited', { retryAfter: new Date(clock.time + 5_000).toUTCString() });
      pool.report(keyNamed(upstream, 'b'), 'rate_limited', { retryAfter: '60', retryAfterMs: '1500' });
      clock.advance(1_499);
      expect(pool.availableCount()).toBe(0);
      clock.advance(1);
      expect(pool.pick(undefined)?.value()).toBe('b');
      clock.advance(3_499);
      expect(pool.availableCount()).toBe(1);
      clock.advance(1);
      expect(pool.availableCount()).toBe(2);
    });

    it('backs off 1 s doubling to 60 s without Retry-After, and a success starts over', () => {
      const { upstream, pool } = poolOf([{ key: 'a' }]);
      const key = keyNamed(upstream, 'a');
      const cooldowns: number[] = [];
      for (let attempt = 0; attempt < 8; attempt++) {
        pool.report(key, 'rate_limited');
        cooldowns.push(pool.unavailable()!.retryAfterMs!);
        clock.advance(cooldowns.at(-1)!);
      }
      expect(cooldowns).toEqual([1_000, 2_000, 4_000, 8_000, 16_000, 32_000, 60_000, 60_000]);
      pool.report(key, 'ok');
      pool.report(key, 'rate_limited', { retryAfter: 'soon' });
      expect(pool.unavailable()!.retryAfterMs).toBe(1_000);
    });
  });

  describe('401', () => {
    it('disable the key until the configuration is reloaded, which gives every key a fresh start', () => {
      const { upstream, pool } = poolOf([{ key: 'a' }, { key: 'b' }]);
      pool.report(keyNamed(upstream, 'a'), 'unauthorized');
      pool.report(keyNamed(upstream, 'b'), 'rate_limited', { retryAfter: '3600' });
      clock.advance(86_400_000);
      expect(picks(pool, 5)).toEqual(['b', 'b', 'b', 'b', 'b']);
      pool.report(keyNamed(upstream, 'b'), 'unauthorized');
      expect(pool.pick(undefined)).toBeUndefined();
      expect(pool.unavailable()).toEqual({ retryAfterMs: undefined, reason: 'unauthorized' });

      pool.reload(upstreamWith([{ key: 'a' }, { key: 'b' }]));
      expect(pool.availableCount()).toBe(2);
    });

    it('keep a session on its key across a reload that keeps the key', () => {
      const { pool } = poolOf([{ key: 'a' }, { key: 'b' }]);
      pool.pick('other');
      expect(pool.pick('session-1')!.value()).toBe('b');
      // Round robin over the new order would start with a.
      pool.reload(upstreamWith([{ key: 'a' }, { key: 'c' }, { key: 'b' }]));
      expect(pool.pick('session-1')!.value()).toBe('b');
    });
  });

  describe('5xx, timeouts and network errors', () => {
    it('cool the key 30 s once at least 3 failures make half of its last 10 attempts', () => {
      const { upstream, pool } = poolOf([{ key: 'a' }]);
      const key = keyNamed(upstream, 'a');
      for (let success = 0; success < 6; success++) pool.report(key, 'ok');
      pool.report(key, 'server_error');
      pool.report(key, 'timeout');
      pool.report(key, 'network');
      pool.report(key, 'server_error');
      // 4 failures of 10 attempts: below half.
      expect(pool.availableCount()).toBe(1);
      pool.report(key, 'server_error');
      // 5 of the last 10.
      expect(pool.unavailable()).toEqual({ retryAfterMs: 30_000, reason: 'failure_rate' });
      clock.advance(30_000);
      expect(pool.availableCount()).toBe(1);
    });

    it('count only the failures of the last 60 s', () => {
      const { upstream, pool } = poolOf([{ key: 'a' }]);
      const key = keyNamed(upstream, 'a');
      pool.report(key, 'server_error');
      pool.report(key, 'server_error');
      clock.advance(60_000);
      pool.report(key, 'server_error');
      pool.report(key, 'server_error');
      expect(pool.availableCount()).toBe(1);
      pool.report(key, 'timeout');
      expect(pool.availableCount()).toBe(0);
    });

    it('leave a key alone when the client made the error', () => {
      const { upstream, pool } = poolOf([{ key: 'a' }]);
      for (let attempt = 0; attempt < 10; attempt++) pool.report(keyNamed(upstream, 'a'), 'client_error');
      expect(pool.availableCount()).toBe(1);
    });
  });

  it('reports each cooldown to the metrics by upstream, key hash and reason, never the key', async () => {
    const metrics = new LedgerMetrics();
    const { upstream, pool } = poolOf([{ key: 'sk-live-secret-a' }, { key: 'sk-live-secret-b' }], metrics);
    pool.report(upstream.keys[0], 'rate_limited', { retryAfter: '1' });
    pool.report(upstream.keys[1], 'unauthorized');
    const text = await metrics.registry.metrics();
    const hashA = upstream.keys[0].hash;
    const cooldowns = 'ledger_gateway_upstream_key_cooldowns_total';
    expect(text).toContain(`${cooldowns}{upstream="main",key="${hashA}",reason="rate_limited"} 1`);
    expect(text).toContain(`key="${upstream.keys[1].hash}",reason="unauthorized"} 1`);
    expect(text).not.toContain('secret');
  });
});

describe('retryAfterMs', () => {
  const now = Date.UTC(2026, 0, 1);
  it.each<[string, { retryAfter?: string; retryAfterMs?: string }, number | undefined]>([
    ['whole seconds', { retryAfter: '20' }, 20_000],
    ['fractional seconds', { retryAfter: '0.25' }, 250],
    ['an HTTP date', { retryAfter: new Date(now + 3_000).toUTCString() }, 3_000],
    ['an HTTP date already past', { retryAfter: new Date(now - 3_000).toUTCString() }, 0],
    ['retry-after-ms first', { retryAfter: '20', retryAfterMs: '750' }, 750],
    ['nothing', {}, undefined],
    ['an unreadable value', { retryAfter: 'later' }, undefined],
    ['a negative number', { retryAfter: '-5' }, undefined],
    ['a wait of ages, as at most an hour', { retryAfterMs: '1e308' }, 3_600_000],
    ['a date years ahead, as at most an hour', { retryAfter: new Date(now + 9e10).toUTCString() }, 3_600_000],
  ])('reads %s', (_case, headers, expected) => {
    expect(retryAfterMs(headers, now)).toBe(expected);
  });
});
