import pg from 'pg';

export const EVENT_LOG_CHANNEL = 'event_log_appended';

/**
 * Wakes subscribers when the log grows: one LISTEN connection per event-log instance, shared
 * by all its subscriptions. Notifications are a hint, not a delivery: subscribers always read
 * the log, and poll on a timer when the connection is down, so a lost notification only adds
 * latency, never a gap.
 */
export class PostgresNotifier {
  private client: pg.Client | undefined;
  private version = 0;
  private waiters = new Set<() => void>();
  private reconnectTimer: NodeJS.Timeout | undefined;
  private closed = false;

  constructor(
    private readonly connectionString: string,
    private readonly onError: (error: Error) => void,
  ) {}

  async start(): Promise<void> {
    const client = new pg.Client({ connectionString: this.connectionString });
    client.on('notification', () => this.bump());
    client.on('error', (error) => this.reconnect(error));
    client.on('end', () => this.reconnect(new Error('LISTEN connection ended')));
    await client.connect();
    await client.query(`LISTEN ${EVENT_LOG_CHANNEL}`);
    this.client = client;
    // Anything appended while we were not listening: let subscribers look.
    this.bump();
  }

  /** A counter that moves on every notification; read it before reading the log, then `waitForChange(since)`. */
  get currentVersion(): number {
    return this.version;
  }

  /** Resolves when a notification arrived after `since`, at the latest after `timeoutMs`, or when `signal` aborts. */
  waitForChange(since: number, timeoutMs: number, signal: AbortSignal): Promise<void> {
    if (this.version !== since || signal.aborted) return Promise.resolve();
    return new Promise((resolve) => {
      const done = () => {
        clearTimeout(timer);
        signal.removeEventListener('abort', done);
        this.waiters.delete(done);
        resolve();
      };
      const timer = setTimeout(done, timeoutMs);
      signal.addEventListener('abort', done, { once: true });
      this.waiters.add(done);
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

  private bump(): void {
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
