/** `value` when it is a whole number of one or more; otherwise a `RangeError` naming `name`. */
export function positiveInteger(name: string, value: number): number {
  if (!Number.isSafeInteger(value) || value < 1)
    throw new RangeError(`${name} must be a whole number of 1 or more, got ${value}`);
  return value;
}

/** How many events a read of the whole log takes: `maxCount` when given, else the adapter's page. Zero would read nothing, or everything. */
export const pageLimit = (maxCount: number | undefined, pageSize: number): number =>
  positiveInteger('maxCount', maxCount ?? pageSize);

/**
 * Where a page of `readAll` stops in bytes of its events' data (decision 0036): a bound on what a
 * read sends and holds, whatever the size of the events a client appended.
 */
export const DEFAULT_READ_PAGE_BYTES = 8 * 1024 * 1024;
