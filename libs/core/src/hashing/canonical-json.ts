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
 * A JSON value's size as canonical JSON, in UTF-8 bytes: what an event's data weighs wherever it
 * is measured (a session's quota, a page of the log). The length of `JSON.stringify(value)` (order
 * changes no length), counted without writing it: a text of a megabyte would otherwise be copied
 * twice per measure, which cost milliseconds each (issue 15's thirty-ninth round). Anything but
 * plain objects, arrays and primitives is measured as `JSON.stringify` writes it.
 */
export function jsonBytes(value: unknown): number {
  switch (typeof value) {
    case 'string':
      return stringJsonBytes(value);
    case 'number':
      return Number.isFinite(value) ? String(value).length : 'null'.length;
    case 'boolean':
      return value ? 'true'.length : 'false'.length;
    case 'undefined':
    case 'function':
    case 'symbol':
      return 0;
    case 'object':
      if (value === null) return 'null'.length;
      if (Array.isArray(value)) return arrayJsonBytes(value);
      if (
        Object.prototype.toString.call(value) === '[object Object]' &&
        typeof (value as { toJSON?: unknown }).toJSON !== 'function'
      )
        return objectJsonBytes(value as Record<string, unknown>);
  }
  return Buffer.byteLength(JSON.stringify(value) ?? '');
}

/**
 * A value JSON.stringify does not write (undefined, a function, a symbol, a toJSON giving undefined) measures 0:
 * an array writes `null` in its place, an object leaves such a member out. Every value written measures 1 or more.
 */
function arrayJsonBytes(items: readonly unknown[]): number {
  // The brackets and a comma between each two items.
  let bytes = items.length === 0 ? 2 : items.length + 1;
  for (const item of items) bytes += jsonBytes(item) || 'null'.length;
  return bytes;
}

function objectJsonBytes(members: Record<string, unknown>): number {
  let bytes = 1;
  for (const key of Object.keys(members)) {
    const member = jsonBytes(members[key]);
    // The key, its colon, its value and the comma (or closing brace) after it.
    if (member > 0) bytes += stringJsonBytes(key) + 1 + member + 1;
  }
  return bytes === 1 ? 2 : bytes;
}

/**
 * A text at least this long is a large object to V8: each copy of it (a concatenation flattened,
 * a string written or parsed again) costs milliseconds to allocate, where a short one's costs
 * next to nothing. Hot paths that meet such texts pass them on rather than copy them; shorter
 * ones take the simpler way, which is the quicker there.
 */
export const LARGE_TEXT = 32 * 1024;
/** Characters JSON.stringify writes otherwise than as UTF-8 would: quotes, backslashes, controls and surrogates. */
// eslint-disable-next-line no-control-regex -- the controls are what JSON escapes
const WRITTEN_OTHERWISE = /["\\\u0000-\u001f\ud800-\udfff]/;
/** The controls JSON.stringify writes as a backslash and a letter; the other controls take `\u00XX`. */
const SHORT_ESCAPES = new Set([0x08, 0x09, 0x0a, 0x0c, 0x0d]);

/** A string's length as JSON in UTF-8: its UTF-8 length, its quotes, and what escaping adds. */
function stringJsonBytes(text: string): number {
  const first = text.search(WRITTEN_OTHERWISE);
  if (first < 0) return Buffer.byteLength(text) + 2;
  if (text.length < LARGE_TEXT) return Buffer.byteLength(JSON.stringify(text));
  let bytes = Buffer.byteLength(text) + 2;
  for (let index = first; index < text.length; index++) {
    const code = text.charCodeAt(index);
    if (code >= 0x20 && code !== 0x22 && code !== 0x5c && (code < 0xd800 || code > 0xdfff)) continue;
    if (code >= 0xd800 && code <= 0xdbff) {
      const next = text.charCodeAt(index + 1);
      // A pair is written as it is (4 bytes, as counted); a lone surrogate as `\udXXX`, 6 bytes where UTF-8 counted 3.
      if (next >= 0xdc00 && next <= 0xdfff) index++;
      else bytes += 3;
    } else if (code >= 0xdc00) bytes += 3;
    // `\"`, `\\` and `\n` add a backslash to a 1-byte character; `\u00XX` adds five.
    else bytes += code < 0x20 && !SHORT_ESCAPES.has(code) ? 5 : 1;
  }
  return bytes;
}

/**
 * The value `JSON.parse(canonicalJson(value))` gives, made without writing and reading the text:
 * its objects and arrays new, its strings shared (they cannot change), members in canonical order,
 * `undefined` members dropped and `undefined` items `null`, `-0` as `0`. For a value canonicalJson
 * takes.
 */
export function canonicalCopy(value: unknown): unknown {
  if (typeof value !== 'object' || value === null) return value === 0 ? 0 : value;
  if (Array.isArray(value)) return Array.from(value, (item) => (item === undefined ? null : canonicalCopy(item)));
  const members = value as Record<string, unknown>;
  const copy: Record<string, unknown> = {};
  for (const key of Object.keys(members).sort()) {
    const member = members[key];
    if (member === undefined) continue;
    // Defined, not assigned: a member named `__proto__` is data, as JSON.parse makes it, not the copy's prototype.
    Object.defineProperty(copy, key, {
      value: canonicalCopy(member),
      writable: true,
      enumerable: true,
      configurable: true,
    });
  }
  return copy;
}

/**
 * What a read of `json`, which is `canonicalJson(value)`, gives back: copied when the value holds a
 * large text (`LARGE_TEXT`), parsed otherwise (many small values parse quicker than they copy).
 */
export const readBack = (value: unknown, json: string): unknown =>
  json.length >= LARGE_TEXT && holdsLargeText(value) ? canonicalCopy(value) : JSON.parse(json);

/** Whether a string of at least `LARGE_TEXT` characters lies anywhere in the value; stops at the first. */
function holdsLargeText(value: unknown): boolean {
  if (typeof value === 'string') return value.length >= LARGE_TEXT;
  if (typeof value !== 'object' || value === null) return false;
  if (Array.isArray(value)) return value.some(holdsLargeText);
  // Not Object.values: on an object of many members (a dictionary to V8) it took three times as long.
  for (const key in value)
    if (Object.hasOwn(value, key) && holdsLargeText((value as Record<string, unknown>)[key])) return true;
  return false;
}
