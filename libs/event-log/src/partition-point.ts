/**
 * The index of the first item for which `before` is false, in items where every item `before`
 * holds for comes first (a sorted array cut at a key): found by bisection.
 */
export function partitionPoint<Item>(items: readonly Item[], before: (item: Item) => boolean): number {
  let low = 0;
  let high = items.length;
  while (low < high) {
    const middle = (low + high) >>> 1;
    if (before(items[middle])) low = middle + 1;
    else high = middle;
  }
  return low;
}
