// Jest runs in native ESM mode (NestJS 12 ships ESM only); ts-jest transpiles per file.
const shared = {
  extensionsToTreatAsEsm: ['.ts'],
  moduleNameMapper: {
    '^#core$': '<rootDir>/libs/core/src/index.ts',
    '^#event-log$': '<rootDir>/libs/event-log/src/index.ts',
    '^#event-log/testing$': '<rootDir>/libs/event-log/src/testing/index.ts',
    '^#event-log/eventstoredb$': '<rootDir>/libs/event-log/src/eventstoredb/eventstoredb-event-log.ts',
    '^(\\.{1,2}/.*)\\.js$': '$1',
  },
  transform: {
    '^.+\\.ts$': ['ts-jest', { useESM: true, tsconfig: '<rootDir>/tsconfig.json' }],
  },
  testEnvironment: 'node',
};

/** @type {import('jest').Config} */
export default {
  // Integration and e2e tests start real servers; no test waits on a fixed sleep, this only bounds a hang.
  testTimeout: 60_000,
  // Most suites wait on servers (PostgreSQL, the service, Chromium) rather than compute: two workers keep
  // both cores busy, where Jest's default (cores − 1) leaves one idle on a 2-core machine. A third is quicker on an
  // idle machine but slower, and times tests out, on a busy one (docs/benchmarks.md, forty-fourth issue-15 round).
  maxWorkers: 2,
  // A worker's heap grows with every test file it runs (each imports the modules afresh), to 2 GB by the
  // end of a run: collections then stall it for seconds, and it exits too slowly for Jest ("failed to
  // exit gracefully"). Jest replaces a worker that holds more than this after a test file.
  workerIdleMemoryLimit: '1GB',
  testSequencer: '<rootDir>/test/support/test-sequencer.mjs',
  globalSetup: '<rootDir>/test/support/global-setup.mjs',
  globalTeardown: '<rootDir>/test/support/global-teardown.mjs',
  projects: [
    {
      ...shared,
      displayName: 'unit',
      testMatch: ['<rootDir>/**/*.unit.spec.ts'],
      testPathIgnorePatterns: ['/node_modules/', '/dist/'],
    },
    {
      ...shared,
      displayName: 'int',
      testMatch: ['<rootDir>/**/*.int.spec.ts'],
      testPathIgnorePatterns: ['/node_modules/', '/dist/'],
    },
    {
      ...shared,
      displayName: 'e2e',
      testMatch: ['<rootDir>/**/*.e2e.spec.ts'],
      testPathIgnorePatterns: ['/node_modules/', '/dist/'],
    },
  ],
};
