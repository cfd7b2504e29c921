import { LayeredMap } from './layered-map.js';
import { seededRandom } from './testing/seeded-random.js';

describe('LayeredMap', () => {
  it('a new version sees its own sets; the version it came from, and its siblings, do not', () => {
    const first = LayeredMap.from([
      ['a', 1],
      ['b', 2],
    ]);
    const second = first.writable().set('b', 20).set('c', 3);
    const sibling = first.writable().set('d', 4);
    expect([...first]).toEqual([
      ['a', 1],
      ['b', 2],
    ]);
    expect([...second]).toEqual([
      ['a', 1],
      ['b', 20],
      ['c', 3],
    ]);
    expect([...sibling]).toEqual([
      ['a', 1],
      ['b', 2],
      ['d', 4],
    ]);
    expect([first.size, second.size, sibling.size]).toEqual([2, 3, 3]);
    expect([second.has('c'), first.has('c'), second.get('c'), first.get('c')]).toEqual([true, false, 3, undefined]);
  });

  it("names the base's value a version's own hides, until the overlay is flattened", () => {
    const first = LayeredMap.from([
      ['a', 'one'],
      ['b', 'two'],
    ]);
    const second = first.writable().set('a', 'uno').set('b', 'two').set('c', 'three');
    expect(['a', 'b', 'c', 'd'].map((key) => second.shadowed(key))).toEqual(['one', undefined, undefined, undefined]);
    expect(first.shadowed('a')).toBeUndefined();
    let flattened = second;
    for (let key = 0; key < 40; key += 1) flattened = flattened.writable().set(`k${key}`, 'x');
    expect([flattened.get('a'), flattened.shadowed('a')]).toEqual(['uno', undefined]);
  });

  it('keeps insertion order through many versions, across flattening, as a copied Map would', () => {
    const random = seededRandom(7);
    let layered = LayeredMap.empty<number>();
    let reference = new Map<string, number>();
    const versions: [LayeredMap<number>, Map<string, number>][] = [];
    for (let step = 0; step < 3_000; step += 1) {
      const next = layered.writable();
      const copy = new Map(reference);
      for (let set = random(4); set >= 0; set -= 1) {
        // Mostly keys already there (a message's chunks), sometimes a new one.
        const key = random(5) === 0 || copy.size === 0 ? `k${copy.size}` : `k${random(copy.size)}`;
        next.set(key, step);
        copy.set(key, step);
      }
      layered = next;
      reference = copy;
      if (step % 97 === 0) versions.push([layered, reference]);
    }
    for (const [version, expected] of [...versions, [layered, reference] as const]) {
      expect([...version.entries()]).toEqual([...expected.entries()]);
      expect([...version.keys()]).toEqual([...expected.keys()]);
      expect([...version.values()]).toEqual([...expected.values()]);
      expect(version.size).toBe(expected.size);
      const seen: [string, number][] = [];
      version.forEach((value, key) => seen.push([key, value]));
      expect(seen).toEqual([...expected]);
    }
  });

  it('names every key whose value differs between two versions, with its place in order, and no more than either set', () => {
    const random = seededRandom(11);
    let previous = LayeredMap.from<number>(Array.from({ length: 400 }, (_, index) => [`k${index}`, -1]));
    let compared = 0;
    for (let step = 0; step < 2_000; step += 1) {
      const next = previous.writable();
      const set = new Set<string>();
      for (let count = random(3); count >= 0; count -= 1) {
        const key = random(10) === 0 ? `new${step}.${count}` : `k${random(previous.size)}`;
        next.set(key, step);
        set.add(key);
      }
      const changed = next.changedSince(previous);
      if (changed) {
        compared += 1;
        const order = [...next.keys()];
        const differing = order.filter((key) => next.get(key) !== previous.get(key));
        const named = changed.map(({ key }) => key);
        // Every key that differs is named, in insertion order, with its ordinal.
        expect(named.filter((key) => differing.includes(key))).toEqual(differing);
        for (const { key, ordinal } of changed) expect(order[ordinal - 1]).toBe(key);
        expect(changed.map(({ ordinal }) => ordinal)).toEqual(
          [...changed.map(({ ordinal }) => ordinal)].sort((a, b) => a - b),
        );
        expect(named.length).toBeLessThanOrEqual(2 * Math.sqrt(previous.size) + set.size + 40);
      }
      previous = next;
    }
    // Most pairs share their base; the rest were flattened in between and are compared in full.
    expect(compared).toBeGreaterThan(1_800);
  });

  it('asks for a full comparison across a flattening, or against a plain Map', () => {
    let version = LayeredMap.from([['a', 0]]);
    const start = version;
    while (version.changedSince(start) !== undefined) version = version.writable().set(`k${version.size}`, 1);
    expect(version.changedSince(start)).toBeUndefined();
    expect(version.changedSince(new Map(version))).toBeUndefined();
    expect([...version.keys()][0]).toBe('a');
  });

  it('compares sibling versions by what each set: a key only the earlier one set is named with its base ordinal', () => {
    const base = LayeredMap.from([
      ['a', 1],
      ['b', 2],
      ['c', 3],
    ]);
    const earlier = base.writable().set('b', 20).set('x', 9);
    const later = base.writable().set('c', 30);
    expect(later.changedSince(earlier)).toEqual([
      { key: 'b', ordinal: 2 },
      { key: 'c', ordinal: 3 },
    ]);
  });
});
