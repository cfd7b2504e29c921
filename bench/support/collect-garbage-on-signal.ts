/**
 * Preloaded into a bench's service process, which runs with `--expose-gc`: SIGUSR2 runs a full
 * collection, so that a bench reads the service's heap without the garbage not yet collected.
 */
const { gc } = globalThis as { gc?: () => void };
if (!gc) throw new Error('collect-garbage-on-signal needs --expose-gc');
process.on('SIGUSR2', () => gc());
