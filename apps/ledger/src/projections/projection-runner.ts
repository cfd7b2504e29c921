import type { EventLog, Subscription } from '#event-log';
import type { Pool } from 'pg';
import { createHash } from 'node:crypto';
import { inTransaction } from '../database/transaction.js';
import type { ProjectionDefinition } from './projection.js';

/** Another runner moved the checkpoint under us: a second instance is running the projection. */
export class CheckpointMovedError extends Error {
  constructor(name: string, expected: bigint) {
    super(`projection ${name}: checkpoint is no longer ${expected}; another runner moved it`);
    this.name = 'CheckpointMovedError';
  }
}

export interface ProjectionRunnerOptions {
  readonly retryDelayMs?: number;
  readonly onError?: (error: Error) => void;
}

/**
 * Runs a projection on a durable, checkpointed subscription to the log. One instance at a time
 * runs it (a session advisory lock per projection); the others follow its checkpoint.
 *
 * Exactly once: each batch's rows and the checkpoint commit in one transaction, and the
 * checkpoint moves by compare-and-set. After any failure the in-memory state is dropped and the
 * runner restarts from the stored checkpoint.
 */
export class ProjectionRunner {
  private applied = -1n;
  private stopped = false;
  private subscription: Subscription | undefined;
  private loop: Promise<void> | undefined;
  private readonly waiters = new Set<() => void>();

  constructor(
    private readonly pool: Pool,
    private readonly eventLog: EventLog,
    private readonly definition: ProjectionDefinition,
    private readonly options: ProjectionRunnerOptions = {},
  ) {}

  start(): void {
    this.loop ??= this.run();
  }

  async stop(): Promise<void> {
    this.stopped = true;
    this.wakeWaiters();
    await this.subscription?.close();
    await this.loop;
  }

  /** Resolves true once the read models reflect `position`, false after `timeoutMs`. */
  async waitForPosition(position: bigint, timeoutMs: number): Promise<boolean> {
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      if ((await this.position()) >= position) return true;
      const left = deadline - Date.now();
      if (left <= 0) return false;
      await new Promise<void>((resolve) => {
        const wake = () => {
          clearTimeout(timer);
          this.waiters.delete(wake);
          resolve();
        };
        const timer = setTimeout(wake, Math.min(left, 50));
        this.waiters.add(wake);
      });
    }
  }

  /** The position the read models reflect: this runner's, or the stored checkpoint when another instance runs the projection. */
  async position(): Promise<bigint> {
    if (this.applied >= 0n) return this.applied;
    const { rows } = await this.pool.query<{ position: string }>(
      'SELECT position FROM projection_checkpoints WHERE name = $1',
      [this.definition.name],
    );
    return rows[0] ? BigInt(rows[0].position) : 0n;
  }

  private async run(): Promise<void> {
    const lockKey = lockKeyOf(this.definition.name);
    while (!this.stopped) {
      const lock = await this.pool.connect().catch((error: Error) => error);
      if (lock instanceof Error) {
        await this.pause(lock);
        continue;
      }
      // The lock's connection can die while it waits between batches (a database restart): without a
      // listener that would crash the process; with it, the leader steps down and takes the lock anew.
      let broken: Error | undefined;
      const stepDown = (error: Error) => {
        broken = error;
        void this.subscription?.close();
      };
      lock.on('error', stepDown);
      try {
        const { rows } = await lock.query<{ leader: boolean }>('SELECT pg_try_advisory_lock($1::bigint) AS leader', [
          lockKey.toString(),
        ]);
        if (!rows[0].leader) {
          this.applied = -1n;
          await this.pause();
          continue;
        }
        try {
          await this.follow();
        } finally {
          this.applied = -1n;
          await lock.query('SELECT pg_advisory_unlock($1::bigint)', [lockKey.toString()]);
        }
      } catch (error) {
        await this.pause(error as Error);
      } finally {
        // The pool hands the same client out again: a listener left on it would pile up.
        lock.off('error', stepDown);
        lock.release(broken);
      }
    }
  }

  private async follow(): Promise<void> {
    this.definition.reset();
    let checkpoint = await this.storedCheckpoint();
    await this.definition.resume?.();
    this.advance(checkpoint);
    this.subscription = this.eventLog.subscribeToAll({ fromPosition: checkpoint, filter: this.definition.filter });
    // stop() may have run while we were taking the lock, before this subscription existed.
    if (this.stopped) await this.subscription.close();
    try {
      for await (const batch of this.subscription) {
        if (batch.checkpoint === checkpoint) continue;
        await inTransaction(this.pool, async (client) => {
          if (batch.events.length > 0) await this.definition.handle(batch.events, { client, eventLog: this.eventLog });
          const moved = await client.query(
            'UPDATE projection_checkpoints SET position = $3, updated_at = now() WHERE name = $1 AND position = $2',
            [this.definition.name, checkpoint.toString(), batch.checkpoint.toString()],
          );
          if (moved.rowCount !== 1) throw new CheckpointMovedError(this.definition.name, checkpoint);
        });
        checkpoint = batch.checkpoint;
        this.advance(checkpoint);
      }
    } catch (error) {
      this.definition.reset();
      throw error;
    }
  }

  /** Creates the checkpoint at `position` unless it exists: a consumer that must not act on history it predates starts at the log's head. */
  async createCheckpointAt(position: bigint): Promise<void> {
    await this.pool.query(
      'INSERT INTO projection_checkpoints (name, position) VALUES ($1, $2) ON CONFLICT (name) DO NOTHING',
      [this.definition.name, position.toString()],
    );
  }

  private async storedCheckpoint(): Promise<bigint> {
    await this.pool.query(
      'INSERT INTO projection_checkpoints (name, position) VALUES ($1, 0) ON CONFLICT (name) DO NOTHING',
      [this.definition.name],
    );
    const { rows } = await this.pool.query<{ position: string }>(
      'SELECT position FROM projection_checkpoints WHERE name = $1',
      [this.definition.name],
    );
    return BigInt(rows[0].position);
  }

  private advance(position: bigint): void {
    this.applied = position;
    this.wakeWaiters();
  }

  private wakeWaiters(): void {
    for (const wake of [...this.waiters]) wake();
  }

  private async pause(error?: Error): Promise<void> {
    if (error && !this.stopped) this.options.onError?.(error);
    if (!this.stopped) await new Promise((resolve) => setTimeout(resolve, this.options.retryDelayMs ?? 1_000));
  }
}

function lockKeyOf(name: string): bigint {
  return createHash('sha256').update(`projection:${name}`).digest().readBigInt64BE(0);
}
