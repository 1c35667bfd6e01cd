// known_hosts as OpenSSH writes it: entries made by ssh-keygen itself (hashed
// with -H), non-default ports, wildcards, negation and @revoked.
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { lookupKnownHosts } from '../../../main/remote/known-hosts.js';

let dir: string;
let line: string;
let other: string;
const blobOf = (l: string) => Buffer.from(l.trim().split(/\s+/)[1]!, 'base64');

beforeAll(() => {
  dir = fs.mkdtempSync(path.join(os.tmpdir(), 'known-hosts-'));
  execFileSync('ssh-keygen', ['-q', '-t', 'ed25519', '-N', '', '-f', path.join(dir, 'a')]);
  execFileSync('ssh-keygen', ['-q', '-t', 'ed25519', '-N', '', '-f', path.join(dir, 'b')]);
  line = fs.readFileSync(path.join(dir, 'a.pub'), 'utf8').trim().split(/\s+/).slice(0, 2).join(' ');
  other = fs.readFileSync(path.join(dir, 'b.pub'), 'utf8').trim().split(/\s+/).slice(0, 2).join(' ');
});
afterAll(() => fs.rmSync(dir, { recursive: true, force: true }));

/** Hashes a known_hosts text with ssh-keygen -H, as `HashKnownHosts yes` leaves it. */
function hashed(text: string): string {
  const file = path.join(dir, 'kh');
  fs.writeFileSync(file, text);
  execFileSync('ssh-keygen', ['-H', '-f', file], { stdio: 'ignore' });
  return fs.readFileSync(file, 'utf8');
}

describe('the user\u2019s known_hosts', () => {
  it('vouches for the listed key of a host, plain and hashed, on port 22 and another', () => {
    const key = blobOf(line);
    expect(lookupKnownHosts(`kvm.example.org ${line}\n`, 'kvm.example.org', 22, key)).toBe('match');
    expect(lookupKnownHosts(`[127.0.0.1]:2222 ${line}\n`, '127.0.0.1', 2222, key)).toBe('match');
    const h = hashed(`[127.0.0.1]:2222 ${line}\nkvm.example.org ${line}\n`);
    expect(h).toMatch(/^\|1\|/);
    expect(lookupKnownHosts(h, '127.0.0.1', 2222, key)).toBe('match');
    expect(lookupKnownHosts(h, 'kvm.example.org', 22, key)).toBe('match');
  });

  it('does not take an entry for another port or host as this one', () => {
    const key = blobOf(line);
    expect(lookupKnownHosts(`127.0.0.1 ${line}\n`, '127.0.0.1', 2222, key)).toBe('unknown');
    expect(lookupKnownHosts(hashed(`[127.0.0.1]:2223 ${line}\n`), '127.0.0.1', 2222, key)).toBe('unknown');
    expect(lookupKnownHosts(`kvm.example.org.evil ${line}\n`, 'kvm.example.org', 22, key)).toBe('unknown');
  });

  it('says mismatch when the host is listed only with another key (plain and hashed)', () => {
    const key = blobOf(line);
    expect(lookupKnownHosts(`kvm ${other}\n`, 'kvm', 22, key)).toBe('mismatch');
    expect(lookupKnownHosts(hashed(`[127.0.0.1]:2222 ${other}\n`), '127.0.0.1', 2222, key)).toBe('mismatch');
  });

  it('follows wildcards and negation, and a @revoked key is refused even when also listed', () => {
    const key = blobOf(line);
    expect(lookupKnownHosts(`*.example.org ${line}\n`, 'kvm.example.org', 22, key)).toBe('match');
    expect(lookupKnownHosts(`*.example.org,!kvm.example.org ${line}\n`, 'kvm.example.org', 22, key)).toBe('unknown');
    expect(lookupKnownHosts(`kvm ${line}\n@revoked * ${line}\n`, 'kvm', 22, key)).toBe('revoked');
  });

  it('ignores comments, garbage lines and certificate authorities', () => {
    const key = blobOf(line);
    expect(lookupKnownHosts(`# kvm ${line}\n\u0000\u0000\n|1|x|\n@cert-authority kvm ${line}\n`, 'kvm', 22, key)).toBe('unknown');
  });
});
