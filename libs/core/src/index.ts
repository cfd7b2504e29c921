export * from './hashing/canonical-json.js';
export * from './hashing/hash-chain.js';
export * from './chunks/chunk-schemas.js';
export * from './chunks/snapshot-text.js';
export * from './blocks/message-block.js';
export * from './blocks/block-rules.js';
