/**
 * An immutable list that only grows at its end, appended to in O(1): a state and the states
 * folded from it share one array, each seeing its first `length` items (items below a list's
 * length never change). Appending to a list that is no longer the newest of its array (a branch:
 * a speculative decision, a fork) copies its items once. Copying the array on every append
 * made folding a message O(n²).
 */
export interface GrowingList<Item> {
  readonly length: number;
  /** Shared: may hold items of longer lists past `length`. */
  readonly items: readonly Item[];
}

export const emptyList = <Item>(): GrowingList<Item> => ({ length: 0, items: [] });

export function appendItem<Item>(list: GrowingList<Item>, item: Item): GrowingList<Item> {
  const items = list.items.length === list.length ? (list.items as Item[]) : list.items.slice(0, list.length);
  items.push(item);
  return { length: list.length + 1, items };
}

/** The item at `index` (0-based), `undefined` outside the list. */
export const itemAt = <Item>(list: GrowingList<Item>, index: number): Item | undefined =>
  index >= 0 && index < list.length ? list.items[index] : undefined;
