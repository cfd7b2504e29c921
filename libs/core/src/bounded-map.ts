/** Adds an entry to a map kept in insertion order as the newest, dropping the oldest beyond `bound`: a cache of what was seen last. */
export function rememberNewest<Key, Value>(map: Map<Key, Value>, key: Key, value: Value, bound: number): void {
  map.set(key, value);
  for (const [oldest] of map) {
    if (map.size <= bound) break;
    map.delete(oldest);
  }
}
