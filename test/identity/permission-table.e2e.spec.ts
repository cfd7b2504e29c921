import path from 'node:path';
import { governedToolCallId } from '#core';
import { OPERATOR_ROUTES, PERMISSIONS } from '../../apps/ledger/src/identity/permissions.js';
import { ROLES, type Role } from '../../apps/ledger/src/identity/principal.js';
import { governanceFixture, type GovernanceFixture } from '../support/governance-fixture.js';
import { declaredRoutes } from '../../apps/ledger/src/ledger-app.js';
import { startLedger, type LedgerUnderTest } from '../support/ledger-http.js';
import { eventually, probe, type Probed } from '../support/probe.js';

/**
 * The permission table, walked against the live router: every declared route must be in the
 * table and every table entry must be a route; then every route is called by every role on its
 * own tenant's resource and on another tenant's, and with no, a malformed, a revoked and an
 * expired credential, and each answer's status is what the table says.
 */
const OWN = 'acme';
const OTHER = 'globex';
const UNAUTHENTICATED = ['no credential', 'malformed', 'revoked', 'expired'] as const;
type Unauthenticated = (typeof UNAUTHENTICATED)[number];

/** What one tenant holds for the matrix to call on. */
interface TenantResources {
  readonly sessionId: string;
  readonly toolCallId: string;
  readonly argumentsSha256: string;
  /** A key of the tenant that an admin may revoke. */
  readonly spareKeyId: string;
}

/**
 * How to call a route successfully on its own tenant's resources, and what it then answers.
 * `:sid`, `:mid` and `:id` are filled from the tenant's resources; a 4xx here says why.
 */
interface Example {
  readonly query?: string;
  readonly body?: unknown;
  /** The message for `:mid` (default `u1`, the root user message). */
  readonly mid?: string;
  readonly status: number;
}

/** The refusal's code: ours, OpenAI's (`error.code`), or read off Anthropic's error type, which is all its shape has. */
const ANTHROPIC_REFUSALS: Record<string, string> = {
  authentication_error: 'unauthenticated',
  permission_error: 'forbidden',
};
const errorCodeOf = (body: any): string | undefined =>
  body?.type === 'error' ? ANTHROPIC_REFUSALS[body.error?.type] : body?.error?.code;

const SWAGGER_UI = { status: 200 };
const EXAMPLES: Readonly<Record<string, (own: TenantResources) => Example>> = {
  'GET /health': () => ({ status: 200 }),
  'GET /docs': () => SWAGGER_UI,
  'GET /docs/index.html': () => SWAGGER_UI,
  'GET /docs/swagger-ui-init.js': () => SWAGGER_UI,
  // The Swagger UI's files: `*` names none of them.
  'GET /docs/*': () => ({ status: 404 }),
  'GET /docs/openapi.json': () => SWAGGER_UI,
  'GET /docs-yaml': () => SWAGGER_UI,
  'GET /metrics': () => ({ status: 200 }),
  'GET /console': () => ({ status: 200 }),
  // Any path under /console that names no built file is the console's page.
  'GET /console/*': () => ({ status: 200 }),
  'GET /v1/console/config': () => ({ status: 200 }),
  'GET /v1/me': () => ({ status: 200 }),

  // No upstream is configured here: an allowed caller gets as far as the model lookup.
  'POST /gateway/openai/v1/chat/completions': () => ({
    body: { model: 'm', messages: [{ role: 'user', content: 'hi' }] },
    status: 404,
  }),
  'POST /gateway/openai/v1/responses': () => ({ body: { model: 'm', input: 'hi' }, status: 404 }),
  'POST /gateway/anthropic/v1/messages': () => ({
    body: { model: 'm', max_tokens: 16, messages: [{ role: 'user', content: 'hi' }] },
    status: 404,
  }),

  'POST /v1/sessions': () => ({ body: {}, status: 201 }),
  'POST /v1/sessions/:sid/messages': () => ({ body: { role: 'user', content: 'one more' }, status: 201 }),
  // The same chunk again: accepted as a duplicate, so every allowed call answers alike.
  'POST /v1/sessions/:sid/messages/:mid/chunks': () => ({
    mid: 'a1',
    body: [{ seq: 1, type: 'llm_response_created' }],
    status: 200,
  }),
  'POST /v1/sessions/:sid/messages/:mid/translations': () => ({
    mid: 'a1',
    body: { targetLanguage: 'fr' },
    status: 201,
  }),
  'POST /v1/sessions/:sid/fork': () => ({ body: { messageId: 'a1' }, status: 201 }),
  'PUT /v1/sessions/:sid/messages/:mid/selection': () => ({ body: { childId: 'a1' }, status: 200 }),
  'PUT /v1/sessions/:sid/selection': () => ({ body: { childId: 'u1' }, status: 200 }),
  'POST /v1/sessions/:sid/writers': () => ({ body: { writers: ['subject:granted-by-the-matrix'] }, status: 200 }),

  'GET /v1/sessions': () => ({ query: '?limit=1', status: 200 }),
  'GET /v1/sessions/:sid': () => ({ status: 200 }),
  'GET /v1/sessions/:sid/tree': () => ({ status: 200 }),
  'GET /v1/sessions/:sid/history': () => ({ status: 200 }),
  'GET /v1/sessions/:sid/messages/:mid': () => ({ status: 200 }),
  'GET /v1/sessions/:sid/live': () => ({ status: 200 }),
  'GET /v1/sessions/:sid/events': () => ({ status: 200 }),
  'GET /v1/events/live': () => ({ query: '?types=&streams=', status: 200 }),
  'GET /v1/sessions/:sid/verify': () => ({ status: 200 }),
  'GET /v1/tool-calls/:id/verify': () => ({ status: 200 }),
  'GET /v1/sessions/:sid/export': () => ({ status: 200 }),
  'GET /v1/log/key': () => ({ status: 200 }),
  'GET /v1/log/checkpoint': () => ({ status: 200 }),
  'GET /v1/log/proof/inclusion': () => ({ query: '?position=1&treeSize=1', status: 200 }),
  'GET /v1/log/proof/consistency': () => ({ query: '?from=1&to=1', status: 200 }),

  'GET /v1/tool-calls': () => ({ status: 200 }),
  'GET /v1/tool-calls/:id': () => ({ status: 200 }),
  // The firewall denied the call already: the reviewer reaches the decision rules, which say so.
  'POST /v1/tool-calls/:id/approve': (own) => ({ body: { argumentsSha256: own.argumentsSha256 }, status: 409 }),
  'POST /v1/tool-calls/:id/deny': (own) => ({ body: { argumentsSha256: own.argumentsSha256 }, status: 409 }),

  'POST /v1/admin/rebuild': () => ({ status: 200 }),
  'POST /v1/admin/keys': () => ({ body: { name: 'minted by the matrix', roles: ['reader'] }, status: 201 }),
  'GET /v1/admin/keys': () => ({ status: 200 }),
  'DELETE /v1/admin/keys/:id': () => ({ status: 200 }),
};

function fill(route: string, resources: TenantResources, example: Example): string {
  const id = route.includes('/admin/keys/') ? resources.spareKeyId : resources.toolCallId;
  const path = route
    .split(' ')[1]
    .replace(':sid', resources.sessionId)
    .replace(':mid', example.mid ?? 'u1')
    .replace(':id', id);
  return `${path}${example.query ?? ''}`;
}

const keyId = (key: string) => /^blk_([a-z0-9]{16})_/.exec(key)![1];

describe('the permission table against the live router', () => {
  let fixture: GovernanceFixture;
  let ledger: LedgerUnderTest;
  const roleKeys = new Map<Role, string>();
  const unauthenticated = new Map<Unauthenticated, { credential?: string; authorization?: string }>();
  const resources = new Map<string, TenantResources>();

  /**
   * A session owned by the tenant's producer, with a user message, an assistant reply and a tool
   * call the firewall denied, written by a setup key it lets write.
   */
  async function tenantResources(tenant: string): Promise<TenantResources> {
    const credentials = ledger.credentials;
    const credential = await credentials.key(`${tenant}-setup`, { tenant });
    const producer = await credentials.key(`${tenant}-producer`, { tenant, roles: ['producer'] });
    const as = (method: string, route: string, body?: unknown) =>
      probe(ledger.baseUrl, method, route, { credential, body });
    const sessionId = `${tenant}-session`;
    const opened = await probe(ledger.baseUrl, 'POST', '/v1/sessions', {
      credential: producer,
      body: { id: sessionId, title: `${tenant}'s`, writers: [`subject:${tenant}-setup`] },
    });
    expect(opened.status).toBe(201);
    const steps: [string, unknown][] = [
      [`/v1/sessions/${sessionId}/messages`, { id: 'u1', role: 'user', content: `${tenant} asks` }],
      [`/v1/sessions/${sessionId}/messages`, { id: 'a1', role: 'assistant' }],
      [`/v1/sessions/${sessionId}/messages/a1/chunks`, [{ seq: 1, type: 'llm_response_created' }]],
      [`/v1/sessions/${sessionId}/messages`, { id: 'u2', role: 'user', content: 'move it' }],
      [`/v1/sessions/${sessionId}/messages`, { id: 'a2', role: 'assistant' }],
      [
        `/v1/sessions/${sessionId}/messages/a2/chunks`,
        [
          {
            seq: 1,
            type: 'mcp_tool_pending',
            responses: [
              {
                id: 'call_1',
                tool: {
                  id: 'filesystem-move_file',
                  name: 'move_file',
                  serverName: 'filesystem',
                  serverId: 'filesystem',
                },
                arguments: {
                  source: path.join(fixture.workspace, 'hello.txt'),
                  destination: path.join(fixture.workspace, 'moved.txt'),
                },
                status: 'pending',
              },
            ],
          },
        ],
      ],
    ];
    for (const [route, body] of steps) expect((await as('POST', route, body)).status).toBeLessThan(300);
    const toolCallId = governedToolCallId(tenant, sessionId, 'a2', 'call_1');
    const toolCall = await eventually(`${tenant}'s tool call completes`, async () => {
      const read = await as('GET', `/v1/tool-calls/${toolCallId}`);
      return read.status === 200 && read.body.status === 'completed' ? read.body : undefined;
    });
    const spareKeyId = keyId(await credentials.mint(`${tenant}-spare`, { tenant, roles: ['reader'] }));
    return { sessionId, toolCallId, argumentsSha256: toolCall.argumentsSha256, spareKeyId };
  }

  beforeAll(async () => {
    fixture = await governanceFixture();
    ledger = await startLedger(fixture.env());
    const credentials = ledger.credentials;
    // First, so that it has expired by the time the matrix runs.
    const expiresAt = new Date(Date.now() + 2_000).toISOString();
    const expiring = credentials.mint('expiring', { tenant: OWN, roles: ROLES, expiresAt });
    for (const role of ROLES) {
      roleKeys.set(role, await credentials.key(`${OWN}-${role}`, { tenant: OWN, roles: [role] }));
    }
    resources.set(OWN, await tenantResources(OWN));
    resources.set(OTHER, await tenantResources(OTHER));
    const revoked = await credentials.mint('revoked', { tenant: OWN, roles: ROLES });
    const revocation = await probe(ledger.baseUrl, 'DELETE', `/v1/admin/keys/${keyId(revoked)}`, {
      credential: credentials.adminKey,
    });
    expect(revocation.status).toBe(200);
    unauthenticated.set('no credential', {});
    unauthenticated.set('malformed', { authorization: 'Bearer not-a-credential' });
    unauthenticated.set('revoked', { credential: revoked });
    unauthenticated.set('expired', { credential: await expiring });
    const expired = await expiring;
    await eventually('the expiring key expires', async () => {
      const route = `/v1/sessions/${resources.get(OWN)!.sessionId}`;
      const read = await probe(ledger.baseUrl, 'GET', route, { credential: expired });
      return read.status === 401 ? true : undefined;
    });
  });
  afterAll(async () => {
    await ledger?.close();
    await fixture?.close();
  });

  it('lists exactly the routes the service declares, each with an example call', () => {
    const declared = [...declaredRoutes(ledger.app)].sort();
    expect(declared).toEqual(Object.keys(PERMISSIONS).sort());
    expect(Object.keys(EXAMPLES).sort()).toEqual(declared);
  });

  it('serves nothing on a path no route declares, with or without a credential', async () => {
    for (const credential of [undefined, roleKeys.get('admin')]) {
      const answer = await probe(ledger.baseUrl, 'GET', '/v1/no-such-route', { credential });
      expect(answer).toMatchObject({ status: 404, body: { error: { code: 'not_found' } } });
    }
  });

  it('answers public routes without a credential, and they hold no tenant data', async () => {
    const own = resources.get(OWN)!;
    for (const [route, rule] of Object.entries(PERMISSIONS)) {
      if (rule !== 'public') continue;
      const example = EXAMPLES[route](own);
      const [method] = route.split(' ');
      const answers = await Promise.all(
        [undefined, roleKeys.get('admin')].map((credential) =>
          probe(ledger.baseUrl, method, fill(route, own, example), { credential }),
        ),
      );
      for (const answer of answers) {
        expect({ route, status: answer.status }).toEqual({ route, status: example.status });
        const text = JSON.stringify(answer.body);
        for (const secret of [own.sessionId, own.toolCallId, own.spareKeyId, OWN]) expect(text).not.toContain(secret);
      }
    }
  });

  it('answers every route × role × tenant × credential as the table says', async () => {
    const own = resources.get(OWN)!;
    const other = resources.get(OTHER)!;
    const otherEventsBefore = await otherTenantEvents();
    const mismatches: string[] = [];
    const check = (label: string, answer: Probed, status: number, code?: string) => {
      const problems = [
        answer.status !== status && `status ${answer.status} (expected ${status})`,
        code !== undefined &&
          errorCodeOf(answer.body) !== code &&
          `error code ${errorCodeOf(answer.body)} (expected ${code})`,
        status >= 400 && typeof answer.body?.error?.message !== 'string' && 'no error body',
        status === 401 &&
          !/^Bearer\b/.test(answer.headers.get('www-authenticate') ?? '') &&
          'no WWW-Authenticate: Bearer',
      ].filter(Boolean);
      if (problems.length > 0) mismatches.push(`${label}: ${problems.join(', ')} ${JSON.stringify(answer.body)}`);
    };
    // One route at a time (its calls in parallel), so a rebuild or a key revocation never races another route's calls.
    for (const [route, rule] of Object.entries(PERMISSIONS)) {
      if (rule === 'public') continue;
      const [method] = route.split(' ');
      const example = EXAMPLES[route](own);
      const call = (target: TenantResources, credential: { credential?: string; authorization?: string }) =>
        probe(ledger.baseUrl, method, fill(route, target, example), { ...credential, body: example.body });
      const targets = route.includes(':')
        ? ([
            ['own', own],
            ['other', other],
          ] as const)
        : ([['own', own]] as const);
      await Promise.all([
        ...ROLES.flatMap((role) =>
          targets.map(async ([tenant, target]) => {
            // Routes acting on every tenant take their roles from the default tenant only; OWN is another tenant.
            const allowed = rule.includes(role) && !OPERATOR_ROUTES.has(route);
            const expected = !allowed ? 403 : tenant === 'own' ? example.status : 404;
            const answer = await call(target, { credential: roleKeys.get(role) });
            check(`${route} as ${role} on the ${tenant} tenant`, answer, expected, allowed ? undefined : 'forbidden');
          }),
        ),
        ...UNAUTHENTICATED.map(async (kind) =>
          check(`${route} with ${kind}`, await call(own, unauthenticated.get(kind)!), 401, 'unauthenticated'),
        ),
      ]);
    }
    expect(mismatches).toEqual([]);
    // Everything sent to the other tenant's resources was refused: its log is as it was.
    expect(await otherTenantEvents()).toEqual(otherEventsBefore);
  });

  it('answers HEAD as the GET route it runs: public without a credential, 401 without one elsewhere', async () => {
    const own = resources.get(OWN)!;
    const mismatches: string[] = [];
    const getRoutes = Object.entries(PERMISSIONS).filter(([route]) => route.startsWith('GET '));
    await Promise.all(
      getRoutes.map(async ([route, rule]) => {
        const example = EXAMPLES[route](own);
        const url = fill(route, own, example);
        const allowed = rule === 'public' ? undefined : roleKeys.get(rule[0]);
        const anonymous = await probe(ledger.baseUrl, 'HEAD', url);
        const authenticated = await probe(ledger.baseUrl, 'HEAD', url, { credential: allowed });
        const expected = rule === 'public' ? example.status : 401;
        const head = `HEAD ${route.slice(4)}`;
        if (anonymous.status !== expected) {
          mismatches.push(`${head} without a credential: ${anonymous.status} (expected ${expected})`);
        }
        const expectedAuthenticated = OPERATOR_ROUTES.has(route) ? 403 : example.status;
        if (authenticated.status !== expectedAuthenticated) {
          const role = rule === 'public' ? 'none' : rule[0];
          mismatches.push(`${head} with ${role}: ${authenticated.status} (expected ${expectedAuthenticated})`);
        }
      }),
    );
    expect(mismatches).toEqual([]);
  });

  async function otherTenantEvents(): Promise<string[]> {
    const credential = await ledger.credentials.key(`${OTHER}-setup`);
    const route = `/v1/sessions/${resources.get(OTHER)!.sessionId}/events?limit=1000`;
    const read = await probe(ledger.baseUrl, 'GET', route, { credential });
    expect(read.status).toBe(200);
    return read.body.events.map((event: { id: string }) => event.id);
  }
});
