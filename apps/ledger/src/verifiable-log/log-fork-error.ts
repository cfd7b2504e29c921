/**
 * The stored tree cannot be signed: it does not extend the last signed checkpoint (it was rewritten or rolled
 * back), or it lacks a node, or its size is past what a checkpoint stores, or the checkpoint table was flooded
 * (they were edited). Nothing is signed.
 */
export class LogForkError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'LogForkError';
  }
}
