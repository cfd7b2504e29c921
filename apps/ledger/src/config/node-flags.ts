/**
 * The V8 flags the service and the rebuild CLI run with (`npm start`, `npm run rebuild`, the
 * benches' launcher). A young generation of up to 64 MiB a semi-space instead of V8's 16: a
 * request's or a projection batch's objects then die before a scavenge copies them, instead of
 * being copied and promoted to the old generation. Measured (decision 0034): garbage collection
 * per rebuilt event 1.5–1.9 → 0.6–0.9 µs, and the service's CPU at a 100-session fleet 82 → 71 %
 * of a core, for at most about 100 MiB more memory under load. A flag Node takes only on its
 * command line (or in NODE_OPTIONS): V8 sizes the heap when it starts.
 */
export const SERVICE_NODE_FLAGS: readonly string[] = ['--max-semi-space-size=64'];
