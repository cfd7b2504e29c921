import pg from 'pg';
import { whileHolding } from '../database/transaction.js';
import { ProjectionRunningError, within } from '../projections/projection-runner.js';

/** Held shared by every running instance; `cli.js log-repair` takes it alone (decision 0051). */
const INSTANCE_LOCK_KEY = 7_318_201_018;
/** How often the lock's connection is checked, and how long a lost one waits before the share is taken again. */
const CHECK_INTERVAL_MS = 5_000;

/**
 * This instance's share of the instance lock, on a connection of its own for the instance's lifetime. While any
 * instance runs, a repair is refused, and an instance starting while a repair runs waits for it. The connection is
 * checked every CHECK_INTERVAL_MS (a half-open one frees the share on the server's side unseen): a lost one is ended
 * and the share taken again on a new one, by one loop at a time.
 */
export class InstanceLock {
  private client: pg.Client | undefined;
  private check: NodeJS.Timeout | undefined;
  private retaking: Promise<void> | undefined;
  private checking = false;
  private released = false;

  constructor(
    private readonly connectionString: string | undefined,
    private readonly onLost: (error: Error) => void,
  ) {}

  /** Takes the share, waiting while a repair holds the lock. */
  async take(): Promise<void> {
    const client = new pg.Client({
      connectionString: this.connectionString,
      keepAlive: true,
      keepAliveInitialDelayMillis: CHECK_INTERVAL_MS,
    });
    client.on('error', (error) => this.lost(client, error));
    this.client = client;
    try {
      await client.connect();
      await client.query('SELECT pg_advisory_lock_shared($1)', [INSTANCE_LOCK_KEY]);
    } catch (error) {
      this.client = undefined;
      await client.end().catch(() => undefined);
      throw error;
    }
    if (this.released) return void (await client.end().catch(() => undefined));
    this.check ??= setInterval(() => void this.checked(), CHECK_INTERVAL_MS).unref();
  }

  /** The connection answers within CHECK_INTERVAL_MS, or it is lost. */
  private async checked(): Promise<void> {
    const client = this.client;
    if (!client || this.checking) return;
    this.checking = true;
    try {
      const answered = await within(
        client.query('SELECT 1').then(() => true),
        CHECK_INTERVAL_MS,
      );
      if (!answered)
        this.lost(client, new Error(`the instance lock's connection did not answer in ${CHECK_INTERVAL_MS} ms`));
    } catch (error) {
      this.lost(client, error as Error);
    } finally {
      this.checking = false;
    }
  }

  /** Ends a lost connection once, and starts the one loop that takes the share again. */
  private lost(client: pg.Client, error: Error): void {
    if (this.released || client !== this.client) return;
    this.client = undefined;
    this.onLost(error);
    void client.end().catch(() => undefined);
    this.retaking ??= this.retake().finally(() => (this.retaking = undefined));
  }

  private async retake(): Promise<void> {
    while (!this.released) {
      await new Promise((resolve) => setTimeout(resolve, CHECK_INTERVAL_MS / 5));
      if (this.released) return;
      try {
        return await this.take();
      } catch (error) {
        this.onLost(error as Error);
      }
    }
  }

  async release(): Promise<void> {
    this.released = true;
    clearInterval(this.check);
    const client = this.client;
    this.client = undefined;
    await client?.end().catch(() => undefined);
    await this.retaking;
  }
}

/** Runs `work` while no instance runs: the instance lock taken alone, or a ProjectionRunningError. */
export function withNoInstanceRunning<T>(pool: pg.Pool, work: () => Promise<T>): Promise<T> {
  const refused = () => new ProjectionRunningError('the service');
  return whileHolding(pool, String(INSTANCE_LOCK_KEY), refused, work);
}
