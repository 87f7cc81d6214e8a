// The cryptography of agent pairing and of every later connection (workers/protocol/agent.ts
// gives the message flow). Pairing runs an X25519 key exchange and binds it to the one-time code
// through an HMAC over the transcript, keyed with scrypt(code, transcript):
//   - a passive listener learns neither the code nor the key (it never sees the shared secret);
//   - a replayed proof fails, because the agent's nonce and public key are fresh per connection;
//   - an active guesser gets one try per connection, each costing a slow scrypt, and the agent
//     retires the code after a few failures; 50 random bits make offline guessing of a captured
//     proof useless too.
// The long-lived key is HKDF(shared secret || code key, transcript); later connections prove it
// both ways with HMACs over fresh nonces, as the rank handshake does with the run secret.
// The agent's id and name are not in the transcript: it sends them only in pair-done, under its
// own MAC, once the controller has proved the code (a prober learns nothing about the machine).
import {
  createHash,
  createHmac,
  createPublicKey,
  diffieHellman,
  generateKeyPairSync,
  hkdfSync,
  type KeyObject,
  randomBytes,
  randomInt,
  scryptSync,
  timingSafeEqual,
} from 'node:crypto';
import { AGENT_PROTOCOL_VERSION } from './agent.js';

// ---- the pairing code: 10 Crockford base32 characters, shown as XXXXX-XXXXX ----
const CROCKFORD = '0123456789ABCDEFGHJKMNPQRSTVWXYZ';

export function newPairingCode(): string {
  let s = '';
  for (let i = 0; i < 10; i++) s += CROCKFORD[randomInt(32)];
  return `${s.slice(0, 5)}-${s.slice(5)}`;
}

/** What the user typed, as the 10 characters the agent generated; null when it cannot be one. */
export function normalizePairingCode(input: string): string | null {
  const s = input.toUpperCase().replace(/[\s-]/g, '').replace(/O/g, '0').replace(/[IL]/g, '1');
  if (s.length !== 10) return null;
  for (const ch of s) if (!CROCKFORD.includes(ch)) return null;
  return s;
}

// ---- X25519 ----
const SPKI_X25519_PREFIX = Buffer.from('302a300506032b656e032100', 'hex');

export interface EphemeralKey {
  privateKey: KeyObject;
  /** raw 32-byte public key, base64 */
  pub: string;
}

export function ephemeralKey(): EphemeralKey {
  const { privateKey, publicKey } = generateKeyPairSync('x25519');
  const der = publicKey.export({ format: 'der', type: 'spki' });
  return { privateKey, pub: der.subarray(der.length - 32).toString('base64') };
}

export function sharedSecret(own: EphemeralKey, peerPub: string): Buffer {
  const raw = Buffer.from(peerPub, 'base64');
  if (raw.length !== 32) throw new Error('peer public key is not 32 bytes');
  const publicKey = createPublicKey({ key: Buffer.concat([SPKI_X25519_PREFIX, raw]), format: 'der', type: 'spki' });
  return diffieHellman({ privateKey: own.privateKey, publicKey });
}

export const nonce = () => randomBytes(32).toString('hex');
export const newPeerId = () => randomBytes(16).toString('hex');

export interface PairTranscript {
  controllerId: string;
  controllerName: string;
  controllerPub: string;
  controllerNonce: string;
  agentPub: string;
  agentNonce: string;
}

function transcriptHash(t: PairTranscript): Buffer {
  const fields = [
    'shardwise-pair',
    `v${AGENT_PROTOCOL_VERSION}`,
    t.controllerId,
    t.controllerName,
    t.controllerPub,
    t.controllerNonce,
    t.agentPub,
    t.agentNonce,
  ];
  return createHash('sha256').update(fields.join('\n')).digest();
}

export interface PairingKeys {
  /** the controller's proof */
  controllerMac: string;
  /** the agent's proof, which also vouches for the id and name it reveals in pair-done */
  agentMac(agentId: string, agentName: string): string;
  /** the long-lived key both sides store (hex) */
  key: string;
}

/** Everything both sides compute from the transcript, the ECDH secret and the code. */
export function pairingKeys(t: PairTranscript, shared: Buffer, code: string): PairingKeys {
  const th = transcriptHash(t);
  const codeKey = scryptSync(code, th, 32, { N: 1 << 14, r: 8, p: 1 });
  const mac = (...parts: string[]) => createHmac('sha256', codeKey).update(parts.join('\n')).update(th).digest('hex');
  const key = Buffer.from(hkdfSync('sha256', Buffer.concat([shared, codeKey]), th, 'shardwise pairing key v2', 32)).toString('hex');
  return { controllerMac: mac('controller'), agentMac: (agentId, agentName) => mac('agent', agentId, agentName), key };
}

/** HMAC of a later connection's handshake, with the stored key. 'agent-hint' goes in the
 *  auth-challenge: a controller finds which of its paired agents answers by trying its keys, and
 *  nobody without a key learns the agent's id. */
export function authMac(
  keyHex: string,
  label: 'controller' | 'agent' | 'agent-hint',
  controllerId: string,
  agentId: string,
  controllerNonce: string,
  agentNonce: string,
): string {
  const text = ['shardwise-agent-auth', `v${AGENT_PROTOCOL_VERSION}`, label, controllerId, agentId, controllerNonce, agentNonce].join('\n');
  return createHmac('sha256', Buffer.from(keyHex, 'hex')).update(text).digest('hex');
}

export function macEquals(a: string, b: string): boolean {
  const x = Buffer.from(a, 'hex');
  const y = Buffer.from(b, 'hex');
  return x.length === 32 && y.length === 32 && timingSafeEqual(x, y);
}
