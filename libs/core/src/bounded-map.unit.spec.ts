import { rememberNewest } from './bounded-map.js';

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
