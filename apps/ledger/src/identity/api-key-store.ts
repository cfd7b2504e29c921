import { createHash, randomBytes, timingSafeEqual } from 'node:crypto';
import { Inject, Injectable, type OnModuleDestroy, type OnModuleInit } from '@nestjs/common';
import { databaseFailure, NO_STREAM, type EventLog } from '#event-log';
import { nameUuid, rememberNewest, tenantStreamId } from '#core';
import type pg from 'pg';
import { PG_POOL } from '../database/pg-pool-token.js';
import { EVENT_LOG } from '../event-log/event-log-token.js';
import { ApiError, RetryLater } from '../http/api-error.js';
import { IdentityProviderUnavailableError } from './identity-provider-error.js';
import { KeyChangeListener } from './key-change-listener.js';
import { AuthenticationError, ROLES, type Principal, type Role } from './principal.js';

/**
 * API keys: `blk_<key id>_<secret>`, 192 random bits of secret. The store keeps a per-key salt and
 * SHA-256(salt ‖ secret), never the secret. Creating and revoking a key are events on the stream
 * `credential-<tenant>/<key id>`, recorded with the actor who did it.
 *
 * Verified keys are cached (decision 0028), so ingest pays a map lookup and one hash per request.
 * Every change to a key row notifies `api_key_changed` on commit (a trigger), and each store
 * listens and drops the key at once: a revocation on any instance reaches the others within a
 * notification's delivery. Notifications are not relied on alone: an entry is re-read after
 * `KEY_CACHE_MS` at most, and after `UNHEARD_KEY_CACHE_MS` while the store is not listening
 * (starting, its connection lost, or run without the Nest lifecycle, as the CLI does).
 */
export const CREDENTIAL_STREAM_PREFIX = 'credential-';
export const KEY_CACHE_MS = 10_000;
export const UNHEARD_KEY_CACHE_MS = 1_000;
const LAST_USED_WRITE_INTERVAL_MS = 60_000;
const MAX_CACHED_KEYS = 10_000;
const KEY_PATTERN = /^blk_([a-z0-9]{16})_([A-Za-z0-9_-]{32})$/;

export interface KeyRecord {
  readonly id: string;
  readonly name: string;
  readonly tenant: string;
  readonly roles: readonly Role[];
  readonly subject: string | null;
  readonly expiresAt: string | null;
  readonly createdBy: string;
  readonly createdAt: string;
  readonly revokedAt: string | null;
  readonly revokedBy: string | null;
  readonly lastUsedAt: string | null;
  /** The last characters of the secret, so a person can tell keys apart. */
  readonly suffix: string;
}

export interface NewKey {
  readonly name: string;
  readonly tenant: string;
  readonly roles: readonly Role[];
  readonly subject?: string | null;
  readonly expiresAt?: string | null;
}

interface StoredKey {
  readonly record: KeyRecord;
  readonly salt: Buffer;
  readonly hash: Buffer;
  readonly principal: Principal;
}

interface CachedKey {
  readonly key: StoredKey;
  readonly readAt: number;
}

const KEY_COLUMNS = `id, name, tenant, roles, subject, expires_at AS "expiresAt", created_by AS "createdBy", created_at AS "createdAt",
  revoked_at AS "revokedAt", revoked_by AS "revokedBy", last_used_at AS "lastUsedAt", suffix`;

@Injectable()
export class ApiKeyStore implements OnModuleInit, OnModuleDestroy {
  private readonly cache = new Map<string, CachedKey>();
  /** One read per key at a time: requests that find the entry stale share it. */
  private readonly reads = new Map<string, Promise<StoredKey | undefined>>();
  /** Moves on every change heard and every gap: a read that spans one is not cached. */
  private changes = 0;
  private readonly listener: KeyChangeListener;
  /** Ids looked up and not found, apart: a flood of invented ids cannot push real keys out of the cache. */
  private readonly unknownIds = new Map<string, number>();
  private readonly lastUsedWritten = new Map<string, number>();
  /** Told of every key whose row may have changed: its id, or undefined for any key (changes went unheard). */
  private readonly changeListeners = new Set<(keyId: string | undefined) => void>();

  constructor(
    @Inject(PG_POOL) private readonly pool: pg.Pool,
    @Inject(EVENT_LOG) private readonly eventLog: EventLog,
  ) {
    this.listener = new KeyChangeListener(
      pool.options,
      (id) => this.forget(id),
      () => this.forgetAll(),
    );
  }

  async onModuleInit(): Promise<void> {
    await this.listener.start();
  }

  async onModuleDestroy(): Promise<void> {
    await this.listener.close();
  }

  /** Calls `listener` after each key the store forgets (see `changeListeners`); the returned function stops it. */
  onKeyChange(listener: (keyId: string | undefined) => void): () => void {
    this.changeListeners.add(listener);
    return () => this.changeListeners.delete(listener);
  }

  /** Creates a key; the returned `key` is the only time the secret exists outside the caller's hands. */
  async create(input: NewKey, createdBy: string): Promise<KeyRecord & { key: string }> {
    const id = randomBytes(10).toString('hex').slice(0, 16);
    const secret = randomBytes(24).toString('base64url');
    const salt = randomBytes(16);
    const { name, tenant } = input;
    const roles = [...input.roles];
    const subject = input.subject ?? null;
    const expiresAt = isoTime(input.expiresAt);
    // Recorded first: no key works before its record is in the log. A row then not written leaves the record of a
    // key that never worked, closed by a revocation when one can be recorded (its secret was never shown).
    await this.eventLog.append(
      tenantStreamId(CREDENTIAL_STREAM_PREFIX, tenant, id),
      [
        {
          id: nameUuid(`credential:${id}:created`),
          type: 'credential.created',
          data: { keyId: id, name, roles, subject, expiresAt },
          actor: createdBy,
          tenant,
        },
      ],
      NO_STREAM,
    );
    const { rows } = await this.pool
      .query<KeyRecord>(
        `INSERT INTO api_keys (id, name, tenant, roles, subject, expires_at, salt, secret_hash, suffix, created_by)
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10) RETURNING ${KEY_COLUMNS}`,
        [id, name, tenant, roles, subject, expiresAt, salt, digest(salt, secret), secret.slice(-4), createdBy],
      )
      .catch(async (error: unknown) => {
        // A row the insert stored before its connection broke is revoked too; the caller never saw its secret.
        await this.pool
          .query('UPDATE api_keys SET revoked_at = now(), revoked_by = $2 WHERE id = $1', [id, createdBy])
          .catch(() => undefined);
        const revoked = await this.recordRevocation(id, tenant, createdBy).then(
          () => true,
          () => false,
        );
        if (!databaseFailure(error)) throw error;
        throw new RetryLater(
          'key_not_stored',
          `the key's creation was recorded, but the key could not be stored, so it never worked; ${
            revoked ? 'its record is revoked' : 'its revocation could not be recorded yet'
          }: create another`,
        );
      });
    return { ...present(rows[0]), key: `blk_${id}_${secret}` };
  }

  /** Keys of a tenant (every tenant's when `tenant` is undefined), newest first, without secrets. */
  async list(tenant: string | undefined): Promise<KeyRecord[]> {
    const { rows } = await this.pool.query<KeyRecord>(
      `SELECT ${KEY_COLUMNS} FROM api_keys WHERE ($1::text IS NULL OR tenant = $1) ORDER BY created_at DESC, id`,
      [tenant ?? null],
    );
    return rows.map(present);
  }

  /** Revokes a key of the tenant (any tenant's when `tenant` is undefined); another tenant's key is not found. */
  async revoke(id: string, tenant: string | undefined, revokedBy: string): Promise<KeyRecord> {
    const { rows } = await this.pool.query<KeyRecord>(
      `UPDATE api_keys SET revoked_at = coalesce(revoked_at, now()), revoked_by = coalesce(revoked_by, $3)
       WHERE id = $1 AND ($2::text IS NULL OR tenant = $2) RETURNING ${KEY_COLUMNS}`,
      [id, tenant ?? null, revokedBy],
    );
    if (rows.length === 0) throw new ApiError(404, 'key_not_found', 'no such key');
    const record = present(rows[0]);
    this.forget(id);
    await this.recordRevocation(id, record.tenant, revokedBy).catch((error: unknown) => {
      if (!databaseFailure(error)) throw error;
      throw new RetryLater(
        'revocation_unrecorded',
        'the key is revoked, but the log could not record it now: revoke it again to record it',
      );
    });
    return record;
  }

  /** Records a key's revocation; a second one repeats the same event id, which the log records once. */
  private recordRevocation(id: string, tenant: string, revokedBy: string): Promise<unknown> {
    return this.eventLog.append(
      tenantStreamId(CREDENTIAL_STREAM_PREFIX, tenant, id),
      [
        {
          id: nameUuid(`credential:${id}:revoked`),
          type: 'credential.revoked',
          data: { keyId: id },
          actor: revokedBy,
          tenant,
        },
      ],
      0n,
    );
  }

  /**
   * The subject behind an actor recorded on an event: a key's subject (or the key itself), a
   * token's subject as it is. Separation of duties compares these.
   */
  async subjectOfActor(actor: string): Promise<string> {
    const keyId = /^key:([a-z0-9]{16}):/.exec(actor)?.[1];
    if (keyId === undefined) return actor;
    const key = await this.lookup(keyId, Date.now());
    return key ? key.principal.subject : `key:${keyId}`;
  }

  async count(): Promise<number> {
    const { rows } = await this.pool.query<{ count: string }>('SELECT count(*) FROM api_keys');
    return Number(rows[0].count);
  }

  /** The principal of a presented key, or an AuthenticationError saying why not. */
  async verify(presented: string, now = Date.now()): Promise<Principal> {
    const match = KEY_PATTERN.exec(presented);
    if (!match) throw new AuthenticationError('malformed', 'not an API key');
    const [, id, secret] = match as unknown as [string, string, string];
    const key = await this.lookup(id, now);
    if (!key || !timingSafeEqual(key.hash, digest(key.salt, secret)))
      throw new AuthenticationError('unknown', 'unknown key');
    if (key.record.revokedAt !== null) throw new AuthenticationError('revoked', 'revoked key');
    if (key.record.expiresAt !== null && Date.parse(key.record.expiresAt) <= now)
      throw new AuthenticationError('expired', 'expired key');
    this.touch(id, now);
    return key.principal;
  }

  private lookup(id: string, now: number): Promise<StoredKey | undefined> {
    const cached = this.cache.get(id);
    const maxAge = this.listener.listening ? KEY_CACHE_MS : UNHEARD_KEY_CACHE_MS;
    if (cached && now - cached.readAt < maxAge) return Promise.resolve(cached.key);
    if (now - (this.unknownIds.get(id) ?? -Infinity) < UNHEARD_KEY_CACHE_MS) return Promise.resolve(undefined);
    let reading = this.reads.get(id);
    if (!reading) {
      reading = this.read(id, now).finally(() => {
        if (this.reads.get(id) === reading) this.reads.delete(id);
      });
      this.reads.set(id, reading);
    }
    return reading;
  }

  private async read(id: string, now: number): Promise<StoredKey | undefined> {
    const changesBefore = this.changes;
    const { rows } = await this.pool
      .query<KeyRecord & { salt: Buffer; secretHash: Buffer }>(
        `SELECT ${KEY_COLUMNS}, salt, secret_hash AS "secretHash" FROM api_keys WHERE id = $1`,
        [id],
      )
      .catch((error: Error) => {
        // The key may be fine: it cannot be checked now. The guard answers 503, not 401 or 500; an unreachable
        // database is said to be one (with when to retry).
        if (databaseFailure(error)) throw error;
        throw new IdentityProviderUnavailableError(`the key store cannot be read: ${error.message}`);
      });
    const row = rows[0];
    const key = row && {
      record: present(row),
      salt: row.salt,
      hash: row.secretHash,
      principal: principalOf(present(row)),
    };
    // A change heard while reading may have come after the row was read: answer with it, keep nothing.
    if (this.changes !== changesBefore) return key;
    this.cache.delete(id);
    this.unknownIds.delete(id);
    if (key) rememberNewest(this.cache, id, { key, readAt: now }, MAX_CACHED_KEYS);
    else rememberNewest(this.unknownIds, id, now, MAX_CACHED_KEYS);
    return key;
  }

  /** A key's row changed (here or on another instance): the next request reads it again. */
  private forget(id: string): void {
    this.changes += 1;
    this.cache.delete(id);
    this.unknownIds.delete(id);
    this.reads.delete(id);
    for (const listener of this.changeListeners) listener(id);
  }

  /** Changes may have gone unheard: every key is read again. */
  private forgetAll(): void {
    this.changes += 1;
    this.cache.clear();
    this.unknownIds.clear();
    this.reads.clear();
    for (const listener of this.changeListeners) listener(undefined);
  }

  /** `lastUsedAt` is written at most once a minute per key and instance, off the request's path. */
  private touch(id: string, now: number): void {
    if (now - (this.lastUsedWritten.get(id) ?? 0) < LAST_USED_WRITE_INTERVAL_MS) return;
    this.lastUsedWritten.set(id, now);
    this.pool
      .query('UPDATE api_keys SET last_used_at = now() WHERE id = $1', [id])
      .catch(() => this.lastUsedWritten.delete(id));
  }
}

export function principalOf(record: KeyRecord): Principal {
  return {
    tenant: record.tenant,
    roles: new Set(record.roles.filter((role): role is Role => (ROLES as readonly string[]).includes(role))),
    subject: subjectOfKey(record),
    actor: `key:${record.id}:${record.name}`,
    credentialId: `key:${record.id}`,
    ...(record.expiresAt !== null && { expiresAt: Date.parse(record.expiresAt) }),
  };
}

/** A key without a subject is its own; a token subject (`jwt:<issuer>#<sub>`) is kept as tokens carry it. */
function subjectOfKey({ id, subject }: KeyRecord): string {
  if (subject === null) return `key:${id}`;
  return subject.startsWith('jwt:') ? subject : `subject:${subject}`;
}

function digest(salt: Buffer, secret: string): Buffer {
  return createHash('sha256').update(salt).update(secret).digest();
}

/** A time as the table gives it back (an ISO string in UTC, to the millisecond); null for none. */
const isoTime = (value: unknown): string | null =>
  value === null || value === undefined ? null : new Date(value as string).toISOString();

function present(row: KeyRecord): KeyRecord {
  return {
    id: row.id,
    name: row.name,
    tenant: row.tenant,
    roles: row.roles,
    subject: row.subject,
    expiresAt: isoTime(row.expiresAt),
    createdBy: row.createdBy,
    createdAt: isoTime(row.createdAt)!,
    revokedAt: isoTime(row.revokedAt),
    revokedBy: row.revokedBy,
    lastUsedAt: isoTime(row.lastUsedAt),
    suffix: row.suffix,
  };
}
