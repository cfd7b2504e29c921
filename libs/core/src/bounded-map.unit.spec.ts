import { rememberNewest, SizedCache } from './bounded-map.js';

describe('rememberNewest', () => {
  it('keeps the most recently set entries, a key set again counting as new', () => {
    const map = new Map<string, number>();
    for (const key of ['a', 'b', 'c']) rememberNewest(map, key, 1, 3);
    rememberNewest(map, 'a', 2, 3);
    rememberNewest(map, 'd', 1, 3);
    expect([...map]).toEqual([
      ['c', 1],
      ['a', 2],
      ['d', 1],
    ]);
  });

  it('drops every entry beyond a bound lowered since', () => {
    const map = new Map([...'abcde'].map((key) => [key, 0]));
    rememberNewest(map, 'f', 0, 2);
    expect([...map.keys()]).toEqual(['e', 'f']);
  });
});

describe('SizedCache', () => {
  it('drops the oldest entries beyond its bytes, a key set again counting as new with its new size', () => {
    const cache = new SizedCache<string, string>(10, 100);
    cache.set('a', 'A', 40);
    cache.set('b', 'B', 40);
    cache.set('a', 'A2', 30);
    cache.set('c', 'C', 40);
    expect([cache.has('a'), cache.has('b'), cache.has('c'), cache.bytes]).toEqual([true, false, true, 70]);
    expect(cache.get('a')).toBe('A2');
  });

  it('drops the oldest beyond its entries, and keeps a value larger than all its bytes alone', () => {
    const cache = new SizedCache<string, number>(2, 100);
    for (const key of 'abc') cache.set(key, 1, 1);
    expect([cache.size, cache.has('a')]).toEqual([2, false]);
    cache.set('huge', 1, 101);
    expect([cache.has('huge'), cache.has('b'), cache.has('c'), cache.bytes]).toEqual([true, false, false, 101]);
    cache.set('d', 1, 1);
    expect([cache.has('huge'), cache.has('d'), cache.bytes]).toEqual([false, true, 1]);
    cache.clear();
    expect([cache.size, cache.bytes]).toEqual([0, 0]);
  });

  it('refuses a size that is not a count of bytes, keeping what it held', () => {
    const cache = new SizedCache<string, number>(10, 100);
    cache.set('a', 1, 10);
    for (const bytes of [NaN, -1, Infinity]) expect(() => cache.set('b', 1, bytes)).toThrow(RangeError);
    expect([cache.has('a'), cache.has('b'), cache.bytes]).toEqual([true, false, 10]);
  });
});
