import pg from 'pg';
import { whileHolding } from '../database/transaction.js';
import { ProjectionRunningError } from '../projections/projection-runner.js';

/** Held shared by every running instance; `cli.js log-repair` takes it alone (decision 0051). */
const INSTANCE_LOCK_KEY = 7_318_201_018;
const RETAKE_DELAY_MS = 1_000;

/**
 * This instance's share of the instance lock, on a connection of its own for the instance's lifetime. While any
 * instance runs, a repair is refused, and an instance starting while a repair runs waits for it. A lost connection
 * is replaced and the share taken again.
 */
export class InstanceLock {
  private client: pg.Client | undefined;
  private released = false;

  constructor(
    private readonly connectionString: string | undefined,
    private readonly onLost: (error: Error) => void,
  ) {}

  async take(): Promise<void> {
    const client = new pg.Client({ connectionString: this.connectionString, keepAlive: true });
    client.on('error', (error) => {
      if (this.released) return;
      this.onLost(error);
      void this.retake();
    });
    await client.connect();
    await client.query('SELECT pg_advisory_lock_shared($1)', [INSTANCE_LOCK_KEY]);
    this.client = client;
  }

  private async retake(): Promise<void> {
    while (!this.released) {
      await new Promise((resolve) => setTimeout(resolve, RETAKE_DELAY_MS));
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
    await this.client?.end();
  }
}

/** Runs `work` while no instance runs: the instance lock taken alone, or a ProjectionRunningError. */
export function withNoInstanceRunning<T>(pool: pg.Pool, work: () => Promise<T>): Promise<T> {
  const refused = () => new ProjectionRunningError('the service');
  return whileHolding(pool, String(INSTANCE_LOCK_KEY), refused, work);
}
