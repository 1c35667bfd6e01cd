// A hooks session's working tree going one way into its sandbox before each
// routed command, as a user would see it: edits the agent made on this
// computer appear in the sandbox, a deleted file goes, a reverted file goes
// back, ignored files never travel, and nothing the sandbox changes comes
// back. The sandbox here is a real folder behind a real SSH server running
// real bash and tar (test/support/local-guest.ts): a VM cannot boot in a unit
// test; the Claude Code integration test does it with the real guest.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { WorkingTreeSync } from '../../../main/sessions/working-tree-sync.js';
import { localGuest, type LocalGuest } from '../../support/local-guest.js';
import { makeRepo, type FixtureRepo } from '../../support/repo.js';

let repo: FixtureRepo;
let sandbox: string;
let guest: LocalGuest;

beforeEach(async () => {
  repo = await makeRepo({ files: { 'README.md': '# r\n', 'src/a.js': 'a\n', '.gitignore': 'node_modules/\n*.log\n' } });
  sandbox = fs.mkdtempSync(path.join(os.tmpdir(), 'sync-sandbox-'));
  // The sandbox starts as the seed: the committed files.
  for (const f of ['README.md', 'src/a.js', '.gitignore']) {
    fs.mkdirSync(path.dirname(path.join(sandbox, f)), { recursive: true });
    fs.copyFileSync(path.join(repo.dir, f), path.join(sandbox, f));
  }
  guest = await localGuest({ cwd: sandbox });
});
afterEach(async () => {
  await guest.close();
  repo.cleanup();
  fs.rmSync(sandbox, { recursive: true, force: true });
});

const sync = (opts: { maxBytes?: number; maxFiles?: number } = {}) => new WorkingTreeSync(repo.dir, { ...opts, guest: { dir: sandbox, run: (s) => s } });
const inSandbox = (rel: string) => (fs.existsSync(path.join(sandbox, rel)) ? fs.readFileSync(path.join(sandbox, rel), 'utf8') : undefined);

describe('the working tree goes one way into the sandbox', () => {
  it('carries new, changed and deleted files, then only what changed since', async () => {
    const s = sync();
    repo.write('src/a.js', 'edited by the agent\n');
    repo.write('src/new file.js', 'new\n');
    fs.rmSync(path.join(repo.dir, 'README.md'));
    expect(await s.sync(guest.ssh)).toEqual({ sent: 2, removed: 1, bytes: 'edited by the agent\n'.length + 'new\n'.length });
    expect(inSandbox('src/a.js')).toBe('edited by the agent\n');
    expect(inSandbox('src/new file.js')).toBe('new\n');
    expect(inSandbox('README.md')).toBeUndefined();
    // Nothing changed: nothing travels, not even a command to the guest.
    const before = guest.commands.length;
    expect(await s.sync(guest.ssh)).toEqual({ sent: 0, removed: 0, bytes: 0 });
    expect(guest.commands.length).toBe(before);
  });

  it('a file the user reverted goes again; ignored files never travel', async () => {
    const s = sync();
    repo.write('src/a.js', 'changed\n');
    await s.sync(guest.ssh);
    repo.git('checkout', '--', 'src/a.js');
    repo.write('node_modules/x/index.js', 'host-only\n');
    repo.write('debug.log', 'host-only\n');
    expect((await s.sync(guest.ssh)).sent).toBe(1);
    expect(inSandbox('src/a.js')).toBe('a\n');
    expect(inSandbox('node_modules/x/index.js')).toBeUndefined();
    expect(inSandbox('debug.log')).toBeUndefined();
  });

  it('never brings back what the command changed in the sandbox', async () => {
    const s = sync();
    fs.writeFileSync(path.join(sandbox, 'src', 'a.js'), 'changed in the sandbox\n');
    fs.writeFileSync(path.join(sandbox, 'built.txt'), 'output\n');
    await s.sync(guest.ssh);
    expect(fs.readFileSync(path.join(repo.dir, 'src', 'a.js'), 'utf8')).toBe('a\n');
    expect(fs.existsSync(path.join(repo.dir, 'built.txt'))).toBe(false);
    // …and a file the sandbox changed is not overwritten unless the user changed it here.
    expect(inSandbox('src/a.js')).toBe('changed in the sandbox\n');
  });

  it('carries names with newlines, leading dashes and control characters as they are', async () => {
    const s = sync();
    const names = ['-rf', 'line\nbreak.txt', 'tab\there.txt', 'esc\u001b[31m.txt', 'ünïcödé.txt'];
    for (const n of names) repo.write(n, `${JSON.stringify(n)}\n`);
    expect((await s.sync(guest.ssh)).sent).toBe(names.length);
    for (const n of names) expect(inSandbox(n)).toBe(`${JSON.stringify(n)}\n`);
    fs.rmSync(path.join(repo.dir, '-rf'));
    expect((await s.sync(guest.ssh)).removed).toBe(1);
    expect(inSandbox('-rf')).toBeUndefined();
    expect(inSandbox('README.md')).toBe('# r\n');
  });

  it('carries a symlink as a link, not the file it points at', async () => {
    const s = sync();
    const secret = path.join(os.tmpdir(), `outside-${process.pid}`);
    fs.writeFileSync(secret, 'host secret\n');
    try {
      fs.symlinkSync(secret, path.join(repo.dir, 'link'));
      await s.sync(guest.ssh);
      expect(fs.lstatSync(path.join(sandbox, 'link')).isSymbolicLink()).toBe(true);
      expect(fs.readlinkSync(path.join(sandbox, 'link'))).toBe(secret);
    } finally {
      fs.rmSync(secret, { force: true });
    }
  });

  it('over the limits, sends nothing and names the largest files', async () => {
    repo.write('big.bin', 'x'.repeat(4096));
    repo.write('small.txt', 'y');
    await expect(sync({ maxBytes: 1024 }).sync(guest.ssh)).rejects.toThrow(/too large.*"big\.bin" \(0\.0 MiB\).*did not run/s);
    expect(inSandbox('big.bin')).toBeUndefined();
    expect(inSandbox('small.txt')).toBeUndefined();
    for (let i = 0; i < 5; i++) repo.write(`f${i}.txt`, 'z');
    await expect(sync({ maxFiles: 3 }).sync(guest.ssh)).rejects.toThrow(/at most 3 files/);
  });

  it('a sandbox that cannot take the files fails with its reason, and the next sync tries again', async () => {
    // The repository's folder in the sandbox is gone (a command removed it): the guest's own error comes back.
    const inner = path.join(sandbox, 'inner');
    const s = new WorkingTreeSync(repo.dir, { guest: { dir: inner, run: (c) => c } });
    repo.write('src/a.js', 'v2\n');
    await expect(s.sync(guest.ssh)).rejects.toThrow(/carrying the working tree's changes into the sandbox failed \(exit \d+\): .*(No such file|can't cd)/);
    fs.mkdirSync(inner);
    expect((await s.sync(guest.ssh)).sent).toBe(1);
    expect(fs.readFileSync(path.join(inner, 'src', 'a.js'), 'utf8')).toBe('v2\n');
  });

  it('travels with the command in one guest process, and a carry that did not arrive goes again', async () => {
    const s = sync();
    repo.write('src/a.js', 'with the command\n');
    fs.rmSync(path.join(repo.dir, 'README.md'));
    const carry = await s.take(guest.ssh);
    expect(carry).toMatchObject({ sent: 1, removed: 1, remove: ['README.md'] });
    // Lost on the way (the guest was gone): rolled back, the next take carries the same again.
    carry.rollback();
    const again = await s.take(guest.ssh);
    expect(again).toMatchObject({ sent: 1, removed: 1 });
    // The command's own guest process removes, unpacks, then runs the command.
    const before = guest.commands.length;
    const ch = await guest.ssh.exec(`rm -f -- ${again.remove.map((p) => `'${p}'`).join(' ')} && tar -x -f - --no-same-owner && cat src/a.js`);
    let out = '';
    ch.on('data', (d: Buffer) => (out += d.toString('utf8')));
    const closed = new Promise((r) => ch.on('close', r));
    await again.feed!(ch);
    await closed;
    expect(guest.commands.length - before).toBe(1);
    expect(out).toBe('with the command\n');
    expect(inSandbox('README.md')).toBeUndefined();
    // Arrived: nothing more to carry.
    const none = await s.take(guest.ssh);
    expect(none).toMatchObject({ sent: 0, removed: 0, remove: [] });
    expect(none.feed).toBeUndefined();
  });
});
