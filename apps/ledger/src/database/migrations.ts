import {
  AppendFunction1763800000150,
  AppendLookupsByKey1763800000340,
  CompactEventLog1763800000250,
  EventLog1763800000001,
} from '#event-log';
import { BlockReadModels1763800000002 } from '../sessions/read-models/1763800000002-block-read-models.migration.js';
import { BranchTrees1763800000003 } from '../sessions/read-models/1763800000003-branch-trees.migration.js';
import { ToolCalls1763800000004 } from '../governance/read-models/1763800000004-tool-calls.migration.js';
import { Identity1763800000005 } from '../identity/1763800000005-identity.migration.js';
import { KeyChangeNotify1763800000280 } from '../identity/1763800000280-key-change-notify.migration.js';
import { VerifiableLog1763800000006 } from '../verifiable-log/1763800000006-verifiable-log.migration.js';
import { CompactMerkleLeaves1763800000310 } from '../verifiable-log/1763800000310-compact-merkle-leaves.migration.js';
import { CheckpointsPerKey1763800000320 } from '../verifiable-log/1763800000320-checkpoints-per-key.migration.js';
import { CheckpointMoved1763800000330 } from '../projections/1763800000330-checkpoint-moved.migration.js';
import { MessageLastSeq1763800000020 } from '../sessions/read-models/1763800000020-message-last-seq.migration.js';
import { ToolCallRequestedPosition1763800000021 } from '../governance/read-models/1763800000021-tool-call-requested-position.migration.js';
import { SessionList1763800000022 } from '../sessions/read-models/1763800000022-session-list.migration.js';
import { TextSearchByWords1763800000300 } from '../sessions/read-models/1763800000300-text-search-by-words.migration.js';
import pg from 'pg';
import { DataSource } from 'typeorm';

/** Every schema change, in order. Read-model migrations join this list beside the event log's. */
export const migrations = [
  EventLog1763800000001,
  BlockReadModels1763800000002,
  BranchTrees1763800000003,
  ToolCalls1763800000004,
  Identity1763800000005,
  VerifiableLog1763800000006,
  MessageLastSeq1763800000020,
  ToolCallRequestedPosition1763800000021,
  SessionList1763800000022,
  AppendFunction1763800000150,
  CompactEventLog1763800000250,
  KeyChangeNotify1763800000280,
  TextSearchByWords1763800000300,
  CompactMerkleLeaves1763800000310,
  CheckpointsPerKey1763800000320,
  CheckpointMoved1763800000330,
  AppendLookupsByKey1763800000340,
];

const MIGRATION_LOCK_KEY = 7_318_201_000;

/**
 * Applies pending migrations. Several instances may start at once against one database, so the
 * run is serialized by an advisory lock: the second one finds nothing left to do.
 */
export async function runMigrations(connectionString: string): Promise<void> {
  const lock = new pg.Client({ connectionString });
  // The lock's connection waits idle while the migrations run: ended by the server then, it emits an error (unheard,
  // a crash with a stack), and the runs are no longer serialized. The run fails once done, saying so.
  let lockLost: Error | undefined;
  lock.on('error', (error) => (lockLost ??= error));
  await lock.connect();
  try {
    await lock.query('SELECT pg_advisory_lock($1)', [MIGRATION_LOCK_KEY]);
    const dataSource = new DataSource({
      type: 'postgres',
      url: connectionString,
      migrations,
      migrationsTransactionMode: 'each',
      logging: false,
    });
    await dataSource.initialize();
    try {
      await dataSource.runMigrations();
    } finally {
      await dataSource.destroy();
    }
    if (lockLost) throw new Error(`the migrations' lock was lost while they ran: ${lockLost.message}`);
  } finally {
    await lock.end();
  }
}
