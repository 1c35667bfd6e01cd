// What the user's ~/.ssh/known_hosts says about a host key, as OpenSSH reads
// it: plain and hashed (|1|salt|hmac) host patterns, "[host]:port" for a port
// other than 22, comma lists, negation (!), wildcards and the @revoked marker.
// A listed key for the host vouches for it; a host listed only with other keys
// means the key changed (refused loudly by the caller); nothing listed: unknown.
import { createHmac } from 'node:crypto';
import { readFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';

export type KnownHostsVerdict = 'match' | 'mismatch' | 'revoked' | 'unknown';

const MAX_FILE = 4 * 1024 * 1024;

/** The name OpenSSH looks up: "host" on port 22, "[host]:port" otherwise. */
export function knownHostsName(host: string, port: number): string {
  return port === 22 ? host : `[${host}]:${port}`;
}

function hashedMatches(pattern: string, name: string): boolean {
  const [, magic, salt, hash] = pattern.split('|');
  if (magic !== '1' || !salt || !hash) return false;
  return createHmac('sha1', Buffer.from(salt, 'base64')).update(name).digest('base64') === hash;
}

function globMatches(pattern: string, name: string): boolean {
  if (!/[*?]/.test(pattern)) return pattern.toLowerCase() === name.toLowerCase();
  const re = new RegExp(`^${pattern.replace(/[.+^${}()|[\]\\]/g, '\\$&').replace(/\*/g, '.*').replace(/\?/g, '.')}$`, 'i');
  return re.test(name);
}

function hostMatches(field: string, name: string): boolean {
  if (field.startsWith('|')) return hashedMatches(field, name);
  let hit = false;
  for (const p of field.split(',')) {
    if (p.startsWith('!')) {
      if (globMatches(p.slice(1), name)) return false;
    } else if (globMatches(p, name)) hit = true;
  }
  return hit;
}

/** Looks the key (its type and wire blob) up for host:port in the text of a known_hosts file. */
export function lookupKnownHosts(text: string, host: string, port: number, keyBlob: Buffer): KnownHostsVerdict {
  const name = knownHostsName(host, port);
  let listed = false;
  let matched = false;
  for (const raw of text.split('\n')) {
    const line = raw.trim();
    if (!line || line.startsWith('#')) continue;
    const words = line.split(/\s+/);
    const marker = words[0]?.startsWith('@') ? words.shift() : undefined;
    const [hosts, , blob] = words;
    if (!hosts || !blob || marker === '@cert-authority') continue;
    if (!hostMatches(hosts, name)) continue;
    const same = Buffer.from(blob, 'base64').equals(keyBlob);
    if (marker === '@revoked') {
      if (same) return 'revoked';
      continue;
    }
    listed = true;
    if (same) matched = true;
  }
  return matched ? 'match' : listed ? 'mismatch' : 'unknown';
}

/** The user's known_hosts text ('' when there is none); HOME decides where, as for ssh. */
export async function readUserKnownHosts(home = process.env.HOME ?? os.homedir()): Promise<string> {
  const file = path.join(home, '.ssh', 'known_hosts');
  const text = await readFile(file, 'utf8').catch((err: NodeJS.ErrnoException) => {
    if (err.code === 'ENOENT') return '';
    throw err;
  });
  return text.length > MAX_FILE ? text.slice(0, MAX_FILE) : text;
}
