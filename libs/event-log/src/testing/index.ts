export * from './event-log.contract.js';
export * from './fixtures.js';
