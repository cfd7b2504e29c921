/**
 * What verifying a bearer JWT costs once the key set is cached: `createJwtVerifier(...).verify`
 * per token, beside jose's bare `jwtVerify` with the public key in hand (the baseline: signature
 * and claim checks without key lookup or claim mapping). Each token is distinct, signed ahead by
 * the test JWKS server over real HTTP; verification runs one token at a time. Not run in CI.
 *
 *   npx tsc -b && node dist/bench/identity/jwt.js
 */
import { importJWK, jwtVerify, type JWK } from 'jose';
import { loadConfig, type OidcConfig } from '../../apps/ledger/src/config/ledger-config.js';
import { createJwtVerifier } from '../../apps/ledger/src/identity/jwt-verifier.js';
import { startJwksServer, type AsymmetricAlgorithm } from '../../test/support/jwks-server.js';
import { percentile, printTable } from '../support/bench-database.js';

const TOKENS = Number(process.env.BENCH_TOKENS ?? 2_000);
const ALGORITHMS: readonly AsymmetricAlgorithm[] = ['RS256', 'ES256', 'EdDSA'];

async function timeEach(tokens: readonly string[], verify: (token: string) => Promise<unknown>): Promise<number[]> {
  const micros: number[] = [];
  for (const token of tokens) {
    const started = performance.now();
    await verify(token);
    micros.push((performance.now() - started) * 1_000);
  }
  return micros;
}

const rows: string[][] = [];
for (const alg of ALGORITHMS) {
  const idp = await startJwksServer({ alg });
  const config: OidcConfig = loadConfig({ LEDGER_OIDC_ISSUER: idp.issuer, LEDGER_OIDC_AUDIENCE: idp.audience }).oidc!;
  const tokens = await Promise.all(
    Array.from({ length: TOKENS }, (_, index) => idp.sign({ sub: `u${index}`, tenant: 'acme', roles: ['producer'] })),
  );
  const verifier = createJwtVerifier(config);
  await verifier.verify(tokens[0]);
  const { keys } = (await (await fetch(idp.jwksUrl)).json()) as { keys: JWK[] };
  const warmFetches = idp.requests.jwks;
  const publicKey = await importJWK(keys[0], alg);
  const bare = (token: string) => jwtVerify(token, publicKey, { issuer: idp.issuer, audience: idp.audience });
  await bare(tokens[0]);
  // Interleaved halves so warm-up and garbage collection fall on both sides alike.
  const half = Math.floor(TOKENS / 2);
  const ours = [...(await timeEach(tokens.slice(0, half), (token) => verifier.verify(token)))];
  const baseline = await timeEach(tokens.slice(0, half), bare);
  ours.push(...(await timeEach(tokens.slice(half), (token) => verifier.verify(token))));
  baseline.push(...(await timeEach(tokens.slice(half), bare)));
  const micros = (value: number) => `${value.toFixed(0)} µs`;
  const median = (values: number[]) => percentile(values, 50);
  rows.push([
    alg,
    micros(median(ours)),
    micros(percentile(ours, 90)),
    micros(percentile(ours, 99)),
    micros(median(baseline)),
    `${(median(ours) / median(baseline)).toFixed(2)}×`,
  ]);
  if (idp.requests.jwks !== warmFetches) throw new Error('the key set was refetched: the cache was not warm');
  await idp.close();
}
console.log(`${TOKENS} distinct tokens per algorithm, verified one at a time, key set cached`);
printTable(['alg', 'verify p50', 'p90', 'p99', 'bare jwtVerify p50', 'ratio of p50s'], rows);
