/** Types for abandoned-test-folders.mjs, which Jest's global setup loads as it is (its spec imports it). */
export const TEST_FOLDER_PREFIX: string;
export function removeAbandonedTestFolders(directory: string, now?: number): Promise<string[]>;
