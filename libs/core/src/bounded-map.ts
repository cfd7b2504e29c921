/**
 * Sets an entry as the map's newest (a key already there moves to the end of its insertion order), dropping the
 * oldest beyond `bound`: a cache of what was used last.
 */
export function rememberNewest<Key, Value>(map: Map<Key, Value>, key: Key, value: Value, bound: number): void {
  map.delete(key);
  map.set(key, value);
  for (const [oldest] of map) {
    if (map.size <= bound) break;
    map.delete(oldest);
  }
}
