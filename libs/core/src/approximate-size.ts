/** What each kind of value counts for in `approximateSize`. */
export interface SizeWeights {
  readonly character: number;
  /** A string, besides its characters. */
  readonly string: number;
  /** A member of an object, besides its value; and each character of its name. */
  readonly member: number;
  readonly name: number;
  /** An item of an array, besides its value. */
  readonly item: number;
  /** An object or array, besides its members. */
  readonly object: number;
  /** Any other value (a number, a boolean, `null`). */
  readonly value: number;
}

/** Data as the shared log feed's window measures it: its text, and a word for anything else. */
const DATA_WEIGHTS: SizeWeights = { character: 1, string: 0, member: 0, name: 1, item: 0, object: 8, value: 8 };

/** The least size of an object worth remembering in a memo: smaller ones cost less to measure than to look up. */
const MEMOIZED_FROM = 1_024;

/** Marks, on the walk's stack, where an object's members end: its size is then known. */
class Measured {
  constructor(
    readonly object: object,
    readonly sizeBefore: number,
  ) {}
}

/**
 * Roughly what a value holds: its strings' characters, its objects, its other values and its members' names, each as
 * `weights` counts it. Iterative: data may nest deep. It reads members with `for…in` rather than `Object.entries`,
 * which made an array of pairs for every object: data of tens of thousands of members took 40 ms to estimate (issue
 * 15, fortieth round). `memo`: sizes of objects measured before, by identity, which it adds to; for data measured
 * again and again that keeps large parts of it (a tool block rebuilt around the same arguments).
 */
export function approximateSize(
  data: unknown,
  weights: SizeWeights = DATA_WEIGHTS,
  memo?: WeakMap<object, number>,
): number {
  let size = 0;
  const pending: unknown[] = [data];
  while (pending.length > 0) {
    const value = pending.pop();
    if (typeof value === 'string') size += weights.string + value.length * weights.character;
    else if (value instanceof Measured) {
      const measured = size - value.sizeBefore;
      if (measured >= MEMOIZED_FROM) memo!.set(value.object, measured);
    } else if (typeof value !== 'object' || value === null) size += weights.value;
    else {
      const known = memo?.get(value);
      if (known !== undefined) {
        size += known;
        continue;
      }
      if (memo) pending.push(new Measured(value, size));
      size += weights.object;
      if (Array.isArray(value))
        for (const item of value) {
          size += weights.item;
          pending.push(item);
        }
      else
        for (const key in value) {
          if (!Object.hasOwn(value, key)) continue;
          size += weights.member + key.length * weights.name;
          pending.push((value as Record<string, unknown>)[key]);
        }
    }
  }
  return size;
}
