import { findUnstorableJson, MAX_JSON_DEPTH } from './storable-json.js';

const nested = (depth: number): unknown => (depth === 0 ? 'leaf' : [nested(depth - 1)]);
const deepArray = (depth: number): unknown => JSON.parse(`${'['.repeat(depth)}${']'.repeat(depth)}`);

describe('findUnstorableJson', () => {
  it.each([
    ['plain JSON', { a: [1, 'two', null, true, { b: 'c' }] }],
    ['a paired surrogate (an emoji)', { text: 'ok \ud83d\ude00' }],
    ['characters beside NUL', { text: '\u0001\u001f\u007f\ufffd' }],
    [`nesting ${MAX_JSON_DEPTH} deep`, { field: nested(MAX_JSON_DEPTH - 1) }],
  ])('accepts %s', (_label, value) => expect(findUnstorableJson(value)).toBeUndefined());

  it.each([
    ['a NUL in a string', { a: [0, { b: 'x\u0000' }] }, ['a', 1, 'b'], 'NUL'],
    ['a lone high surrogate', { a: 'x\ud83d' }, ['a'], 'surrogate'],
    ['a lone low surrogate', ['\ude00x'], [0], 'surrogate'],
    ['a reversed pair', { a: '\ude00\ud83d' }, ['a'], 'surrogate'],
    ['a NUL in a key', { a: { 'k\u0000': 1 } }, ['a'], 'key'],
    ['a __proto__ key', JSON.parse('{"a":{"__proto__":{}}}'), ['a'], '__proto__'],
    [`nesting ${MAX_JSON_DEPTH + 1} deep`, { field: nested(MAX_JSON_DEPTH) }, ['field'], 'deeper'],
    ['nesting 100,000 deep, without recursing that far', { field: deepArray(100_000) }, ['field'], 'deeper'],
    [
      'a number too large for JSON (1e400 parses as Infinity)',
      JSON.parse('{"usage":{"tokens":1e400}}'),
      ['usage', 'tokens'],
      'finite',
    ],
  ])('refuses %s, naming where', (_label, value, path, words) => {
    const problem = findUnstorableJson(value);
    expect(problem?.path).toEqual(path);
    expect(problem?.message).toContain(words);
  });
});
