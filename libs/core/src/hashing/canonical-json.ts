/**
 * Canonical JSON (RFC 8785 style for the values we store): object keys sorted by UTF-16 code
 * units, no whitespace, `undefined` members dropped; JSON values only (no bigint, no Date, no
 * boxed primitive: refused, not written as something else). Two equal values always give the same
 * string, which is what makes a hash over an event reproducible after a round trip through
 * jsonb or EventStoreDB.
 */
export type JsonValue = null | boolean | number | string | readonly JsonValue[] | { readonly [key: string]: JsonValue };

/** Loops that build one string rather than arrays of parts: this runs on every event appended or verified. */
export function canonicalJson(value: unknown): string {
  switch (typeof value) {
    case 'string':
      return JSON.stringify(value);
    case 'number':
      if (!Number.isFinite(value)) throw new TypeError(`canonical JSON cannot hold the number ${value}`);
      return JSON.stringify(value);
    case 'boolean':
      return value ? 'true' : 'false';
    case 'object':
      if (value === null) return 'null';
      return Array.isArray(value) ? canonicalArray(value) : canonicalObject(value as Record<string, unknown>);
    default:
      throw new TypeError(`canonical JSON cannot hold a ${typeof value}`);
  }
}

function canonicalArray(items: readonly unknown[]): string {
  let text = '[';
  for (let index = 0; index < items.length; index++) {
    if (index > 0) text += ',';
    const item = items[index];
    text += item === undefined ? 'null' : canonicalJson(item);
  }
  return `${text}]`;
}

function canonicalObject(members: Record<string, unknown>): string {
  // Only plain objects: JSON.stringify would write a Date, a Buffer or a boxed number as something
  // else (via toJSON or its value), so its stored form would differ from the text its hash covers.
  // The tag, not the prototype, so that objects of another realm (vm contexts) still count.
  const tag = Object.prototype.toString.call(members);
  if (tag !== '[object Object]' || typeof members.toJSON === 'function')
    throw new TypeError(
      `canonical JSON holds plain objects only, not ${tag === '[object Object]' ? 'one with toJSON' : tag}`,
    );
  let text = '{';
  for (const key of Object.keys(members).sort()) {
    const member = members[key];
    if (member === undefined) continue;
    if (text.length > 1) text += ',';
    text += `${JSON.stringify(key)}:${canonicalJson(member)}`;
  }
  return `${text}}`;
}

/**
 * A JSON value's size as canonical JSON, in UTF-8 bytes, without sorting its keys (order changes
 * no length): what an event's data weighs wherever it is measured (a session's quota, a page of
 * the log).
 */
export const jsonBytes = (value: unknown): number => Buffer.byteLength(JSON.stringify(value) ?? '');
