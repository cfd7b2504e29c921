/**
 * An insertion-ordered map whose versions share their entries: a version is a flat map it shares
 * with other versions (its base, never changed once made) and the entries set since (its own
 * overlay). Making a new version copies the overlay only, and flattens it into a new base once it
 * has grown past about the square root of the base: each version costs O(√n), not O(n). A session's
 * messages are held in one, so that a batch of chunks for a session of thousands of messages does
 * not copy them all, three times (decision, projection, live hub), and its change set needs no walk
 * over them all (`changedSince`). Entries are never removed. Values are never `undefined` or `null`:
 * a version's own value is told from the base's with `??`, one lookup on the hot path instead of two.
 */
export class LayeredMap<Value> implements ReadonlyMap<string, Value> {
  /** Creation ordinal (1-based) of each key of a base, made the first time a version of it is asked. */
  private static readonly ordinals = new WeakMap<ReadonlyMap<string, unknown>, ReadonlyMap<string, number>>();

  // ES private fields: not own enumerable properties, so two versions that hold the same entries
  // compare equal however they are layered (deep equality in tests).
  readonly #base: ReadonlyMap<string, Value>;
  readonly #overlay: Map<string, Value>;
  /** How many of the overlay's keys are not in the base. */
  #added: number;

  private constructor(base: ReadonlyMap<string, Value>, overlay: Map<string, Value>, added: number) {
    this.#base = base;
    this.#overlay = overlay;
    this.#added = added;
  }

  static empty<Value>(): LayeredMap<Value> {
    return new LayeredMap<Value>(new Map(), new Map(), 0);
  }

  static from<Value>(entries: Iterable<readonly [string, Value]>): LayeredMap<Value> {
    return new LayeredMap<Value>(new Map(entries), new Map(), 0);
  }

  /** A new version to change in place with `set`: the caller's own until it hands it out. */
  writable(): LayeredMap<Value> {
    if (this.#overlay.size * this.#overlay.size > Math.max(1_024, this.#base.size)) {
      // The entries' order: the base's keys (an overlay's set keeps an existing key's place), then the added ones.
      const flat = new Map(this.#base);
      for (const [key, value] of this.#overlay) flat.set(key, value);
      return new LayeredMap<Value>(flat, new Map(), 0);
    }
    return new LayeredMap<Value>(this.#base, new Map(this.#overlay), this.#added);
  }

  /** Only on a version from `writable` (or `from`) that no one else sees yet: versions share their bases. */
  set(key: string, value: Value): this {
    if (!this.#overlay.has(key) && !this.#base.has(key)) this.#added += 1;
    this.#overlay.set(key, value);
    return this;
  }

  get size(): number {
    return this.#base.size + this.#added;
  }

  get(key: string): Value | undefined {
    return this.#overlay.get(key) ?? this.#base.get(key);
  }

  /**
   * The base's value this version's own hides: no longer this version's, but held in memory while the base is (until
   * the overlay is flattened). `undefined` when the key's value is the base's or the base has none.
   */
  shadowed(key: string): Value | undefined {
    const base = this.#base.get(key);
    return base !== undefined && this.#overlay.has(key) && this.#overlay.get(key) !== base ? base : undefined;
  }

  has(key: string): boolean {
    return this.#overlay.has(key) || this.#base.has(key);
  }

  /** In insertion order: the base's keys with their values as of this version, then the keys added since. */
  *entries(): MapIterator<[string, Value]> {
    for (const [key, value] of this.#base) yield [key, this.#overlay.get(key) ?? value];
    if (this.#added === 0) return;
    for (const [key, value] of this.#overlay) if (!this.#base.has(key)) yield [key, value];
  }

  *keys(): MapIterator<string> {
    for (const [key] of this.entries()) yield key;
  }

  *values(): MapIterator<Value> {
    for (const [, value] of this.entries()) yield value;
  }

  [Symbol.iterator](): MapIterator<[string, Value]> {
    return this.entries();
  }

  forEach(callback: (value: Value, key: string, map: ReadonlyMap<string, Value>) => void, thisArg?: unknown): void {
    for (const [key, value] of this.entries()) callback.call(thisArg, value, key, this);
  }

  /**
   * The keys of this version whose values may differ from `earlier`'s, with their places in
   * insertion order (from 1), in that order: when both stand on the same base, only the keys either
   * set since (any other has the same value in both). `undefined` when they do not: compare them all.
   */
  changedSince(earlier: ReadonlyMap<string, Value>): { readonly key: string; readonly ordinal: number }[] | undefined {
    if (!(earlier instanceof LayeredMap) || earlier.#base !== this.#base) return undefined;
    let ordinals = LayeredMap.ordinals.get(this.#base);
    if (!ordinals) {
      ordinals = new Map(Array.from(this.#base.keys(), (key, index) => [key, index + 1]));
      LayeredMap.ordinals.set(this.#base, ordinals);
    }
    const changed = new Map<string, number>();
    let added = this.#base.size;
    for (const key of this.#overlay.keys()) changed.set(key, ordinals.get(key) ?? ++added);
    // A key `earlier` set that this version did not (a sibling version): its base value here.
    for (const key of earlier.#overlay.keys()) {
      const ordinal = ordinals.get(key);
      if (ordinal !== undefined && !changed.has(key)) changed.set(key, ordinal);
    }
    return Array.from(changed, ([key, ordinal]) => ({ key, ordinal })).sort((a, b) => a.ordinal - b.ordinal);
  }

  get [Symbol.toStringTag](): string {
    return 'LayeredMap';
  }
}
