import { createHash, createPrivateKey, createPublicKey, sign, verify, type KeyObject } from 'node:crypto';

/**
 * C2SP signed notes (c2sp.org/signed-note) with Ed25519 keys, and their verifier keys
 * (`<name>+<hex key id>+<base64(0x01 || public key)>`). Signing and verifying only: the caller
 * owns the key material.
 */
const ED25519_TYPE = 0x01;
const SIGNATURE_PREFIX = '\u2014 ';
/** DER prefixes that wrap a raw 32-byte Ed25519 key as SPKI / PKCS #8, which node:crypto reads. */
const SPKI_ED25519_PREFIX = Buffer.from('302a300506032b6570032100', 'hex');

export class NoteError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'NoteError';
  }
}

export interface NoteSigner {
  readonly name: string;
  readonly privateKey: KeyObject;
}

export interface NoteVerifier {
  readonly name: string;
  /** The 4-byte key id, as 8 lowercase hex digits. */
  readonly keyId: string;
  readonly publicKey: KeyObject;
}

/** C2SP key id: SHA-256(name || 0x0A || 0x01 || public key)[:4]. */
export function noteKeyId(name: string, rawPublicKey: Uint8Array): Buffer {
  return createHash('sha256')
    .update(`${name}\n`)
    .update(Buffer.from([ED25519_TYPE]))
    .update(rawPublicKey)
    .digest()
    .subarray(0, 4);
}

function rawPublicKey(key: KeyObject): Buffer {
  return key.export({ format: 'der', type: 'spki' }).subarray(SPKI_ED25519_PREFIX.length);
}

function checkKeyName(name: string): void {
  if (name.length === 0 || /[\s+]/u.test(name))
    throw new NoteError('a key name is non-empty and holds no spaces and no "+"');
}

/** The verifier key (vkey) of a signer. */
export function verifierKeyOf(signer: NoteSigner): string {
  checkKeyName(signer.name);
  const publicKey = rawPublicKey(createPublicKey(signer.privateKey));
  const keyId = noteKeyId(signer.name, publicKey).toString('hex');
  return `${signer.name}+${keyId}+${Buffer.concat([Buffer.from([ED25519_TYPE]), publicKey]).toString('base64')}`;
}

export function parseVerifierKey(vkey: string): NoteVerifier {
  // The key's base64 may hold `+` itself: only the first two separate.
  const [, name, keyId, encoded] = /^([^+]*)\+([^+]*)\+(.+)$/.exec(vkey.trim()) ?? [];
  if (name === undefined || keyId === undefined || encoded === undefined)
    throw new NoteError('a verifier key is <name>+<key id>+<key>');
  checkKeyName(name);
  const material = Buffer.from(encoded, 'base64');
  if (!/^[0-9a-f]{8}$/.test(keyId)) throw new NoteError('a verifier key id is 8 lowercase hex digits');
  if (material.length !== 33 || material[0] !== ED25519_TYPE)
    throw new NoteError('only Ed25519 verifier keys (type 0x01) are supported');
  if (noteKeyId(name, material.subarray(1)).toString('hex') !== keyId)
    throw new NoteError('the key id does not match the key');
  const publicKey = createPublicKey({
    key: Buffer.concat([SPKI_ED25519_PREFIX, material.subarray(1)]),
    format: 'der',
    type: 'spki',
  });
  return { name, keyId, publicKey };
}

/** Signs `text` (which ends in a newline) as a one-signature note. */
export function signNote(text: string, signer: NoteSigner): string {
  checkNoteText(text);
  checkKeyName(signer.name);
  const keyId = noteKeyId(signer.name, rawPublicKey(createPublicKey(signer.privateKey)));
  const signature = sign(null, Buffer.from(text, 'utf8'), signer.privateKey);
  return `${text}\n${SIGNATURE_PREFIX}${signer.name} ${Buffer.concat([keyId, signature]).toString('base64')}\n`;
}

interface NoteSignature {
  readonly name: string;
  /** The key id (4 bytes), then the signature. */
  readonly signature: Buffer;
}

/** A signed note's text and signatures, its form checked; no signature is checked. */
export function splitNote(note: string): { text: string; signatures: NoteSignature[] } {
  const split = note.lastIndexOf('\n\n');
  if (split < 0 || !note.endsWith('\n')) throw new NoteError('a signed note is text, a blank line and signature lines');
  const text = note.slice(0, split + 1);
  checkNoteText(text);
  const signatureLines = note.slice(split + 2, -1).split('\n', MAX_SIGNATURES + 1);
  if (signatureLines.length > MAX_SIGNATURES)
    throw new NoteError(`a note carries at most ${MAX_SIGNATURES} signatures`);
  return { text, signatures: signatureLines.map(signatureOf) };
}

/** As Go's `golang.org/x/mod/sumdb/note` reads notes: more signatures would be work spent on a forged note. */
const MAX_SIGNATURES = 100;

function signatureOf(line: string): NoteSignature {
  if (!line.startsWith(SIGNATURE_PREFIX)) throw new NoteError('a signature line starts with an em dash and a space');
  const [name, encoded, extra] = line.slice(SIGNATURE_PREFIX.length).split(' ');
  if (!name || !encoded || extra !== undefined) throw new NoteError('a signature line is "— <name> <signature>"');
  return { name, signature: Buffer.from(encoded, 'base64') };
}

/** The key ids (8 hex digits) of a signed note's signatures, in order; no signature is checked. */
export function signatureKeyIds(note: string): string[] {
  return splitNote(note).signatures.map(({ signature }) => signature.subarray(0, 4).toString('hex'));
}

/**
 * The text of `note` once `verifier`'s signature on it checks; throws why not. Signatures of other
 * keys are ignored.
 */
export function openNote(note: string, verifier: NoteVerifier): string {
  const { text, signatures } = splitNote(note);
  let known = false;
  for (const { name, signature } of signatures) {
    if (name !== verifier.name || signature.length < 4 || signature.subarray(0, 4).toString('hex') !== verifier.keyId)
      continue;
    known = true;
    if (!verify(null, Buffer.from(text, 'utf8'), verifier.publicKey, signature.subarray(4))) {
      throw new NoteError(`the signature of ${verifier.name} does not verify`);
    }
  }
  if (!known) throw new NoteError(`the note carries no signature of ${verifier.name}+${verifier.keyId}`);
  return text;
}

function checkNoteText(text: string): void {
  if (!text.endsWith('\n')) throw new NoteError('note text ends in a newline');
  // eslint-disable-next-line no-control-regex -- signed notes forbid control characters
  if (/[\u0000-\u0009\u000b-\u001f]/.test(text))
    throw new NoteError('note text holds no control characters but newlines');
}

/** Reads an Ed25519 private key (PKCS #8 PEM, as `openssl genpkey -algorithm ed25519` writes it). */
export function ed25519PrivateKey(pem: string): KeyObject {
  const key = createPrivateKey(pem);
  if (key.asymmetricKeyType !== 'ed25519') throw new NoteError('the signing key is not an Ed25519 key');
  return key;
}
