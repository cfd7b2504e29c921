import { createHash } from 'node:crypto';

/**
 * A second, naive RFC 9162 §2.1 implementation, straight from the definitions over leaf data
 * (MTH, PATH, SUBPROOF): what tests hold the real tree and proof routes against.
 */
const sha = (...parts: Uint8Array[]) => parts.reduce((hash, part) => hash.update(part), createHash('sha256')).digest();
const split = (n: number) => 2 ** Math.ceil(Math.log2(n) - 1);

export function naiveRoot(d: readonly Uint8Array[]): Buffer {
  if (d.length === 0) return sha();
  if (d.length === 1) return sha(Buffer.from([0]), d[0]);
  const k = split(d.length);
  return sha(Buffer.from([1]), naiveRoot(d.slice(0, k)), naiveRoot(d.slice(k)));
}

export function naiveInclusionProof(m: number, d: readonly Uint8Array[]): Buffer[] {
  if (d.length === 1) return [];
  const k = split(d.length);
  return m < k
    ? [...naiveInclusionProof(m, d.slice(0, k)), naiveRoot(d.slice(k))]
    : [...naiveInclusionProof(m - k, d.slice(k)), naiveRoot(d.slice(0, k))];
}

export function naiveConsistencyProof(m: number, d: readonly Uint8Array[]): Buffer[] {
  const subproof = (m: number, d: readonly Uint8Array[], whole: boolean): Buffer[] => {
    if (m === d.length) return whole ? [] : [naiveRoot(d)];
    const k = split(d.length);
    return m <= k
      ? [...subproof(m, d.slice(0, k), whole), naiveRoot(d.slice(k))]
      : [...subproof(m - k, d.slice(k), false), naiveRoot(d.slice(0, k))];
  };
  return m === d.length ? [] : subproof(m, d, true);
}
