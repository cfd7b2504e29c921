import type pg from 'pg';
import { DatabaseClient } from './database-failure.js';

export const EVENT_LOG_CHANNEL = 'event_log_appended';

/**
 * Wakes subscribers when the log grows: one LISTEN connection per event-log instance, shared
 * by all its subscriptions. Notifications are a hint, not a delivery: subscribers always read
 * the log, and poll on a timer when the connection is down, so a lost notification only adds
 * latency, never a gap. Each notification names the head its append left (`announcedHead`), so
 * a subscriber already past it (it took the events from its own instance's commit) need not read.
 */
export class PostgresNotifier {
  private client: pg.Client | undefined;
  private version = 0;
  private head = 0n;
  /** Moves when the notifier (re)starts or a notification names no head: subscribers must read. */
  private generation = 0;
  private waiters = new Set<() => void>();
  private reconnectTimer: NodeJS.Timeout | undefined;
  private closed = false;

  constructor(
    private readonly connection: pg.ClientConfig,
    private readonly onError: (error: Error) => void,
  ) {}

  async start(): Promise<void> {
    const client: pg.Client = new DatabaseClient(this.connection);
    client.on('notification', ({ payload }) => this.announce(payload));
    client.on('error', (error) => this.reconnect(error));
    client.on('end', () => this.reconnect(new Error('LISTEN connection ended')));
    await client.connect();
    await client.query(`LISTEN ${EVENT_LOG_CHANNEL}`);
    this.client = client;
    // Anything appended while we were not listening: let subscribers look.
    this.generation += 1;
    this.bump();
  }

  /** The highest log head a notification has named so far. */
  get announcedHead(): bigint {
    return this.head;
  }

  /** Changes whenever subscribers must read, whatever `announcedHead` says. */
  get readGeneration(): number {
    return this.generation;
  }

  /** A counter that moves on every notification; read it before reading the log, then `waitForChange(since)`. */
  get currentVersion(): number {
    return this.version;
  }

  /**
   * Resolves when a notification arrived after `since` (true), at the latest after `timeoutMs`
   * (false: the caller reads, a notification may have been lost), or when `signal` aborts.
   */
  waitForChange(since: number, timeoutMs: number, signal: AbortSignal): Promise<boolean> {
    if (this.version !== since || signal.aborted) return Promise.resolve(true);
    return new Promise((resolve) => {
      const done = (changed: boolean) => {
        clearTimeout(timer);
        signal.removeEventListener('abort', woken);
        this.waiters.delete(woken);
        resolve(changed);
      };
      const woken = () => done(true);
      const timer = setTimeout(() => done(false), timeoutMs);
      signal.addEventListener('abort', woken, { once: true });
      this.waiters.add(woken);
    });
  }

  async close(): Promise<void> {
    this.closed = true;
    clearTimeout(this.reconnectTimer);
    this.bump();
    const client = this.client;
    this.client = undefined;
    await client?.end().catch(() => undefined);
  }

  /** A notification: its payload is the head the append left; anything else makes every subscriber read. */
  private announce(payload: string | undefined): void {
    if (payload !== undefined && /^\d+$/.test(payload)) {
      const head = BigInt(payload);
      if (head > this.head) this.head = head;
    } else this.generation += 1;
    this.bump();
  }

  /** Wakes the waiters: a notification, a (re)start, or a commit of this instance's own (`RecentCommits`). */
  bump(): void {
    this.version += 1;
    for (const wake of [...this.waiters]) wake();
  }

  private reconnect(error: Error): void {
    if (this.closed || this.reconnectTimer) return;
    this.onError(error);
    const broken = this.client;
    this.client = undefined;
    void broken?.end().catch(() => undefined);
    this.reconnectTimer = setTimeout(() => {
      this.reconnectTimer = undefined;
      this.start().catch((startError: Error) => this.reconnect(startError));
    }, 1_000);
  }
}
