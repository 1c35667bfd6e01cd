// Copying the agent's scratch files out of the sandbox: what an agent (or an
// attacker) inside can leave in the artifacts folder, copied over real ssh2
// channels from a real bash (test/support/local-guest.ts stands in for the VM).
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { shellQuote } from '../../../common/shell-quote.js';
import { collectArtifacts, type RefusedArtifact } from '../../../main/pipeline/artifacts.js';
import { localGuest, type LocalGuest } from '../../support/local-guest.js';

let root: string;
let guestDir: string;
let dest: string;
let guest: LocalGuest;
beforeEach(async () => {
  root = fs.mkdtempSync(path.join(os.tmpdir(), 'artifacts-'));
  guestDir = path.join(root, 'artifacts');
  dest = path.join(root, 'dest');
  fs.mkdirSync(guestDir);
  fs.mkdirSync(dest);
  guest = await localGuest({ cwd: root });
});
afterEach(async () => {
  await guest.close();
  fs.rmSync(root, { recursive: true, force: true });
});

const plainArgv = (argv: string[]) => argv.map(shellQuote).join(' ');

async function collect(extra: { maxFiles?: number; maxFileBytes?: number; maxTotalBytes?: number } = {}) {
  const refused: RefusedArtifact[] = [];
  const copied = await collectArtifacts(guest.ssh, dest, { dir: guestDir, asAgentArgv: plainArgv, onRefused: (r) => refused.push(r), ...extra });
  return { copied, refused };
}

describe('collectArtifacts', () => {
  it('copies the plan and the review byte for byte', async () => {
    fs.writeFileSync(path.join(guestDir, 'PLAN.md'), '# Add a greeting\n\n1. write it\n');
    fs.writeFileSync(path.join(guestDir, 'REVIEW.md'), Buffer.from([0xff, 0x00, 0x41, 0x0a]));
    const { copied, refused } = await collect();
    expect(copied).toEqual([
      { name: 'PLAN.md', bytes: 30, truncated: false },
      { name: 'REVIEW.md', bytes: 4, truncated: false },
    ]);
    expect(refused).toEqual([]);
    expect(fs.readFileSync(path.join(dest, 'REVIEW.md'))).toEqual(Buffer.from([0xff, 0x00, 0x41, 0x0a]));
  });

  it('makes the destination folder when it is missing (the app empties it before every copy)', async () => {
    fs.rmSync(dest, { recursive: true });
    fs.writeFileSync(path.join(guestDir, 'PLAN.md'), '# Plan\n');
    const { copied } = await collect();
    expect(copied).toEqual([{ name: 'PLAN.md', bytes: 7, truncated: false }]);
    expect(fs.readFileSync(path.join(dest, 'PLAN.md'), 'utf8')).toBe('# Plan\n');
    expect(fs.statSync(dest).mode & 0o077).toBe(0);
  });

  it('lists the folder as the agent user even when the session starts in a folder that user cannot read', async () => {
    // As in the guest: the SSH session starts in root's home; the listing runs as the unprivileged user.
    const home = path.join(root, 'root-home');
    fs.mkdirSync(home, { mode: 0o700 });
    fs.chmodSync(root, 0o755);
    fs.chmodSync(guestDir, 0o755);
    fs.writeFileSync(path.join(guestDir, 'PLAN.md'), '# Plan\n', { mode: 0o644 });
    const inHome = await localGuest({ cwd: home });
    try {
      const asNobody = (argv: string[]) => `runuser -u nobody -- ${plainArgv(argv)}`;
      const copied = await collectArtifacts(inHome.ssh, dest, { dir: guestDir, asAgentArgv: asNobody });
      expect(copied).toEqual([{ name: 'PLAN.md', bytes: 7, truncated: false }]);
    } finally {
      await inHome.close();
    }
  });

  it('refuses names that are not plain, symlinks, folders and FIFOs, and copies the rest', async () => {
    fs.writeFileSync(path.join(guestDir, 'ok.md'), 'fine\n');
    fs.writeFileSync(path.join(guestDir, 'evil\nname.md'), 'x');
    fs.writeFileSync(path.join(guestDir, 'x$(id).md'), 'x');
    fs.writeFileSync(path.join(guestDir, 'r\u00e9sum\u00e9.md'), 'x');
    fs.writeFileSync(path.join(guestDir, '\x1b[2Jclear'), 'x');
    fs.symlinkSync('/etc/passwd', path.join(guestDir, 'passwd.md'));
    fs.mkdirSync(path.join(guestDir, 'sub'));
    execFileSync('mkfifo', [path.join(guestDir, 'pipe.md')]);
    const started = Date.now();
    const { copied, refused } = await collect();
    expect(Date.now() - started).toBeLessThan(10_000);
    expect(copied.map((c) => c.name)).toEqual(['ok.md']);
    expect(fs.readdirSync(dest)).toEqual(['ok.md']);
    const why = Object.fromEntries(refused.map((r) => [r.name, r.reason]));
    expect(why).toMatchObject({
      'evil\\x0aname.md': expect.stringContaining('not plain'),
      'x$(id).md': expect.stringContaining('not plain'),
      'résumé.md': expect.stringContaining('not plain'),
      '\\x1b[2Jclear': expect.stringContaining('not plain'),
      'passwd.md': 'not a regular file',
      sub: 'not a regular file',
      'pipe.md': 'not a regular file',
    });
    for (const r of refused) expect(r.name).not.toMatch(/[\x00-\x1f]/);
  });

  it('caps the count, each size and the total', async () => {
    for (let i = 0; i < 40; i++) fs.writeFileSync(path.join(guestDir, `f${String(i).padStart(2, '0')}.txt`), 'y'.repeat(10));
    const many = await collect();
    expect(many.copied.length).toBe(32);
    expect(many.refused.filter((r) => r.reason === 'more than 32 files').length).toBe(8);

    fs.rmSync(guestDir, { recursive: true });
    fs.rmSync(dest, { recursive: true });
    fs.mkdirSync(guestDir);
    fs.mkdirSync(dest);
    fs.writeFileSync(path.join(guestDir, 'a-big.log'), Buffer.alloc(3 * 1024 * 1024, 0x61));
    fs.writeFileSync(path.join(guestDir, 'b.md'), 'z'.repeat(600));
    fs.writeFileSync(path.join(guestDir, 'c.md'), 'z');
    const capped = await collect({ maxFileBytes: 1024 * 1024, maxTotalBytes: 1024 * 1024 + 500 });
    expect(capped.copied).toEqual([
      { name: 'a-big.log', bytes: 1024 * 1024, truncated: true },
      { name: 'b.md', bytes: 500, truncated: true },
    ]);
    expect(fs.statSync(path.join(dest, 'a-big.log')).size).toBe(1024 * 1024);
    expect(capped.refused).toEqual([{ name: 'c.md', reason: expect.stringContaining('already hold') }]);
  });

  it('a sandbox without the folder has no artifacts', async () => {
    fs.rmSync(guestDir, { recursive: true });
    expect(await collect()).toEqual({ copied: [], refused: [] });
  });
});
