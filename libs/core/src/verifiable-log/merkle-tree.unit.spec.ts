import { readFileSync } from 'node:fs';
import { describe, expect, it } from '@jest/globals';
import {
  CompactRange,
  consistencyProofRanges,
  EMPTY_TREE_ROOT,
  inclusionProofRanges,
  leafHash,
  nodeMap,
  nodesForRanges,
  rangeHash,
  rangesAroundLeaves,
  rootWithLeaves,
  treeRoot,
  verifyConsistency,
  verifyInclusion,
  type Hash,
  type NodeId,
} from './merkle-tree.js';
import { naiveConsistencyProof, naiveInclusionProof, naiveRoot } from '../testing/naive-merkle.js';

/** transparency-dev/merkle's published RFC 6962 probes: one happy path and its mutations per case. */
interface Probes {
  inclusion: {
    file: string;
    leafIdx: number;
    treeSize: number;
    root: string;
    leafHash: string;
    proof: string[] | null;
    wantErr: boolean;
  }[];
  consistency: {
    file: string;
    size1: number;
    size2: number;
    root1: string;
    root2: string;
    proof: string[] | null;
    wantErr: boolean;
  }[];
}
const probes = JSON.parse(
  readFileSync(new URL('../testing/vectors/merkle/transparency-dev-probes.json', import.meta.url), 'utf8'),
) as Probes;
/** The happy paths of the numbered cases are proofs in the reference tree below (the others are made up). */
const onReferenceTree = (probe: { file: string }) => /^\w+\/\d\/happy-path\.json$/.test(probe.file);
const b64 = (value: string) => Buffer.from(value, 'base64');

/** The eight leaves of RFC 6962's reference tests, whose tree the probes describe. */
const REFERENCE_LEAVES = [
  '',
  '00',
  '10',
  '2021',
  '3031',
  '40414243',
  '5051525354555657',
  '606162636465666768696a6b6c6d6e6f',
].map((hex) => Buffer.from(hex, 'hex'));

function storeOf(leaves: Uint8Array[]) {
  const range = CompactRange.empty();
  const nodes: [NodeId, Hash][] = [];
  for (const leaf of leaves) nodes.push(...range.append(leafHash(leaf)));
  return { range, lookup: nodeMap(nodes) };
}

describe('RFC 9162 Merkle tree', () => {
  it('verifies every published inclusion probe as published (happy paths pass, mutations fail)', () => {
    for (const probe of probes.inclusion) {
      const check = () =>
        verifyInclusion(
          b64(probe.leafHash),
          BigInt(probe.leafIdx),
          BigInt(probe.treeSize),
          (probe.proof ?? []).map(b64),
          b64(probe.root),
        );
      if (probe.wantErr) expect(check).toThrow();
      else expect(check).not.toThrow();
    }
    expect(probes.inclusion.filter((probe) => !probe.wantErr).length).toBeGreaterThan(0);
  });

  it('verifies every published consistency probe as published', () => {
    for (const probe of probes.consistency) {
      const check = () =>
        verifyConsistency(
          BigInt(probe.size1),
          BigInt(probe.size2),
          (probe.proof ?? []).map(b64),
          b64(probe.root1),
          b64(probe.root2),
        );
      if (probe.wantErr) expect(check).toThrow();
      else expect(check).not.toThrow();
    }
  });

  it('builds the published happy-path proofs from the reference leaves', () => {
    const { lookup } = storeOf(REFERENCE_LEAVES);
    for (const probe of probes.inclusion.filter(onReferenceTree)) {
      const proof = inclusionProofRanges(BigInt(probe.leafIdx), BigInt(probe.treeSize)).map((range) =>
        rangeHash(range, lookup),
      );
      expect(proof.map((hash) => hash.toString('base64'))).toEqual(probe.proof ?? []);
      expect(treeRoot(BigInt(probe.treeSize), lookup).toString('base64')).toBe(probe.root);
    }
    for (const probe of probes.consistency.filter(onReferenceTree)) {
      const proof = consistencyProofRanges(BigInt(probe.size1), BigInt(probe.size2)).map((range) =>
        rangeHash(range, lookup),
      );
      expect(proof.map((hash) => hash.toString('base64'))).toEqual(probe.proof ?? []);
    }
  });

  it('agrees with a naive implementation on every proof of trees up to 40 leaves', () => {
    const leaves = Array.from({ length: 40 }, (_, i) => Buffer.from(`event ${i}`));
    const { range, lookup } = storeOf(leaves);
    expect(range.root()).toEqual(naiveRoot(leaves));
    for (let size = 1; size <= leaves.length; size++) {
      const tree = leaves.slice(0, size);
      const root = treeRoot(BigInt(size), lookup);
      expect(root).toEqual(naiveRoot(tree));
      for (let m = 0; m < size; m++) {
        const proof = inclusionProofRanges(BigInt(m), BigInt(size)).map((r) => rangeHash(r, lookup));
        expect(proof).toEqual(naiveInclusionProof(m, tree));
        verifyInclusion(leafHash(tree[m]), BigInt(m), BigInt(size), proof, root);
        expect(() => verifyInclusion(leafHash(Buffer.from('other')), BigInt(m), BigInt(size), proof, root)).toThrow();
      }
      for (let m = 1; m <= size; m++) {
        const proof = consistencyProofRanges(BigInt(m), BigInt(size)).map((r) => rangeHash(r, lookup));
        expect(proof).toEqual(naiveConsistencyProof(m, tree));
        verifyConsistency(BigInt(m), BigInt(size), proof, naiveRoot(leaves.slice(0, m)), root);
      }
    }
  });

  it('computes the root around any set of leaves from stored subtrees, and a changed leaf changes it', () => {
    const leaves = Array.from({ length: 37 }, (_, i) => Buffer.from(`event ${i}`));
    const { lookup } = storeOf(leaves);
    const root = naiveRoot(leaves);
    for (const picked of [[0], [36], [3, 4, 5, 30], leaves.map((_, i) => i), [7, 8, 9, 10, 11, 12, 13, 14, 15, 16]]) {
      const ours = new Map(picked.map((i) => [BigInt(i), leafHash(leaves[i])]));
      expect(rootWithLeaves(ours, 37n, lookup)).toEqual(root);
      const ranges = rangesAroundLeaves([...ours.keys()], 37n);
      expect(rootWithLeaves(ours, 37n, nodeMap(nodesForRanges(ranges).map((node) => [node, lookup(node)!])))).toEqual(
        root,
      );
      ours.set(BigInt(picked[0]), leafHash(Buffer.from('changed')));
      expect(rootWithLeaves(ours, 37n, lookup)).not.toEqual(root);
    }
  });

  it('refuses consistency between a tree and a rewritten one', () => {
    const leaves = Array.from({ length: 13 }, (_, i) => Buffer.from(`event ${i}`));
    const rewritten = leaves.map((leaf, i) => (i === 4 ? Buffer.from('rewritten') : leaf));
    const { lookup } = storeOf(rewritten);
    const proof = consistencyProofRanges(7n, 13n).map((r) => rangeHash(r, lookup));
    expect(() => verifyConsistency(7n, 13n, proof, naiveRoot(leaves.slice(0, 7)), naiveRoot(rewritten))).toThrow(
      /first root/,
    );
  });

  it('picks up a stored tree where it stopped', () => {
    const leaves = Array.from({ length: 23 }, (_, i) => Buffer.from(`event ${i}`));
    const { lookup } = storeOf(leaves.slice(0, 11));
    const resumed = CompactRange.of(11n, lookup);
    for (const leaf of leaves.slice(11)) resumed.append(leafHash(leaf));
    expect(resumed.root()).toEqual(naiveRoot(leaves));
    expect(CompactRange.empty().root()).toEqual(EMPTY_TREE_ROOT);
  });
});
