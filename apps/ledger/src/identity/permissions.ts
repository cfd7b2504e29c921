import { ROLES, type Role } from './principal.js';

/**
 * Who may call what: every route the service serves, as Nest declares it, and the roles that
 * may call it (any one suffices). `public` routes answer without a credential and hold no data.
 * The guard refuses a route missing here, and a test walks this table against the live router.
 * Roles do not nest: admin manages credentials and read models but decides no tool call.
 */
export type RouteRule = 'public' | readonly Role[];

const PRODUCER: readonly Role[] = ['producer'];
/** Everyone who reads a tenant's sessions. */
const READERS: readonly Role[] = ['producer', 'reader', 'reviewer', 'auditor'];
const REVIEWERS: readonly Role[] = ['reviewer'];
/** The approval queue and tool-call trails. */
const OVERSIGHT: readonly Role[] = ['reviewer', 'auditor'];
const AUDITORS: readonly Role[] = ['auditor'];
const ADMINS: readonly Role[] = ['admin'];

/**
 * Routes that act on every tenant at once (metrics count them all, a rebuild rebuilds them all):
 * their roles count only on a credential of the default tenant, the operator's. Another tenant's
 * admin would learn how busy the others are, or rebuild their read models.
 */
export const OPERATOR_ROUTES: ReadonlySet<string> = new Set(['GET /metrics', 'POST /v1/admin/rebuild']);

export const PERMISSIONS: Readonly<Record<string, RouteRule>> = {
  'GET /health': 'public',
  // The recording gateway: a model call records into the caller's sessions, as a chunk POST does.
  'POST /gateway/openai/v1/chat/completions': PRODUCER,
  'POST /gateway/openai/v1/responses': PRODUCER,
  'POST /gateway/anthropic/v1/messages': PRODUCER,
  /**
   * The Swagger UI serves the API's description, no data: its page, its scripts and styles, the
   * OpenAPI document as JSON and YAML (Fastify serves these directly; the guard never sees them).
   */
  'GET /docs': 'public',
  'GET /docs/index.html': 'public',
  'GET /docs/swagger-ui-init.js': 'public',
  'GET /docs/*': 'public',
  'GET /docs/openapi.json': 'public',
  'GET /docs-yaml': 'public',
  'GET /metrics': ADMINS,
  /** The reviewer console's built files (the app's page for any other path): no data. */
  'GET /console': 'public',
  'GET /console/*': 'public',
  /** How the console signs people in (the OpenID provider and its public client id, if configured). */
  'GET /v1/console/config': 'public',
  /** Who the credential is: every role may ask. */
  'GET /v1/me': ROLES,

  'POST /v1/sessions': PRODUCER,
  'POST /v1/sessions/:sid/messages': PRODUCER,
  'POST /v1/sessions/:sid/messages/:mid/chunks': PRODUCER,
  'POST /v1/sessions/:sid/messages/:mid/translations': PRODUCER,
  'POST /v1/sessions/:sid/fork': PRODUCER,
  'PUT /v1/sessions/:sid/messages/:mid/selection': PRODUCER,
  'PUT /v1/sessions/:sid/selection': PRODUCER,
  /** The owner grants other producers; an admin may too. */
  'POST /v1/sessions/:sid/writers': ['producer', 'admin'],

  'GET /v1/sessions': READERS,
  'GET /v1/sessions/:sid': READERS,
  'GET /v1/sessions/:sid/tree': READERS,
  'GET /v1/sessions/:sid/history': READERS,
  'GET /v1/sessions/:sid/messages/:mid': READERS,
  'GET /v1/sessions/:sid/live': READERS,

  'GET /v1/sessions/:sid/events': AUDITORS,
  'GET /v1/events/live': AUDITORS,
  'GET /v1/sessions/:sid/verify': AUDITORS,
  'GET /v1/tool-calls/:id/verify': AUDITORS,
  'GET /v1/sessions/:sid/export': AUDITORS,

  /**
   * The transparency log spans every tenant (decision 0017): its checkpoints and proofs are for
   * auditors and witnesses of any tenant, and reveal only hashes and the log's size. The verifier
   * key is a public key.
   */
  'GET /v1/log/key': 'public',
  'GET /v1/log/checkpoint': AUDITORS,
  'GET /v1/log/proof/inclusion': AUDITORS,
  'GET /v1/log/proof/consistency': AUDITORS,

  'GET /v1/tool-calls': OVERSIGHT,
  'GET /v1/tool-calls/:id': OVERSIGHT,
  'POST /v1/tool-calls/:id/approve': REVIEWERS,
  'POST /v1/tool-calls/:id/deny': REVIEWERS,

  'POST /v1/admin/rebuild': ADMINS,
  'POST /v1/admin/keys': ADMINS,
  'GET /v1/admin/keys': ADMINS,
  'DELETE /v1/admin/keys/:id': ADMINS,
};
