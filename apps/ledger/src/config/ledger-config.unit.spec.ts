import path from 'node:path';
import { StartupError } from '../database/embedded-postgres.js';
import { loadConfig } from './ledger-config.js';

describe('OIDC configuration', () => {
  const issuer = 'https://login.example.com/realms/ledger';

  it('is off without an issuer and an audience', () => {
    expect(loadConfig({}).oidc).toBeUndefined();
  });

  it('is on with both, with documented defaults', () => {
    expect(loadConfig({ LEDGER_OIDC_ISSUER: issuer, LEDGER_OIDC_AUDIENCE: 'block-ledger' }).oidc).toEqual({
      issuer,
      audience: 'block-ledger',
      jwksUrl: undefined,
      tenantClaim: 'tenant',
      rolesClaim: 'roles',
      clockSkewSeconds: 30,
      jwksCooldownMs: 5_000,
      jwksMaxAgeMs: 600_000,
    });
  });

  it('reads every variable', () => {
    const oidc = loadConfig({
      LEDGER_OIDC_ISSUER: issuer,
      LEDGER_OIDC_AUDIENCE: 'ledger-api',
      LEDGER_OIDC_JWKS_URL: `${issuer}/protocol/openid-connect/certs`,
      LEDGER_OIDC_TENANT_CLAIM: 'org.tenant',
      LEDGER_OIDC_ROLES_CLAIM: 'realm_access.roles',
      LEDGER_OIDC_CLOCK_SKEW_S: '5',
      LEDGER_OIDC_JWKS_COOLDOWN_MS: '0',
      LEDGER_OIDC_JWKS_MAX_AGE_MS: '60000',
    }).oidc;
    expect(oidc).toMatchObject({ tenantClaim: 'org.tenant', clockSkewSeconds: 5, jwksCooldownMs: 0 });
  });

  it.each<[string, NodeJS.ProcessEnv, string]>([
    ['an issuer without an audience', { LEDGER_OIDC_ISSUER: issuer }, 'LEDGER_OIDC_AUDIENCE'],
    ['an audience without an issuer', { LEDGER_OIDC_AUDIENCE: 'block-ledger' }, 'LEDGER_OIDC_ISSUER'],
    ['a JWKS URL without an issuer', { LEDGER_OIDC_JWKS_URL: `${issuer}/certs` }, 'LEDGER_OIDC_ISSUER'],
    ['a non-http(s) issuer', { LEDGER_OIDC_ISSUER: 'ftp://x.test', LEDGER_OIDC_AUDIENCE: 'a' }, 'LEDGER_OIDC_ISSUER'],
    ['a clock skew over 300 s', { LEDGER_OIDC_CLOCK_SKEW_S: '301' }, 'LEDGER_OIDC_CLOCK_SKEW_S'],
    // `new URL` throws with the whole string attached, which the start printed: refused as any other value.
    [
      'an issuer that is no URL, with credentials',
      { LEDGER_OIDC_ISSUER: 'https://user:sk-live-NEVERPRINTED@[proxy.internal/v1', LEDGER_OIDC_AUDIENCE: 'a' },
      'LEDGER_OIDC_ISSUER',
    ],
  ])('stops the start for %s, naming the variable', (_case, env, variable) => {
    expect(() => loadConfig(env)).toThrow(StartupError);
    expect(() => loadConfig(env)).toThrow(new RegExp(`environment variable ${variable} `));
    expect(() => loadConfig(env)).not.toThrow(/NEVERPRINTED/);
  });
});

describe('gateway configuration', () => {
  it('has no upstreams file by default, a 60 s upstream timeout and refuses requests the log cannot take', () => {
    const sizes = { maxRequestBytes: 33_554_432, maxResponseBytes: 33_554_432 };
    const defaults = {
      upstreamsFile: undefined,
      upstreamTimeoutMs: 60_000,
      onLogFailure: 'refuse',
      ...sizes,
      recordWaitMs: 5_000,
      recordBatchMs: 50,
    };
    expect(loadConfig({}).gateway).toEqual(defaults);
  });

  it('reads every variable, resolving the upstreams file', () => {
    const gateway = loadConfig({
      LEDGER_UPSTREAMS: 'config/upstreams.yaml',
      LEDGER_GATEWAY_UPSTREAM_TIMEOUT_MS: '5000',
      LEDGER_GATEWAY_ON_LOG_FAILURE: 'pass',
      LEDGER_GATEWAY_MAX_REQUEST_BYTES: '2048',
      LEDGER_GATEWAY_MAX_RESPONSE_BYTES: '4096',
      LEDGER_GATEWAY_RECORD_WAIT_MS: '0',
      LEDGER_GATEWAY_RECORD_BATCH_MS: '10',
    }).gateway;
    const upstreamsFile = path.resolve('config/upstreams.yaml');
    const sizes = { maxRequestBytes: 2_048, maxResponseBytes: 4_096 };
    expect(gateway).toEqual({
      upstreamsFile,
      upstreamTimeoutMs: 5_000,
      onLogFailure: 'pass',
      ...sizes,
      recordWaitMs: 0,
      recordBatchMs: 10,
    });
  });

  it.each<[NodeJS.ProcessEnv, string]>([
    [{ LEDGER_UPSTREAMS: '' }, 'LEDGER_UPSTREAMS'],
    [{ LEDGER_GATEWAY_UPSTREAM_TIMEOUT_MS: '50' }, 'LEDGER_GATEWAY_UPSTREAM_TIMEOUT_MS'],
    [{ LEDGER_GATEWAY_ON_LOG_FAILURE: 'drop' }, 'LEDGER_GATEWAY_ON_LOG_FAILURE'],
    [{ LEDGER_GATEWAY_MAX_REQUEST_BYTES: '10' }, 'LEDGER_GATEWAY_MAX_REQUEST_BYTES'],
    [{ LEDGER_GATEWAY_RECORD_WAIT_MS: '-1' }, 'LEDGER_GATEWAY_RECORD_WAIT_MS'],
  ])('stops the start for %j, naming the variable', (env, variable) => {
    expect(() => loadConfig(env)).toThrow(new RegExp(`environment variable ${variable} `));
  });
});

describe('console configuration', () => {
  it('serves dist/console and offers no OpenID sign-in by default', () => {
    expect(loadConfig({}).console).toEqual({ folder: path.resolve('dist/console'), oidcClientId: undefined });
  });

  it('reads the folder and the public client id', () => {
    const config = loadConfig({
      LEDGER_CONSOLE_DIR: 'build/console',
      LEDGER_CONSOLE_OIDC_CLIENT_ID: 'ledger-console',
      LEDGER_OIDC_ISSUER: 'https://login.example.com',
      LEDGER_OIDC_AUDIENCE: 'ledger-api',
    });
    expect(config.console).toEqual({ folder: path.resolve('build/console'), oidcClientId: 'ledger-console' });
  });

  it.each<[string, NodeJS.ProcessEnv, string]>([
    ['a client id without a provider', { LEDGER_CONSOLE_OIDC_CLIENT_ID: 'c' }, 'LEDGER_OIDC_ISSUER'],
    ['a client id with spaces', { LEDGER_CONSOLE_OIDC_CLIENT_ID: 'a b' }, 'LEDGER_CONSOLE_OIDC_CLIENT_ID'],
  ])('stops the start for %s, naming the variable', (_case, env, variable) => {
    expect(() => loadConfig(env)).toThrow(new RegExp(`environment variable ${variable} `));
  });
});

describe('the checkpoint origin', () => {
  it('takes up to 1,024 characters: each note holds it twice, and a signer memory is at most 64 KiB', () => {
    expect(loadConfig({ LEDGER_LOG_ORIGIN: `ledger.test/${'o'.repeat(1_012)}` }).verifiableLog.origin).toHaveLength(
      1_024,
    );
    expect(() => loadConfig({ LEDGER_LOG_ORIGIN: `ledger.test/${'o'.repeat(1_013)}` })).toThrow(
      /environment variable LEDGER_LOG_ORIGIN /,
    );
  });
});

describe('EventStoreDB connection string', () => {
  const password = 'pa?ss&word=1';
  const withQuery = (query: string) => `esdb://admin:${password}@db.internal:2113?${query}`;
  const problemOf = (connectionString: string) => {
    try {
      loadConfig({ EVENTSTORE_CONNECTION_STRING: connectionString });
      return undefined;
    } catch (error) {
      expect(error).toBeInstanceOf(StartupError);
      return (error as Error).message;
    }
  };

  it.each([
    'tls=false',
    'TLS=true&keepAliveInterval=10000&node-preference=leader',
    'tlsVerifyCert=true&tls_ca_file=%2Fca.pem',
    'defaultDeadline=5000&throwOnAppendFailure=false&connectionName=ledger',
  ])('takes the options the client knows: %s', (query) => {
    expect(loadConfig({ EVENTSTORE_CONNECTION_STRING: withQuery(query) }).eventStoreConnectionString).toBe(
      withQuery(query),
    );
  });

  it('takes a string without a query, and a password holding ? and &', () => {
    expect(problemOf(`esdb://admin:${password}@db.internal:2113`)).toBeUndefined();
    expect(problemOf('esdb+discover://cluster.internal:2113')).toBeUndefined();
  });

  // The client prints the whole string, password included, on these: they are refused naming the key alone.
  it.each<[string, string]>([
    ['tls=false&tlsVerfyCert=false', 'the option "tlsVerfyCert" is not one the client knows'],
    ['password=hunter2', 'the option "password" is not one the client knows'],
    ['tls=true&tlsVerifyCert=false', 'tlsVerifyCert=false is ignored by the client'],
    ['tls_verify_cert= false ', 'tlsVerifyCert=false is ignored by the client'],
  ])('refuses %s without quoting the string', (query, reason) => {
    const message = problemOf(withQuery(query));
    expect(message).toContain(`environment variable EVENTSTORE_CONNECTION_STRING is invalid: ${reason}`);
    expect(message).not.toContain(password);
    expect(message).not.toContain('db.internal');
  });

  it('refuses an `@` after the credentials, where the rest of a password would show', () => {
    const message = problemOf('esdb://admin:pa@ss?word=x@db.internal:2113');
    expect(message).toContain('an `@` follows the credentials: write one in the password as %40');
    expect(message).not.toMatch(/ss\?|word=|db\.internal/);
  });
});
