import { createHash, randomBytes, timingSafeEqual } from 'node:crypto';
import { Inject, Injectable } from '@nestjs/common';
import { NO_STREAM, type EventLog } from '#event-log';
import { nameUuid, tenantStreamId } from '#core';
import type pg from 'pg';
import { PG_POOL } from '../database/database.module.js';
import { EVENT_LOG } from '../event-log/event-log.module.js';
import { ApiError } from '../http/api-error.js';
import { IdentityProviderUnavailableError } from './jwt-verifier.js';
import { AuthenticationError, ROLES, type Principal, type Role } from './principal.js';

/**
 * API keys: `blk_<key id>_<secret>`, 192 random bits of secret. The store keeps a per-key salt and
 * SHA-256(salt ‖ secret), never the secret. Verified keys are cached for at most
 * `KEY_CACHE_MS`, so a revocation reaches every instance within that (each re-reads the row) and
 * ingest pays a map lookup and one hash per request. Creating and revoking a key are events on
 * the stream `credential-<tenant>/<key id>`, recorded with the actor who did it.
 */
export const CREDENTIAL_STREAM_PREFIX = 'credential-';
export const KEY_CACHE_MS = 1_000;
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
export class ApiKeyStore {
  private readonly cache = new Map<string, CachedKey>();
  /** Ids looked up and not found, apart: a flood of invented ids cannot push real keys out of the cache. */
  private readonly unknownIds = new Map<string, number>();
  private readonly lastUsedWritten = new Map<string, number>();

  constructor(
    @Inject(PG_POOL) private readonly pool: pg.Pool,
    @Inject(EVENT_LOG) private readonly eventLog: EventLog,
  ) {}

  /** Creates a key; the returned `key` is the only time the secret exists outside the caller's hands. */
  async create(input: NewKey, createdBy: string): Promise<KeyRecord & { key: string }> {
    const id = randomBytes(10).toString('hex').slice(0, 16);
    const secret = randomBytes(24).toString('base64url');
    const salt = randomBytes(16);
    const { rows } = await this.pool.query<KeyRecord>(
      `INSERT INTO api_keys (id, name, tenant, roles, subject, expires_at, salt, secret_hash, suffix, created_by)
       VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10) RETURNING ${KEY_COLUMNS}`,
      [
        id,
        input.name,
        input.tenant,
        [...input.roles],
        input.subject ?? null,
        input.expiresAt ?? null,
        salt,
        digest(salt, secret),
        secret.slice(-4),
        createdBy,
      ],
    );
    const record = present(rows[0]);
    const { name, tenant, roles, subject, expiresAt } = record;
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
    return { ...record, key: `blk_${id}_${secret}` };
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
    this.cache.delete(id);
    await this.eventLog.append(
      tenantStreamId(CREDENTIAL_STREAM_PREFIX, record.tenant, id),
      [
        {
          id: nameUuid(`credential:${id}:revoked`),
          type: 'credential.revoked',
          data: { keyId: id },
          actor: revokedBy,
          tenant: record.tenant,
        },
      ],
      0n,
    ); // A second revocation repeats the same event id: the log records it once.
    return record;
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

  private async lookup(id: string, now: number): Promise<StoredKey | undefined> {
    const cached = this.cache.get(id);
    if (cached && now - cached.readAt < KEY_CACHE_MS) return cached.key;
    if (now - (this.unknownIds.get(id) ?? -Infinity) < KEY_CACHE_MS) return undefined;
    const { rows } = await this.pool
      .query<KeyRecord & { salt: Buffer; secretHash: Buffer }>(
        `SELECT ${KEY_COLUMNS}, salt, secret_hash AS "secretHash" FROM api_keys WHERE id = $1`,
        [id],
      )
      .catch((error: Error) => {
        // The key may be fine: it cannot be checked now. The guard answers 503, not 401 or 500.
        throw new IdentityProviderUnavailableError(`the key store cannot be read: ${error.message}`);
      });
    const row = rows[0];
    this.cache.delete(id);
    this.unknownIds.delete(id);
    if (!row) {
      remember(this.unknownIds, id, now);
      return undefined;
    }
    const key = { record: present(row), salt: row.salt, hash: row.secretHash, principal: principalOf(present(row)) };
    remember(this.cache, id, { key, readAt: now });
    return key;
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

/** Adds an entry as the newest, dropping the oldest beyond the bound. */
function remember<Value>(map: Map<string, Value>, id: string, value: Value): void {
  map.set(id, value);
  for (const [oldest] of map) {
    if (map.size <= MAX_CACHED_KEYS) break;
    map.delete(oldest);
  }
}

export function principalOf(record: KeyRecord): Principal {
  return {
    tenant: record.tenant,
    roles: new Set(record.roles.filter((role): role is Role => (ROLES as readonly string[]).includes(role))),
    subject: record.subject === null ? `key:${record.id}` : `subject:${record.subject}`,
    actor: `key:${record.id}:${record.name}`,
    credentialId: `key:${record.id}`,
  };
}

function digest(salt: Buffer, secret: string): Buffer {
  return createHash('sha256').update(salt).update(secret).digest();
}

function present(row: KeyRecord): KeyRecord {
  const iso = (value: unknown) =>
    value === null || value === undefined ? null : new Date(value as string).toISOString();
  return {
    id: row.id,
    name: row.name,
    tenant: row.tenant,
    roles: row.roles,
    subject: row.subject,
    expiresAt: iso(row.expiresAt),
    createdBy: row.createdBy,
    createdAt: iso(row.createdAt)!,
    revokedAt: iso(row.revokedAt),
    revokedBy: row.revokedBy,
    lastUsedAt: iso(row.lastUsedAt),
    suffix: row.suffix,
  };
}
