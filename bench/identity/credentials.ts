/**
 * What authenticating a request costs once its credential is cached, beside baselines measured
 * in the same run, interleaved round by round so warm-up and garbage collection fall on all alike:
 *   - a no-op (an awaited resolved promise: what any async step costs),
 *   - one SHA-256 of the same size as a key check (16-byte salt and a 32-character secret),
 *   - ApiKeyStore.verify on a warm cache (the real store on PostgreSQL; the real clock, so the
 *     once-a-second re-read that bounds revocation falls inside the measurement),
 *   - the whole guard: permission table, Authenticator, role check, rate limiter (AuthGuard.canActivate),
 *   - a bearer JWT through createJwtVerifier with the key set cached (ES256; bench/identity/jwt.ts
 *     compares algorithms against bare jose).
 * Prints µs per call (median of rounds, and the slowest round) and each row's ratio to SHA-256.
 *
 *   npm run bench:credentials
 */
import { createHash, randomBytes } from 'node:crypto';
import type { ExecutionContext } from '@nestjs/common';
import { createPostgresEventLog } from '#event-log';
import pg from 'pg';
import type { OidcConfig } from '../../apps/ledger/src/config/ledger-config.js';
import { ApiKeyStore } from '../../apps/ledger/src/identity/api-key-store.js';
import { AuthGuard } from '../../apps/ledger/src/identity/auth.guard.js';
import { Authenticator } from '../../apps/ledger/src/identity/authenticator.js';
import { CredentialRateLimiter } from '../../apps/ledger/src/identity/credential-rate-limiter.js';
import { createJwtVerifier } from '../../apps/ledger/src/identity/jwt-verifier.js';
import { systemActor } from '../../apps/ledger/src/identity/principal.js';
import { startJwksServer } from '../../test/support/jwks-server.js';
import { openBenchDatabase, percentile, printTable } from '../support/bench-database.js';

const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 40);
const CALLS_PER_ROUND = Number(process.env.BENCH_CALLS ?? 2_000);
/** JWT verification is ~100× slower; fewer calls keep a round short. */
const JWT_CALLS_PER_ROUND = Math.max(1, Math.floor(CALLS_PER_ROUND / 20));

interface Subject {
  readonly name: string;
  readonly calls: number;
  run(): Promise<unknown>;
}

/** Mean µs per call of each subject, one mean per round. */
async function measure(subjects: readonly Subject[]): Promise<Map<string, number[]>> {
  const perRound = new Map(subjects.map((subject) => [subject.name, [] as number[]]));
  for (let round = -1; round < ROUNDS; round += 1) {
    for (const subject of subjects) {
      const started = performance.now();
      for (let call = 0; call < subject.calls; call += 1) await subject.run();
      const micros = ((performance.now() - started) * 1_000) / subject.calls;
      if (round >= 0) perRound.get(subject.name)!.push(micros); // Round -1 warms up.
    }
  }
  return perRound;
}

async function main(): Promise<void> {
  const database = await openBenchDatabase(54_392);
  const pool = new pg.Pool({ connectionString: database.connectionString, max: 2 });
  const eventLog = await createPostgresEventLog({ connectionString: database.connectionString });
  const idp = await startJwksServer({ alg: 'ES256' });
  try {
    const store = new ApiKeyStore(pool, eventLog);
    const { key } = await store.create({ name: 'bench', tenant: 'default', roles: ['producer'] }, systemActor('bench'));
    const guard = new AuthGuard(new Authenticator(store), new CredentialRateLimiter(Number.MAX_SAFE_INTEGER, 1_000));
    const request = {
      method: 'POST',
      route: { path: '/v1/sessions/:sid/messages/:mid/chunks' },
      path: '/v1/sessions/s/messages/m/chunks',
      headers: { authorization: `Bearer ${key}` },
    };
    const http = { getRequest: () => request, getResponse: () => undefined };
    const context = { switchToHttp: () => http } as unknown as ExecutionContext;

    const jwtConfig: OidcConfig = {
      issuer: idp.issuer,
      audience: idp.audience,
      jwksUrl: undefined,
      tenantClaim: 'tenant',
      rolesClaim: 'roles',
      clockSkewSeconds: 30,
      jwksCooldownMs: 5_000,
      jwksMaxAgeMs: 600_000,
    };
    const verifier = createJwtVerifier(jwtConfig);
    const token = await idp.sign({ tenant: 'default', roles: ['producer'] });

    const salt = randomBytes(16);
    const secret = key.slice(-32);
    const subjects: Subject[] = [
      { name: 'no-op (awaited resolved promise)', calls: CALLS_PER_ROUND, run: () => Promise.resolve() },
      {
        name: 'one SHA-256 (16 B salt + 32 B secret)',
        calls: CALLS_PER_ROUND,
        run: async () => createHash('sha256').update(salt).update(secret).digest(),
      },
      { name: 'ApiKeyStore.verify, cached key', calls: CALLS_PER_ROUND, run: () => store.verify(key) },
      { name: 'AuthGuard.canActivate, cached key', calls: CALLS_PER_ROUND, run: () => guard.canActivate(context) },
      { name: 'JWT verify (ES256), key set cached', calls: JWT_CALLS_PER_ROUND, run: () => verifier.verify(token) },
    ];
    for (const subject of subjects) await subject.run(); // Fills the key cache and fetches the key set.
    const jwksFetches = idp.requests.jwks;
    const results = await measure(subjects);
    if (idp.requests.jwks !== jwksFetches) throw new Error('the key set was refetched: the JWT row is not warm');

    const sha256 = percentile(results.get(subjects[1].name)!, 50);
    const micros = (value: number) => `${value.toFixed(2)} µs`;
    const calls = `${CALLS_PER_ROUND} calls (JWT: ${JWT_CALLS_PER_ROUND})`;
    console.log(`${ROUNDS} rounds of ${calls}, one at a time; Node ${process.version}`);
    printTable(
      ['per request', 'median of rounds', 'slowest round', 'ratio to SHA-256'],
      subjects.map(({ name }) => {
        const rounds = results.get(name)!;
        const median = percentile(rounds, 50);
        return [name, micros(median), micros(Math.max(...rounds)), `${(median / sha256).toFixed(1)}×`];
      }),
    );
  } finally {
    await idp.close();
    await eventLog.close();
    await pool.end();
    await database.close();
  }
}

await main();
