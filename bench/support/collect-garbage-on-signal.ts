/**
 * Preloaded into a bench's service process, which runs with `--expose-gc`: SIGUSR2 runs a full
 * collection, so that a bench reads the service's heap without the garbage not yet collected.
 */
process.on('SIGUSR2', () => (globalThis as { gc?: () => void }).gc?.());
