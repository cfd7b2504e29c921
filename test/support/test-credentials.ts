import { readFile } from 'node:fs/promises';
import path from 'node:path';
import type { expect as jestExpect } from '@jest/globals';

export const ALL_ROLES_BUT_ADMIN = ['producer', 'reader', 'reviewer', 'auditor'] as const;

export interface KeyOptions {
  readonly roles?: readonly string[];
  readonly tenant?: string;
  /** Defaults to the name: each name is one principal for separation of duties. */
  readonly subject?: string;
  readonly expiresAt?: string;
}

/**
 * Credentials for a ledger under test, minted through its own admin route with the admin key its
 * first start wrote to the data folder. Each name is its own principal: `key('alice')` is the
 * same key every time it is asked for, so tests read like "alice approves". `admin` is the bootstrap admin key.
 */
export class TestCredentials {
  private readonly keys = new Map<string, Promise<string>>();

  constructor(
    readonly baseUrl: string,
    readonly adminKey: string,
  ) {
    this.keys.set('admin', Promise.resolve(adminKey));
  }

  static async fromDataDir(baseUrl: string, dataDir: string): Promise<TestCredentials> {
    return new TestCredentials(baseUrl, (await readFile(path.join(dataDir, 'admin.key'), 'utf8')).trim());
  }

  /** The key named `name`, minted on first use (every role but admin unless told). */
  key(name: string, options: KeyOptions = {}): Promise<string> {
    const known = this.keys.get(name);
    if (known) return known;
    const minted = this.mint(name, options);
    this.keys.set(name, minted);
    return minted;
  }

  /** Names a credential minted elsewhere (e.g. a JWT), so `authorization(baseUrl, name)` presents it. */
  use(name: string, credential: string): void {
    this.keys.set(name, Promise.resolve(credential));
  }

  /** A fresh key every call (e.g. a second key of one subject). */
  async mint(
    name: string,
    { roles = ALL_ROLES_BUT_ADMIN, tenant, subject = name, expiresAt }: KeyOptions = {},
  ): Promise<string> {
    const response = await fetch(`${this.baseUrl}/v1/admin/keys`, {
      method: 'POST',
      headers: { authorization: `Bearer ${this.adminKey}`, 'content-type': 'application/json' },
      body: JSON.stringify({
        name,
        roles,
        subject,
        ...(tenant ? { tenant } : {}),
        ...(expiresAt ? { expiresAt } : {}),
      }),
    });
    const body = (await response.json()) as { key?: string; id?: string };
    if (response.status !== 201 || !body.key)
      throw new Error(`minting key ${name}: ${response.status} ${JSON.stringify(body)}`);
    return body.key;
  }
}

const registry = new Map<string, TestCredentials>();

export function registerCredentials(credentials: TestCredentials): TestCredentials {
  registry.set(credentials.baseUrl, credentials);
  return credentials;
}

export function credentialsOf(baseUrl: string): TestCredentials {
  const credentials = registry.get(baseUrl);
  if (!credentials) throw new Error(`no credentials registered for ${baseUrl}`);
  return credentials;
}

/** `authorization` header of the key named `who` on that ledger. */
export async function authorization(baseUrl: string, who: string): Promise<Record<string, string>> {
  return { authorization: `Bearer ${await credentialsOf(baseUrl).key(who)}` };
}

/** Jest's global: importing `@jest/globals` fails outside Jest, and benchmarks use these credentials too. */
declare const expect: typeof jestExpect;

/** The actor recorded for the key named `name` (`key:<key id>:<name>`), for `toMatchObject`. */
export const keyActor = (name: string) => expect.stringMatching(new RegExp(`^key:[a-z0-9]{16}:${name}$`));
