import { setTimeout as sleep } from 'node:timers/promises';
import pg from 'pg';
import { whileHolding } from '../database/transaction.js';
import { ProjectionRunningError, within } from '../projections/projection-runner.js';

/** Held shared by every running instance; `cli.js log-repair` takes it alone (decision 0051). */
const INSTANCE_LOCK_KEY = 7_318_201_018;
/** The lock's waits: the service's below; its fault test runs them faster. */
export interface InstanceLockTiming {
  /** How long the lock's connection may take to answer, and how often a held one is checked. */
  readonly answerMs: number;
  /** Between two tries for the share, and before a lost one is taken again. */
  readonly retryMs: number;
}

const SERVICE_TIMING: InstanceLockTiming = { answerMs: 5_000, retryMs: 1_000 };

/** What the instance lock tells the service's log. */
export interface InstanceLockEvents {
  lost(error: Error): void;
  /** A repair holds the lock: the instance waits for it (once per wait). */
  waiting(): void;
}

/**
 * This instance's share of the instance lock, on a connection of its own for the instance's lifetime. While any
 * instance runs, a repair is refused, and an instance starting while a repair runs waits for it. The share is
 * tried for, not queued for, so a wait holds no backend in a lock queue. A held connection is checked every
 * `answerMs` (a half-open one frees the share on the server's side unseen); a lost one is discarded and the share
 * taken again on a new connection, by one loop at a time. Connections are discarded by destroying their socket:
 * an end waits for the server's goodbye, which a lost connection never sends.
 */
export class InstanceLock {
  private held: pg.Client | undefined;
  private attempt: pg.Client | undefined;
  private check: NodeJS.Timeout | undefined;
  private retaking: Promise<void> | undefined;
  private checking = false;
  private released = false;

  constructor(
    private readonly connectionString: string | undefined,
    private readonly events: InstanceLockEvents,
    private readonly timing: InstanceLockTiming = SERVICE_TIMING,
  ) {}

  /** Takes the share, waiting while a repair holds the lock. */
  async take(): Promise<void> {
    const client = new pg.Client({
      connectionString: this.connectionString,
      keepAlive: true,
      keepAliveInitialDelayMillis: this.timing.answerMs,
      connectionTimeoutMillis: this.timing.answerMs,
    });
    client.on('error', (error) => this.lost(client, error));
    this.attempt = client;
    try {
      await client.connect();
      for (let tries = 0; !(await this.triedForShare(client)); tries += 1) {
        if (tries === 0) this.events.waiting();
        await sleep(this.timing.retryMs);
      }
    } catch (error) {
      discard(client);
      throw error;
    } finally {
      if (this.attempt === client) this.attempt = undefined;
    }
    if (this.released) return discard(client);
    this.held = client;
    this.check ??= setInterval(() => void this.checked(), this.timing.answerMs).unref();
  }

  private async triedForShare(client: pg.Client): Promise<boolean> {
    if (this.released) throw new Error('the instance lock was released');
    const tried = client.query<{ held: boolean }>('SELECT pg_try_advisory_lock_shared($1) AS held', [
      INSTANCE_LOCK_KEY,
    ]);
    const answer = await within(tried, this.timing.answerMs);
    if (!answer) throw new Error(`the database did not answer in ${this.timing.answerMs} ms`);
    return answer.rows[0].held;
  }

  /** The held connection answers within `answerMs`, or it is lost. */
  private async checked(): Promise<void> {
    const client = this.held;
    if (!client || this.checking) return;
    this.checking = true;
    try {
      const answered = await within(
        client.query('SELECT 1').then(() => true),
        this.timing.answerMs,
      );
      if (!answered)
        this.lost(client, new Error(`the instance lock's connection did not answer in ${this.timing.answerMs} ms`));
    } catch (error) {
      this.lost(client, error as Error);
    } finally {
      this.checking = false;
    }
  }

  /** Discards a lost held connection once, and starts the one loop that takes the share again. */
  private lost(client: pg.Client, error: Error): void {
    if (this.released || client !== this.held) return;
    this.held = undefined;
    this.events.lost(error);
    discard(client);
    this.retaking ??= this.retake().finally(() => (this.retaking = undefined));
  }

  private async retake(): Promise<void> {
    while (!this.released) {
      await sleep(this.timing.retryMs);
      if (this.released) return;
      try {
        return await this.take();
      } catch (error) {
        if (!this.released) this.events.lost(error as Error);
      }
    }
  }

  async release(): Promise<void> {
    this.released = true;
    clearInterval(this.check);
    if (this.attempt) discard(this.attempt);
    const held = this.held;
    this.held = undefined;
    // A held connection ends gracefully (the share is freed at once), or is discarded if it does not answer.
    if (
      held &&
      !(await within(
        held.end().then(() => true),
        this.timing.retryMs,
      ))
    )
      discard(held);
    await this.retaking;
  }
}

/** Runs `work` while no instance runs: the instance lock taken alone, or a ProjectionRunningError. */
export function withNoInstanceRunning<T>(pool: pg.Pool, work: () => Promise<T>): Promise<T> {
  const refused = () => new ProjectionRunningError('the service');
  return whileHolding(pool, String(INSTANCE_LOCK_KEY), refused, work);
}

/** Closes the connection's socket without waiting for the server: its backend ends, and the share with it. */
function discard(client: pg.Client): void {
  (client as unknown as { connection: { stream: { destroy(): void } } }).connection.stream.destroy();
}
