// Jest runs the test files that took longest last time first, so that no long one starts at the end of the run
// beside an idle worker. A fresh clone has no timings (they are kept per checkout path), and Jest then orders by
// file size, which puts short files of long runs (a memory flood, a lock through outages) near the end. Without
// timings, the tiers go in the order of what they cost: end-to-end, integration, unit, each by size as before.
import TestSequencer from '@jest/test-sequencer';

const tier = (path) => (path.endsWith('.e2e.spec.ts') ? 0 : path.endsWith('.int.spec.ts') ? 1 : 2);

export default class CostliestFirstSequencer extends TestSequencer {
  sort(tests) {
    const ordered = super.sort(tests);
    const untimed = ordered.filter((test) => test.duration == null && !this.hasFailed(test));
    const untimedSet = new Set(untimed);
    // A stable sort keeps Jest's order by size within each tier.
    const byTier = [...untimed].sort((a, b) => tier(a.path) - tier(b.path));
    let next = 0;
    return ordered.map((test) => (untimedSet.has(test) ? byTier[next++] : test));
  }
}
