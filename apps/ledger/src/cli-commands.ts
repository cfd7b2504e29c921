import type { Checkpoint, NoteVerifier } from '#core';
import { createPostgresEventLog, heardPool, type EventLog } from '#event-log';
import type pg from 'pg';
import { pino } from 'pino';
import type { LedgerConfig } from './config/ledger-config.js';
import { connectRetry, openDatabase, openEventStoreLog, waitForEventStore } from './config/startup-checks.js';
import { StartupError } from './database/embedded-postgres.js';
import { runMigrations } from './database/migrations.js';
import { ApiError } from './http/api-error.js';
import { ApiKeyStore } from './identity/api-key-store.js';
import type { parseNewKey } from './identity/key-requests.js';
import { systemActor } from './identity/principal.js';
import { ProjectionRunner, ProjectionRunningError } from './projections/projection-runner.js';
import { rebuildReadModels } from './projections/read-model-projections.js';
import { auditLog } from './verifiable-log/leaf-audit.js';
import { LogForkError } from './verifiable-log/log-fork-error.js';
import { loadLogSigningKey } from './verifiable-log/log-signing-key.js';
import { merkleLogConsumer } from './verifiable-log/merkle-log.consumer.js';
import { signedCheckpointAt } from './verifiable-log/merkle-store.js';
import { SignedCheckpointMemory } from './verifiable-log/signed-checkpoint-memory.js';
import { VerifiableLog } from './verifiable-log/verifiable-log.js';

/** A command line whose arguments all checked (cli.ts): what is left needs the storage. */
export type CliCommand =
  | { readonly name: 'rebuild' }
  | { readonly name: 'keys create'; readonly key: ReturnType<typeof parseNewKey> & { readonly tenant: string } }
  | { readonly name: 'keys list'; readonly tenant: string | undefined }
  | { readonly name: 'keys revoke'; readonly id: string }
  | {
      readonly name: 'audit-log';
      readonly verifier: NoteVerifier;
      readonly pinned: Checkpoint | undefined;
    }
  | { readonly name: 'log-repair' };

/** Runs `command` on the configuration's storage; its code is the process's exit code. */
export async function runCliCommand(command: CliCommand, config: LedgerConfig): Promise<number | void> {
  // Listing keys reads PostgreSQL alone: it works while EventStoreDB is away.
  const usesTheLog = command.name !== 'keys list';
  return withStorage(config, usesTheLog, (pool, eventLog) => run(command, config, pool, eventLog)).catch(
    (error: unknown) => {
      // The refusals an operator can act on, told in one line (cli.ts prints a StartupError's message).
      if (error instanceof ApiError || error instanceof LogForkError || error instanceof ProjectionRunningError)
        throw new StartupError(error.message);
      throw error;
    },
  );
}

async function run(command: CliCommand, config: LedgerConfig, pool: pg.Pool, eventLog: EventLog) {
  switch (command.name) {
    case 'rebuild':
      return rebuild(pool, eventLog);
    case 'keys create':
      return print(await new ApiKeyStore(pool, eventLog).create(command.key, systemActor('cli')));
    case 'keys list':
      return print({ keys: await new ApiKeyStore(pool, eventLog).list(command.tenant) });
    case 'keys revoke':
      return print(await new ApiKeyStore(pool, eventLog).revoke(command.id, undefined, systemActor('cli')));
    case 'audit-log':
      return audit(pool, eventLog, command);
    case 'log-repair':
      return logRepair(config, pool, eventLog);
  }
}

const print = (value: unknown) => console.log(JSON.stringify(value));

async function rebuild(pool: pg.Pool, eventLog: EventLog): Promise<void> {
  for (const { name, result } of await rebuildReadModels(pool, eventLog)) {
    const durationMs = Math.round(result.durationMs);
    const position = Number(result.position);
    print({ rebuilt: name, events: result.events, position, durationMs });
  }
}

/**
 * Without a pinned checkpoint, the newest one stored that the pinned key signed is audited: whoever holds the
 * database can delete the newest, so an auditor passes the one they pinned.
 */
async function audit(
  pool: pg.Pool,
  eventLog: EventLog,
  { verifier, pinned }: Extract<CliCommand, { name: 'audit-log' }>,
): Promise<number> {
  const checkpoint = pinned ?? (await signedCheckpointAt(pool, verifier));
  if (!checkpoint) throw new StartupError('no checkpoint signed with --key is stored');
  const audit = await auditLog(pool, eventLog, checkpoint);
  const treeSize = String(checkpoint.treeSize);
  print(
    audit.broken
      ? { ok: false, treeSize, firstBroken: audit.broken }
      : { ok: true, treeSize, lastPosition: audit.tree.lastPosition?.toString() ?? null },
  );
  return audit.broken ? 1 : 0;
}

/** The service's own signer, on its key and data folder (neither made here), asked to drop what it cannot sign. */
async function logRepair(config: LedgerConfig, pool: pg.Pool, eventLog: EventLog): Promise<void> {
  const key = await loadLogSigningKey(config.verifiableLog, config.dataDir, { generate: false });
  const memory = new SignedCheckpointMemory(config.dataDir, key);
  const log = new VerifiableLog(pool, eventLog, key, new ProjectionRunner(pool, eventLog, merkleLogConsumer()), memory);
  const { treeSize, dropped, removed, firstDropped } = await log.dropUnprovenLeaves();
  // The first leaf dropped, as its row names it: the event signing stopped at, deleted or changed.
  const first = firstDropped && {
    leafIndex: String(firstDropped.leafIndex),
    position: String(firstDropped.position),
    stream: firstDropped.streamId,
    revision: String(firstDropped.revision),
    eventHash: firstDropped.eventHash,
  };
  print({ treeSize: String(treeSize), dropped: String(dropped), removed, ...(first && { firstDropped: first }) });
}

/**
 * The service's storage, as its configuration names it: the log, a pool on the read models, migrated. A database
 * or EventStoreDB (when `usesTheLog`) that does not answer is waited for as the service waits for it, then told in
 * one line.
 */
async function withStorage<T>(
  config: LedgerConfig,
  usesTheLog: boolean,
  work: (pool: pg.Pool, eventLog: EventLog) => Promise<T>,
): Promise<T> {
  // Warnings on stderr: stdout carries the command's JSON (a created key, a report).
  const retry = connectRetry(
    config.connectRetryMs,
    pino({ level: config.logLevel }, pino.destination({ fd: 2, sync: true })),
  );
  const database = await openDatabase(config, retry);
  let pool: pg.Pool | undefined;
  let eventLog: EventLog | undefined;
  try {
    if (config.eventStoreConnectionString && usesTheLog)
      await waitForEventStore(config.eventStoreConnectionString, retry);
    // Heard: stopping the embedded PostgreSQL as `end` still closes the pool ended the process with a stack after the
    // command's work was done, a created key already printed.
    pool = heardPool({ connectionString: database.connectionString, max: 4 }, () => undefined);
    eventLog = config.eventStoreConnectionString
      ? await openEventStoreLog(config.eventStoreConnectionString, config.databaseBounds.statementTimeoutMs)
      : await createPostgresEventLog({ connectionString: database.connectionString });
    await runMigrations(database.connectionString);
    return await work(pool, eventLog);
  } finally {
    await eventLog?.close();
    await pool?.end();
    if (!database.adopted) await database.stop();
  }
}
