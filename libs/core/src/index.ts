export * from './hashing/canonical-json.js';
export * from './hashing/hash-chain.js';
