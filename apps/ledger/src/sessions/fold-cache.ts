import { getHeapStatistics } from 'node:v8';

/**
 * Bytes, by `foldFootprint`'s estimate, that each cache of session folds may hold: the repository's (folds to decide
 * on) and the block projection's (folds to write rows from). A quarter of the heap each by default (decision 0068).
 */
export const FOLD_CACHE_BYTES = Symbol('FOLD_CACHE_BYTES');

export const defaultFoldCacheBytes = () => Math.floor(getHeapStatistics().heap_size_limit / 4);

/** Bytes the live hub's folds of the sessions it follows may hold together: an eighth of the heap. */
export const defaultLiveFoldBytes = () => Math.floor(getHeapStatistics().heap_size_limit / 8);

/** Sessions each cache holds at most, however small. */
export const MAX_CACHED_FOLDS = 5_000;
