import { KeyPool, type KeyPoolOptions } from './key-pool.js';
import { loadUpstreams, upstreamFor, type Upstream, type UpstreamProtocol } from './upstreams-config.js';

/** The configured upstreams and one key pool each; `reload()` re-reads the configuration. */
export class UpstreamPools {
  private upstreams: readonly Upstream[] = [];
  private readonly pools = new Map<string, KeyPool>();

  /** `load` is read now and at every reload; a throw at reload keeps the configuration in force. */
  constructor(
    private readonly load: () => readonly Upstream[],
    private readonly options: KeyPoolOptions,
  ) {
    this.reload();
  }

  /** Reads the `LEDGER_UPSTREAMS` file with `${ENV_NAME}` keys taken from `env`. */
  static fromFile(file: string, env: NodeJS.ProcessEnv, options: KeyPoolOptions): UpstreamPools {
    return new UpstreamPools(() => loadUpstreams(file, env), options);
  }

  /** The first upstream that lists `model`, else the first that takes any model. */
  upstreamFor(model: string, protocol?: UpstreamProtocol): Upstream | undefined {
    return upstreamFor(this.upstreams, model, protocol);
  }

  /** The pool of a configured upstream (by name; throws for one the configuration does not hold). */
  pool(upstream: string): KeyPool {
    const pool = this.pools.get(upstream);
    if (!pool) throw new Error(`no upstream named ${upstream}`);
    return pool;
  }

  /**
   * Re-reads the configuration. Every key starts afresh (a key disabled by a 401 gets another
   * chance); pools of upstreams no longer configured are dropped.
   */
  reload(): void {
    const upstreams = this.load();
    const names = new Set(upstreams.map((upstream) => upstream.name));
    for (const name of this.pools.keys()) if (!names.has(name)) this.pools.delete(name);
    for (const upstream of upstreams) {
      const pool = this.pools.get(upstream.name);
      if (pool) pool.reload(upstream);
      else this.pools.set(upstream.name, new KeyPool(upstream, this.options));
    }
    this.upstreams = upstreams;
  }

  /** Keys that can be tried now, per upstream (the metrics gauge reads it at each scrape). */
  availableKeys(): { upstream: string; available: number }[] {
    return this.upstreams.map(({ name }) => ({ upstream: name, available: this.pool(name).availableCount() }));
  }
}
