import { readFileSync } from 'node:fs';
import { parse as parseYaml } from 'yaml';

/**
 * docker-compose.yml runs EventStoreDB in insecure mode (no authentication, no TLS) and
 * PostgreSQL with the password `ledger`. Their ports were published on every interface of the
 * host, so anyone who could reach it read and appended any tenant's events in EventStoreDB, and
 * could insert a row of their own into PostgreSQL's `api_keys` (an admin key of the default
 * tenant), past every credential and role of the ledger. The ledger reaches both over the
 * compose network; the host may reach them on loopback only.
 */
interface Service {
  ports?: (string | { published?: string | number; host_ip?: string })[];
}
const compose = parseYaml(readFileSync('docker-compose.yml', 'utf8')) as { services: Record<string, Service> };

/** The host address a port entry is published on: `HOST:PUBLISHED:TARGET`, or every interface. */
function hostAddress(entry: string | { host_ip?: string }): string {
  if (typeof entry !== 'string') return entry.host_ip ?? '0.0.0.0';
  const parts = entry.split(':');
  return parts.length === 3 ? parts[0] : '0.0.0.0';
}

describe('attack: the compose setup’s databases reachable from the network', () => {
  it.each(['eventstore', 'postgres'])('%s is published on loopback only, if at all', (name) => {
    const addresses = (compose.services[name].ports ?? []).map(hostAddress);
    expect({ name, addresses }).toEqual({ name, addresses: addresses.map(() => '127.0.0.1') });
  });
});
