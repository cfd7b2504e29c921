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

/**
 * A cache of what was used last, bounded in entries and in bytes as the caller sizes each value. The newest value is
 * kept even when it alone is larger than the byte bound, the others all dropped: it is the one in use, and one not
 * kept would be made again at each use.
 */
export class SizedCache<Key, Value> {
  private readonly entries = new Map<Key, { readonly value: Value; readonly bytes: number }>();
  private heldBytes = 0;

  constructor(
    private readonly maxEntries: number,
    private readonly maxBytes: number,
  ) {}

  get bytes(): number {
    return this.heldBytes;
  }

  get size(): number {
    return this.entries.size;
  }

  get(key: Key): Value | undefined {
    return this.entries.get(key)?.value;
  }

  has(key: Key): boolean {
    return this.entries.has(key);
  }

  /** Keeps `value` as the newest entry, dropping the oldest beyond the bounds. */
  set(key: Key, value: Value, bytes: number): void {
    // One size that is not a count would make every later comparison false: the cache would hold one entry forever.
    if (!Number.isFinite(bytes) || bytes < 0) throw new RangeError(`a cached value's size must be a count of bytes`);
    this.delete(key);
    this.entries.set(key, { value, bytes });
    this.heldBytes += bytes;
    for (const [oldest] of this.entries) {
      if (oldest === key || (this.entries.size <= this.maxEntries && this.heldBytes <= this.maxBytes)) break;
      this.delete(oldest);
    }
  }

  delete(key: Key): void {
    const entry = this.entries.get(key);
    if (!entry) return;
    this.entries.delete(key);
    this.heldBytes -= entry.bytes;
  }

  clear(): void {
    this.entries.clear();
    this.heldBytes = 0;
  }
}
