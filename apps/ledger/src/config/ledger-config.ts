import path from 'node:path';
import { z } from 'zod';
import { DEFAULT_SESSION_QUOTA, type SessionQuota } from '#core';
import { DEFAULT_CONNECT_TIMEOUT_MS, eventStoreConnectionStringProblem, type DatabaseBounds } from '#event-log';
import { StartupError } from '../database/embedded-postgres.js';
import type { SseOptions } from '../live/sse-stream.js';
import { httpUrl } from './http-url.js';

/**
 * How long a statement of the service may run (decision 0064): past it the server cancels it, and a server that does
 * not answer at all is given up on a moment later. The service's statements are small (pages, batches); a runaway
 * one (a pathological search) or a frozen server must not hold a request, a pooled connection or a consumer for ever.
 */
const DEFAULT_STATEMENT_TIMEOUT_MS = 30_000;

const port = (fallback: number) => z.coerce.number().int().min(0).max(65_535).default(fallback);

const environment = z
  .object({
    PORT: port(3000),
    DATABASE_URL: z.string().url().optional(),
    EVENTSTORE_CONNECTION_STRING: z
      .string()
      .regex(/^esdb(\+discover)?:\/\//, 'must be an esdb:// connection string')
      .superRefine((value, context) => {
        const problem = eventStoreConnectionStringProblem(value);
        if (problem) context.addIssue({ code: 'custom', message: problem });
      })
      .optional(),
    LEDGER_CONNECT_RETRY_MS: z.coerce.number().int().min(0).default(30_000),
    LEDGER_DATABASE_CONNECT_TIMEOUT_MS: z.coerce.number().int().min(100).default(DEFAULT_CONNECT_TIMEOUT_MS),
    LEDGER_DATABASE_STATEMENT_TIMEOUT_MS: z.coerce.number().int().min(100).default(DEFAULT_STATEMENT_TIMEOUT_MS),
    LEDGER_DATA_DIR: z.string().min(1).default('.data'),
    LEDGER_PG_PORT: port(54_329),
    LEDGER_MAX_BODY_BYTES: z.coerce.number().int().min(1_024).default(1_048_576),
    LEDGER_SESSION_MAX_EVENTS: z.coerce.number().int().min(1).default(DEFAULT_SESSION_QUOTA.events),
    LEDGER_SESSION_MAX_BYTES: z.coerce.number().int().min(1_024).default(DEFAULT_SESSION_QUOTA.bytes),
    LEDGER_SESSION_MAX_MEMORY: z.coerce.number().int().min(1_048_576).default(DEFAULT_SESSION_QUOTA.memory),
    LEDGER_SESSION_MAX_MESSAGES: z.coerce.number().int().min(1).default(DEFAULT_SESSION_QUOTA.messages),
    LEDGER_SESSION_MAX_FORK_DEPTH: z.coerce.number().int().min(0).default(DEFAULT_SESSION_QUOTA.forkDepth),
    LEDGER_LIVE_COALESCE_MS: z.coerce.number().int().min(0).max(10_000).default(50),
    LEDGER_LIVE_WRITES_PER_SECOND: z.coerce.number().int().min(1).default(2_000),
    LEDGER_LIVE_HEARTBEAT_MS: z.coerce.number().int().min(100).default(15_000),
    LEDGER_LIVE_MAX_BUFFERED_BYTES: z.coerce.number().int().min(1_024).default(1_048_576),
    LEDGER_MCP_SERVERS: z.string().min(1).optional(),
    LEDGER_FIREWALL_POLICY: z.string().min(1).optional(),
    LEDGER_UPSTREAMS: z.string().min(1).optional(),
    LEDGER_GATEWAY_UPSTREAM_TIMEOUT_MS: z.coerce.number().int().min(100).default(60_000),
    LEDGER_GATEWAY_ON_LOG_FAILURE: z.enum(['refuse', 'pass']).default('refuse'),
    LEDGER_GATEWAY_MAX_REQUEST_BYTES: z.coerce.number().int().min(1_024).default(33_554_432),
    LEDGER_GATEWAY_MAX_RESPONSE_BYTES: z.coerce.number().int().min(1_024).default(33_554_432),
    LEDGER_GATEWAY_RECORD_WAIT_MS: z.coerce.number().int().min(0).default(5_000),
    LEDGER_GATEWAY_RECORD_BATCH_MS: z.coerce.number().int().min(0).max(10_000).default(50),
    LEDGER_GUARDIAN_MODE: z.enum(['off', 'monitor', 'enforce']).default('enforce'),
    LEDGER_GUARDIAN_BASE_URL: z.string().url().optional(),
    LEDGER_GUARDIAN_API_KEY: z.string().min(1).optional(),
    LEDGER_GUARDIAN_MODEL: z.string().min(1).default('gpt-4o-mini'),
    LEDGER_GUARDIAN_TIMEOUT_MS: z.coerce.number().int().min(100).default(20_000),
    LEDGER_GUARDIAN_ON_FAILURE: z.enum(['ask', 'deny', 'allow']).default('ask'),
    LEDGER_APPROVAL_TIMEOUT_MS: z.coerce.number().int().min(1_000).default(900_000),
    LEDGER_MCP_CALL_TIMEOUT_MS: z.coerce.number().int().min(100).default(60_000),
    LEDGER_RATE_LIMIT: z.coerce.number().int().min(1).default(20_000),
    LEDGER_RATE_LIMIT_WINDOW_MS: z.coerce.number().int().min(100).default(10_000),
    LEDGER_LIVE_MAX_PER_CREDENTIAL: z.coerce.number().int().min(1).default(100),
    LEDGER_LIVE_MAX_PER_TENANT: z.coerce.number().int().min(1).default(200),
    LEDGER_OIDC_ISSUER: httpUrl.optional(),
    LEDGER_OIDC_AUDIENCE: z.string().min(1).optional(),
    LEDGER_OIDC_JWKS_URL: httpUrl.optional(),
    LEDGER_OIDC_TENANT_CLAIM: z.string().min(1).default('tenant'),
    LEDGER_OIDC_ROLES_CLAIM: z.string().min(1).default('roles'),
    LEDGER_OIDC_CLOCK_SKEW_S: z.coerce.number().int().min(0).max(300).default(30),
    LEDGER_OIDC_JWKS_COOLDOWN_MS: z.coerce.number().int().min(0).default(5_000),
    LEDGER_OIDC_JWKS_MAX_AGE_MS: z.coerce.number().int().min(0).default(600_000),
    LEDGER_CONSOLE_DIR: z.string().min(1).default('dist/console'),
    LEDGER_CONSOLE_OIDC_CLIENT_ID: z
      .string()
      .regex(/^[\w.:@-]{1,200}$/, 'letters, digits and . _ : @ -, at most 200')
      .optional(),
    LEDGER_SIGNING_KEY: z.string().min(1).optional(),
    LEDGER_LOG_ORIGIN: z
      .string()
      .regex(/^[^\s+]+$/, 'must hold no spaces and no "+"')
      // Each note holds it twice, and the signer's memory of a note is at most 64 KiB.
      .max(1_024)
      .optional(),
    LEDGER_CHECKPOINT_INTERVAL_MS: z.coerce.number().int().min(100).default(5_000),
    LOG_LEVEL: z.enum(['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent']).default('info'),
    LEDGER_HTTP_HEADERS_TIMEOUT_MS: z.coerce.number().int().min(100).default(10_000),
    LEDGER_HTTP_REQUEST_TIMEOUT_MS: z.coerce.number().int().min(100).default(30_000),
    LEDGER_HTTP_KEEP_ALIVE_TIMEOUT_MS: z.coerce.number().int().min(100).default(5_000),
    LEDGER_HTTP_MAX_CONNECTIONS: z.coerce.number().int().min(1).default(1_000),
  })
  .refine((values) => values.LEDGER_HTTP_HEADERS_TIMEOUT_MS <= values.LEDGER_HTTP_REQUEST_TIMEOUT_MS, {
    path: ['LEDGER_HTTP_HEADERS_TIMEOUT_MS'],
    message: 'must not exceed LEDGER_HTTP_REQUEST_TIMEOUT_MS',
  });

export interface LedgerConfig {
  readonly port: number;
  /** Set: use that PostgreSQL. Unset: start the embedded one under `dataDir`. */
  readonly databaseUrl: string | undefined;
  /** Set: the event log lives in EventStoreDB; PostgreSQL then holds only read models. */
  readonly eventStoreConnectionString: string | undefined;
  /** At startup, how long the first connection to `DATABASE_URL` and to EventStoreDB is retried. */
  readonly connectRetryMs: number;
  /**
   * Once running, how long opening a PostgreSQL connection (or waiting for a pooled one) and a statement may take;
   * past either, 503.
   */
  readonly databaseBounds: Required<DatabaseBounds>;
  readonly dataDir: string;
  readonly embeddedPostgresPort: number;
  /** Largest request body accepted; larger ones get 413. */
  readonly maxBodyBytes: number;
  /** How much one session may hold; past it appends get 409 `session_full` (decision 0037). */
  readonly sessionQuota: SessionQuota;
  /** Live feeds (SSE): coalescing window, heartbeat interval, and how much a client may leave untaken before it is cut off. */
  readonly live: SseOptions;
  readonly governance: GovernanceConfig;
  readonly gateway: GatewayConfig;
  readonly identity: IdentityConfig;
  /** Set: bearer JWTs from this OpenID provider are accepted as credentials. */
  readonly oidc: OidcConfig | undefined;
  readonly console: ConsoleConfig;
  readonly http: HttpServerLimits;
  readonly verifiableLog: VerifiableLogConfig;
  readonly logLevel: z.infer<typeof environment>['LOG_LEVEL'];
}

/** What one client can hold of the HTTP server (slow senders, idle and excess connections). */
export interface HttpServerLimits {
  /** Receiving the request headers; past it the client gets 408 and is disconnected. */
  readonly headersTimeoutMs: number;
  /** Receiving the whole request, body included (not sending the response: live feeds stay open). */
  readonly requestTimeoutMs: number;
  /** How long an idle keep-alive connection stays open. */
  readonly keepAliveTimeoutMs: number;
  /** Open connections at once (live feeds count); at the cap a newcomer closes the longest idle one (decision 0029). */
  readonly maxConnections: number;
}

/** The signed Merkle log over every event (decision 0017). */
export interface VerifiableLogConfig {
  /** An Ed25519 private key (PKCS #8 PEM). Unset: generated into the data folder on the first start. */
  readonly signingKeyFile: string | undefined;
  /** The checkpoints' origin line and key name. Unset: `block-ledger/<key fingerprint>`. */
  readonly origin: string | undefined;
  /** While the log grows, a checkpoint is signed at least this often. */
  readonly checkpointIntervalMs: number;
}

/** Tool-call governance. Without `mcpServersFile` the ledger executes no tools and governs none. */
export interface GovernanceConfig {
  /** An `mcpServers` JSON file (Claude Desktop / Cherry Studio format): the servers whose tools the ledger governs and executes. */
  readonly mcpServersFile: string | undefined;
  /** A firewall policy (JSON or YAML); without one every call asks a person. */
  readonly firewallPolicyFile: string | undefined;
  readonly guardian: {
    readonly mode: 'off' | 'monitor' | 'enforce';
    readonly endpoint: { readonly baseUrl: string; readonly apiKey: string; readonly model: string } | undefined;
    readonly timeoutMs: number;
    /** What a failed review (error, timeout, malformed answer) leads to in enforce mode. */
    readonly onFailure: 'ask' | 'deny' | 'allow';
  };
  /** How long a call waits for a person before it expires (and counts as denied). */
  readonly approvalTimeoutMs: number;
  readonly mcpCallTimeoutMs: number;
}

/** The recording gateway. Without `upstreamsFile` it has no provider to call. */
export interface GatewayConfig {
  /** The `LEDGER_UPSTREAMS` file (JSON or YAML): the providers, their models and keys. */
  readonly upstreamsFile: string | undefined;
  /** Time allowed from sending a request upstream to its response headers; past it the next key is tried. */
  readonly upstreamTimeoutMs: number;
  /** When the log cannot take a request as it arrives: refuse it (503) before calling upstream, or pass it on. */
  readonly onLogFailure: 'refuse' | 'pass';
  /** A model call's request body, and a whole (non-streaming) answer, at most. */
  readonly maxRequestBytes: number;
  readonly maxResponseBytes: number;
  /** How long the end of an answer waits for its record before the client's response ends anyway. */
  readonly recordWaitMs: number;
  /** An answer's events are appended at most once per this many milliseconds while it streams. */
  readonly recordBatchMs: number;
}

/** Abuse limits per credential. */
export interface IdentityConfig {
  /** At most `limit` requests per `windowMs` per credential; more get 429 with Retry-After. */
  readonly rateLimit: { readonly limit: number; readonly windowMs: number };
  /** Open live (SSE) connections per credential; one more gets 429. */
  readonly liveConnectionsPerCredential: number;
  /** Open live connections per tenant, all its credentials together: one tenant cannot take every connection slot. */
  readonly liveConnectionsPerTenant: number;
}

/** The reviewer console served at `/console` (decision 0023). */
export interface ConsoleConfig {
  /** The console's build output (`npm run build` writes `dist/console`). */
  readonly folder: string;
  /** Set (with OIDC configured): the console signs people in at the provider, as this public client, with PKCE. */
  readonly oidcClientId: string | undefined;
}

/** An OpenID provider whose tokens are credentials; see docs/identity-oidc.md. */
export interface OidcConfig {
  /** Must equal the tokens' `iss` and the discovery document's `issuer`, character for character. */
  readonly issuer: string;
  readonly audience: string;
  /** Unset: found through `<issuer>/.well-known/openid-configuration`. */
  readonly jwksUrl: string | undefined;
  /** Claim names, looked up as written first, then as a dotted path (`realm_access.roles`). */
  readonly tenantClaim: string;
  readonly rolesClaim: string;
  readonly clockSkewSeconds: number;
  /** An unknown `kid` refetches the key set at most this often (a key rotated in waits at most this long). */
  readonly jwksCooldownMs: number;
  /** Keys are refetched after this long (a key the provider dropped still verifies until then). */
  readonly jwksMaxAgeMs: number;
}

export const LEDGER_CONFIG = Symbol('LEDGER_CONFIG');

/** Reads the environment once at startup; a bad value stops the service with the variable's name. */
export function loadConfig(env: NodeJS.ProcessEnv): LedgerConfig {
  const parsed = environment.safeParse(env);
  if (!parsed.success) {
    const issue = parsed.error.issues[0];
    throw new StartupError(`environment variable ${issue.path.join('.')} is invalid: ${issue.message}`);
  }
  const values = parsed.data;
  return {
    port: values.PORT,
    databaseUrl: values.DATABASE_URL,
    eventStoreConnectionString: values.EVENTSTORE_CONNECTION_STRING,
    connectRetryMs: values.LEDGER_CONNECT_RETRY_MS,
    databaseBounds: {
      connectTimeoutMs: values.LEDGER_DATABASE_CONNECT_TIMEOUT_MS,
      statementTimeoutMs: values.LEDGER_DATABASE_STATEMENT_TIMEOUT_MS,
    },
    dataDir: path.resolve(values.LEDGER_DATA_DIR),
    embeddedPostgresPort: values.LEDGER_PG_PORT,
    maxBodyBytes: values.LEDGER_MAX_BODY_BYTES,
    sessionQuota: {
      events: values.LEDGER_SESSION_MAX_EVENTS,
      bytes: values.LEDGER_SESSION_MAX_BYTES,
      memory: values.LEDGER_SESSION_MAX_MEMORY,
      messages: values.LEDGER_SESSION_MAX_MESSAGES,
      forkDepth: values.LEDGER_SESSION_MAX_FORK_DEPTH,
    },
    live: {
      coalesceMs: values.LEDGER_LIVE_COALESCE_MS,
      writesPerSecond: values.LEDGER_LIVE_WRITES_PER_SECOND,
      heartbeatMs: values.LEDGER_LIVE_HEARTBEAT_MS,
      maxBufferedBytes: values.LEDGER_LIVE_MAX_BUFFERED_BYTES,
    },
    governance: {
      mcpServersFile: values.LEDGER_MCP_SERVERS && path.resolve(values.LEDGER_MCP_SERVERS),
      firewallPolicyFile: values.LEDGER_FIREWALL_POLICY && path.resolve(values.LEDGER_FIREWALL_POLICY),
      guardian: {
        mode: values.LEDGER_GUARDIAN_MODE,
        endpoint: values.LEDGER_GUARDIAN_BASE_URL
          ? {
              baseUrl: values.LEDGER_GUARDIAN_BASE_URL,
              apiKey: values.LEDGER_GUARDIAN_API_KEY ?? 'none',
              model: values.LEDGER_GUARDIAN_MODEL,
            }
          : undefined,
        timeoutMs: values.LEDGER_GUARDIAN_TIMEOUT_MS,
        onFailure: values.LEDGER_GUARDIAN_ON_FAILURE,
      },
      approvalTimeoutMs: values.LEDGER_APPROVAL_TIMEOUT_MS,
      mcpCallTimeoutMs: values.LEDGER_MCP_CALL_TIMEOUT_MS,
    },
    gateway: {
      upstreamsFile: values.LEDGER_UPSTREAMS && path.resolve(values.LEDGER_UPSTREAMS),
      upstreamTimeoutMs: values.LEDGER_GATEWAY_UPSTREAM_TIMEOUT_MS,
      onLogFailure: values.LEDGER_GATEWAY_ON_LOG_FAILURE,
      maxRequestBytes: values.LEDGER_GATEWAY_MAX_REQUEST_BYTES,
      maxResponseBytes: values.LEDGER_GATEWAY_MAX_RESPONSE_BYTES,
      recordWaitMs: values.LEDGER_GATEWAY_RECORD_WAIT_MS,
      recordBatchMs: values.LEDGER_GATEWAY_RECORD_BATCH_MS,
    },
    identity: {
      rateLimit: { limit: values.LEDGER_RATE_LIMIT, windowMs: values.LEDGER_RATE_LIMIT_WINDOW_MS },
      liveConnectionsPerCredential: values.LEDGER_LIVE_MAX_PER_CREDENTIAL,
      liveConnectionsPerTenant: values.LEDGER_LIVE_MAX_PER_TENANT,
    },
    oidc: oidcConfig(values),
    console: consoleConfig(values),
    http: {
      headersTimeoutMs: values.LEDGER_HTTP_HEADERS_TIMEOUT_MS,
      requestTimeoutMs: values.LEDGER_HTTP_REQUEST_TIMEOUT_MS,
      keepAliveTimeoutMs: values.LEDGER_HTTP_KEEP_ALIVE_TIMEOUT_MS,
      maxConnections: values.LEDGER_HTTP_MAX_CONNECTIONS,
    },
    verifiableLog: {
      signingKeyFile: values.LEDGER_SIGNING_KEY && path.resolve(values.LEDGER_SIGNING_KEY),
      origin: values.LEDGER_LOG_ORIGIN,
      checkpointIntervalMs: values.LEDGER_CHECKPOINT_INTERVAL_MS,
    },
    logLevel: values.LOG_LEVEL,
  };
}

function consoleConfig(values: z.infer<typeof environment>): ConsoleConfig {
  if (values.LEDGER_CONSOLE_OIDC_CLIENT_ID && !values.LEDGER_OIDC_ISSUER) {
    throw new StartupError(
      'environment variable LEDGER_OIDC_ISSUER is required when LEDGER_CONSOLE_OIDC_CLIENT_ID is set',
    );
  }
  return { folder: path.resolve(values.LEDGER_CONSOLE_DIR), oidcClientId: values.LEDGER_CONSOLE_OIDC_CLIENT_ID };
}

function oidcConfig(values: z.infer<typeof environment>): OidcConfig | undefined {
  const issuer = values.LEDGER_OIDC_ISSUER;
  const audience = values.LEDGER_OIDC_AUDIENCE;
  if (!issuer !== !audience) {
    const missing = issuer ? 'LEDGER_OIDC_AUDIENCE' : 'LEDGER_OIDC_ISSUER';
    throw new StartupError(
      `environment variable ${missing} is required: OIDC needs both LEDGER_OIDC_ISSUER and LEDGER_OIDC_AUDIENCE`,
    );
  }
  if (!issuer || !audience) {
    if (values.LEDGER_OIDC_JWKS_URL) {
      throw new StartupError('environment variable LEDGER_OIDC_ISSUER is required when LEDGER_OIDC_JWKS_URL is set');
    }
    return undefined;
  }
  return {
    issuer,
    audience,
    jwksUrl: values.LEDGER_OIDC_JWKS_URL,
    tenantClaim: values.LEDGER_OIDC_TENANT_CLAIM,
    rolesClaim: values.LEDGER_OIDC_ROLES_CLAIM,
    clockSkewSeconds: values.LEDGER_OIDC_CLOCK_SKEW_S,
    jwksCooldownMs: values.LEDGER_OIDC_JWKS_COOLDOWN_MS,
    jwksMaxAgeMs: values.LEDGER_OIDC_JWKS_MAX_AGE_MS,
  };
}
