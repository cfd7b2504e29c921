/** What each kind of value counts for in `approximateSize`. */
export interface SizeWeights {
  readonly character: number;
  /** A member of an object, besides its value, and each character of its name. */
  readonly member: number;
  readonly name: number;
  /** An object or array, besides its members. */
  readonly object: number;
  /** Any other value (a number, a boolean, `null`). */
  readonly value: number;
}

/** Data as the shared log feed's window measures it: its text, and a word for anything else. */
const DATA_WEIGHTS: SizeWeights = { character: 1, member: 0, name: 1, object: 8, value: 8 };

/**
 * Roughly what a value holds: its strings' characters, its objects, its other values and its members' names, each as
 * `weights` counts it. Iterative: data may nest deep. It reads members with `for…in` rather than `Object.entries`,
 * which made an array of pairs for every object: data of tens of thousands of members took 40 ms to estimate (issue
 * 15, fortieth round).
 */
export function approximateSize(data: unknown, weights: SizeWeights = DATA_WEIGHTS): number {
  let size = 0;
  const pending: unknown[] = [data];
  while (pending.length > 0) {
    const value = pending.pop();
    if (typeof value === 'string') size += value.length * weights.character;
    else if (typeof value !== 'object' || value === null) size += weights.value;
    else {
      size += weights.object;
      if (Array.isArray(value)) for (const item of value) pending.push(item);
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
