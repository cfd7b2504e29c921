import { z } from 'zod';

/**
 * How deep arrays and objects may nest inside a request. Deeper JSON is refused at the edge:
 * every layer behind it (hashing, the log, the read models) walks values recursively.
 */
export const MAX_JSON_DEPTH = 64;

/** Where a value holds something the ledger will not store, and why. */
export interface UnstorableJson {
  /** Keys and array indexes from the checked value's root; for a bad key, the object holding it. */
  readonly path: readonly (string | number)[];
  readonly message: string;
}

/** A JSON object: an object that is neither null nor an array. */
export const isJsonObject = (value: unknown): value is Record<string, unknown> =>
  typeof value === 'object' && value !== null && !Array.isArray(value);

// A high surrogate not followed by a low one, or a low one not preceded by a high one.
const UNPAIRED_SURROGATE = /[\ud800-\udbff](?![\udc00-\udfff])|(?<![\ud800-\udbff])[\udc00-\udfff]/;

function textProblem(text: string): string | undefined {
  // PostgreSQL's text and jsonb cannot hold U+0000; an unpaired surrogate is not Unicode and has no UTF-8 form.
  if (text.includes('\u0000')) return 'holds a NUL character (U+0000)';
  if (UNPAIRED_SURROGATE.test(text)) return 'holds an unpaired UTF-16 surrogate (not valid Unicode)';
  return undefined;
}

/**
 * The first thing in a parsed JSON value that the ledger refuses to store: a string or an object
 * key with a NUL character or an unpaired surrogate, a `__proto__` key, a number beyond the double
 * range (parsed as Infinity), or nesting deeper than `maxDepth` (reported at the top-level field
 * that holds them). Each client's input is checked at the edge, so it can never fail a batch it
 * shares with others.
 */
export function findUnstorableJson(value: unknown, maxDepth = MAX_JSON_DEPTH): UnstorableJson | undefined {
  // One path, grown and shrunk as the walk goes, copied only into a problem: a copy per value cost
  // more than the checks on a body of many small values.
  const path: (string | number)[] = [];
  const found = (message: string, at: readonly (string | number)[] = path) => ({ path: [...at], message });
  const visit = (current: unknown): UnstorableJson | undefined => {
    if (typeof current === 'string') {
      const message = textProblem(current);
      return message ? found(message) : undefined;
    }
    // JSON.parse turns a number beyond the double range (1e400) into Infinity, which JSON cannot hold again.
    if (typeof current === 'number') return Number.isFinite(current) ? undefined : found('is not a finite number');
    if (typeof current !== 'object' || current === null) return undefined;
    if (path.length >= maxDepth) {
      return found(`nests arrays and objects deeper than ${maxDepth} levels`, path.slice(0, 1));
    }
    if (Array.isArray(current)) {
      for (let index = 0; index < current.length; index++) {
        path.push(index);
        const problem = visit(current[index]);
        path.pop();
        if (problem) return problem;
      }
      return undefined;
    }
    for (const key in current) {
      if (!Object.hasOwn(current, key)) continue;
      // Schema parsing drops a `__proto__` key silently (or assigning it would set a prototype).
      if (key === '__proto__') return found('has the key "__proto__", which is not accepted as data');
      const keyProblem = textProblem(key);
      if (keyProblem) return found(`has a key that ${keyProblem}`);
      path.push(key);
      const problem = visit((current as Record<string, unknown>)[key]);
      path.pop();
      if (problem) return problem;
    }
    return undefined;
  };
  return visit(value);
}

/**
 * `schema`, behind the check of `findUnstorableJson` on the raw input: a request body schema
 * built this way refuses unstorable text anywhere, in fields it passes through unchecked too.
 */
export function storableJson<Schema extends z.ZodType>(schema: Schema) {
  return z
    .unknown()
    .superRefine((value, context) => {
      const problem = findUnstorableJson(value);
      if (problem) context.addIssue({ code: 'custom', path: [...problem.path], message: problem.message });
    })
    .pipe(schema);
}
