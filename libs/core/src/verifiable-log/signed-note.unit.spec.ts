import { generateKeyPairSync } from 'node:crypto';
import { describe, expect, it } from '@jest/globals';
import { openCheckpoint, signCheckpoint, statedCheckpoint } from './checkpoint.js';
import { openNote, parseVerifierKey, signNote, verifierKeyOf } from './signed-note.js';

const signerNamed = (name: string) => ({ name, privateKey: generateKeyPairSync('ed25519').privateKey });

describe('C2SP signed notes', () => {
  it('verifies the example of the signed-note specification', () => {
    const verifier = parseVerifierKey('example.com/foo+530d903a+AekyeRrm56hApGFkyQR4ZCbV54Id2LKaANYcrnKv3U2k');
    const note =
      'This is an example message.\n\n' +
      '\u2014 example.com/foo ' +
      'Uw2QOkn8srV1yJGh2VYRlL1Tnagv1YEq6TfXppzi2ONncAlTgK7Ztg1ERYNZXsYjOBH3mFXmRKuwHjG1Yu72IneyaQM=\n';
    expect(openNote(note, verifier)).toBe('This is an example message.\n');
    expect(() => openNote(note.replace('example message', 'example massage'), verifier)).toThrow(/does not verify/);
  });

  it('signs notes its own verifier key opens, and ignores other keys of the same name', () => {
    const signer = signerNamed('ledger.example/log');
    const note = signNote('hello\n', signer);
    expect(openNote(note, parseVerifierKey(verifierKeyOf(signer)))).toBe('hello\n');
    const impostor = parseVerifierKey(verifierKeyOf(signerNamed('ledger.example/log')));
    expect(() => openNote(note, impostor)).toThrow(/no signature of ledger.example\/log\+/);
  });

  it('reads at most 100 signature lines, as Go’s note package does, before checking one', () => {
    const signer = signerNamed('ledger.example/log');
    const verifier = parseVerifierKey(verifierKeyOf(signer));
    const note = signNote('hello\n', signer);
    const [text, own] = note.split('\n\n');
    const others = (count: number) => `${'\u2014 other.example/log AAAAAAAA\n'.repeat(count)}`;
    expect(openNote(`${text}\n\n${others(99)}${own}`, verifier)).toBe('hello\n');
    expect(() => openNote(`${text}\n\n${others(100)}${own}`, verifier)).toThrow(/at most 100 signatures/);
    expect(() => openNote(`${text}\n\n${others(2_000_000)}${own}`, verifier)).toThrow(/at most 100 signatures/);
  });

  it('refuses malformed verifier keys and key names', () => {
    expect(() => parseVerifierKey('name+530d903a')).toThrow(/<name>\+<key id>\+<key>/);
    expect(() => parseVerifierKey('example.com/bar+530d903a+AekyeRrm56hApGFkyQR4ZCbV54Id2LKaANYcrnKv3U2k')).toThrow(
      /does not match/,
    );
    expect(() => signNote('x\n', signerNamed('has space'))).toThrow(/no spaces/);
  });
});

describe('C2SP checkpoints', () => {
  it('round-trips origin, size and root, and refuses another origin or a re-signed one', () => {
    const signer = signerNamed('ledger.example/log');
    const rootHash = Buffer.alloc(32, 7);
    const note = signCheckpoint({ origin: signer.name, treeSize: 42n, rootHash }, signer);
    expect(note.split('\n').slice(0, 3)).toEqual(['ledger.example/log', '42', rootHash.toString('base64')]);
    expect(openCheckpoint(note, parseVerifierKey(verifierKeyOf(signer)))).toEqual({
      origin: signer.name,
      treeSize: 42n,
      rootHash,
    });
    const other = signerNamed('ledger.example/log');
    const resigned = signCheckpoint({ origin: other.name, treeSize: 42n, rootHash }, other);
    expect(() => openCheckpoint(resigned, parseVerifierKey(verifierKeyOf(signer)))).toThrow(/no signature/);
  });

  it('states what a note says with no key at hand, and refuses what is not a checkpoint note', () => {
    const signer = signerNamed('ledger.example/log');
    const rootHash = Buffer.alloc(32, 9);
    const note = signCheckpoint({ origin: signer.name, treeSize: 7n, rootHash }, signer);
    expect(statedCheckpoint(note)).toEqual({ origin: signer.name, treeSize: 7n, rootHash });
    expect(() => statedCheckpoint(note.replace('\n\n', '\n'))).toThrow(/a blank line/);
    expect(() => statedCheckpoint(note.replace('\n7\n', '\n07\n'))).toThrow(/not a decimal/);
    expect(() => statedCheckpoint(note.replace(rootHash.toString('base64'), 'AAAA'))).toThrow(/base64 SHA-256/);
  });
});
