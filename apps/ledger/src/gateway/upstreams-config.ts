import { createHash } from 'node:crypto';
import { z } from 'zod';
import { ConfigFileError, describeIssue, parseConfigFile } from '../config/config-file.js';
import { httpUrl } from '../config/http-url.js';

const UPSTREAMS_VARIABLE = 'LEDGER_UPSTREAMS';

export type UpstreamProtocol = 'openai' | 'anthropic';

/**
 * One provider key. The value sits in a private field, so logging, `util.inspect` or
 * `JSON.stringify` of a key, an upstream or a whole configuration shows only its short hash.
 */
export class UpstreamKey {
  /** First 8 hex digits of the key's SHA-256: how a key is named in metrics and errors. */
  readonly hash: string;
  readonly #value: string;

  constructor(
    value: string,
    readonly weight: number,
  ) {
    this.#value = value;
    this.hash = shortKeyHash(value);
  }

  /** The key itself, for the request header and nothing else. */
  value(): string {
    return this.#value;
  }
}

export interface Upstream {
  readonly name: string;
  readonly protocol: UpstreamProtocol;
  /** The provider's API root, `/v1` included (`https://api.openai.com/v1`, `https://api.anthropic.com/v1`). */
  readonly baseUrl: string;
  /** The models it serves; `'*'`: any model no earlier upstream lists. */
  readonly models: readonly string[] | '*';
  readonly keys: readonly UpstreamKey[];
}

const ENV_REFERENCE = /^\$\{([A-Za-z_][A-Za-z0-9_]*)\}$/;

const upstreamSchema = z.strictObject({
  name: z.string().regex(/^[A-Za-z0-9._-]{1,64}$/, 'must be 1-64 letters, digits, dots, dashes or underscores'),
  protocol: z.enum(['openai', 'anthropic']),
  baseUrl: httpUrl,
  models: z.union([z.literal('*'), z.array(z.string().min(1)).min(1)]),
  keys: z.array(z.strictObject({ key: z.string().min(1), weight: z.number().int().positive().default(1) })).min(1),
});

const upstreamsSchema = z
  .strictObject({ upstreams: z.array(upstreamSchema).min(1) })
  .superRefine(({ upstreams }, context) => {
    const seen = new Set<string>();
    upstreams.forEach(({ name }, index) => {
      if (seen.has(name)) {
        context.addIssue({ code: 'custom', path: ['upstreams', index, 'name'], message: `${name} is used twice` });
      }
      seen.add(name);
    });
  });

export class UpstreamsConfigError extends Error {
  override readonly name = 'UpstreamsConfigError';
}

/** First 8 hex digits of SHA-256: enough to tell keys apart on a dashboard, useless to recover one. */
export function shortKeyHash(key: string): string {
  return createHash('sha256').update(key).digest('hex').slice(0, 8);
}

/**
 * Checks a parsed `LEDGER_UPSTREAMS` document and resolves `${ENV_NAME}` keys from `env`.
 * Errors name the field (`upstreams.0.keys.1.weight`) and never a key's value.
 */
export function parseUpstreams(document: unknown, env: NodeJS.ProcessEnv): Upstream[] {
  const parsed = upstreamsSchema.safeParse(document);
  if (!parsed.success) {
    throw new UpstreamsConfigError(describeIssue(parsed.error.issues[0], '(document)'));
  }
  return parsed.data.upstreams.map((upstream, upstreamIndex) => {
    const keys = upstream.keys.map(({ key, weight }, keyIndex) => {
      const field = `upstreams.${upstreamIndex}.keys.${keyIndex}.key`;
      return new UpstreamKey(resolveKey(key, env, `${field} (upstream ${upstream.name}, key ${keyIndex})`), weight);
    });
    const repeated = keys.findIndex((key, index) => keys.findIndex((other) => other.hash === key.hash) !== index);
    if (repeated >= 0) {
      const field = `upstreams.${upstreamIndex}.keys.${repeated}.key`;
      throw new UpstreamsConfigError(`${field}: repeats an earlier key of ${upstream.name}`);
    }
    return { ...upstream, baseUrl: upstream.baseUrl.replace(/\/+$/, ''), keys };
  });
}

function resolveKey(key: string, env: NodeJS.ProcessEnv, where: string): string {
  const reference = ENV_REFERENCE.exec(key);
  if (!reference) return key;
  const value = env[reference[1]];
  if (!value) throw new UpstreamsConfigError(`${where}: environment variable ${reference[1]} is not set`);
  return value;
}

/** Reads the file `LEDGER_UPSTREAMS` names: YAML when it is named `.yaml` or `.yml`, JSON otherwise. */
export function loadUpstreams(file: string, env: NodeJS.ProcessEnv): Upstream[] {
  const value = parseConfigFile(UPSTREAMS_VARIABLE, file);
  try {
    return parseUpstreams(value, env);
  } catch (error) {
    if (error instanceof UpstreamsConfigError) throw new ConfigFileError(UPSTREAMS_VARIABLE, file, error.message);
    throw error;
  }
}

/** The first upstream that lists `model`, else the first that takes any model (`'*'`). */
export function upstreamFor(
  upstreams: readonly Upstream[],
  model: string,
  protocol?: UpstreamProtocol,
): Upstream | undefined {
  // A route speaks one protocol: an upstream of the other cannot answer it.
  const speaking = protocol === undefined ? upstreams : upstreams.filter((upstream) => upstream.protocol === protocol);
  return (
    speaking.find((upstream) => upstream.models !== '*' && upstream.models.includes(model)) ??
    speaking.find((upstream) => upstream.models === '*')
  );
}
