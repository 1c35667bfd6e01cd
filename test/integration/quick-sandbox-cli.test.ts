// `factory sandbox` as a developer types it in a terminal: the CLI starts the real
// app, which boots a real sandbox under QEMU with the fixture repository seeded;
// the shell opens in this terminal (a real pty through node-pty), `uname -a` and
// the seeded file print, and when the user exits the shell the sandbox is
// destroyed: no QEMU process is left and the task is closed. With --keep it stays
// until `factory destroy`. A CLI killed mid-shell takes its sandbox with it.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import * as pty from 'node-pty';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { z } from 'zod';
import { Task } from '../../common/domain.js';
import { qemuProcessesUnder } from '../e2e/support/processes.js';
import { cliArgs, runCli, stopApp } from '../support/cli.js';
import { testImage } from '../support/image.js';
import { makeRepo, type FixtureRepo } from '../support/repo.js';

let dataDir: string;
let repo: FixtureRepo;

beforeAll(async () => {
  await testImage();
  dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'fquick-'));
  repo = await makeRepo({ files: { 'NOTE.md': 'seeded-from-the-host\n' } });
});

afterAll(async () => {
  if (dataDir) {
    await stopApp(dataDir);
    for (const p of qemuProcessesUnder(dataDir)) process.kill(p.pid, 'SIGKILL'); // never leave one behind
    fs.rmSync(dataDir, { recursive: true, force: true });
  }
  repo?.cleanup();
});

/** `factory sandbox …` in a real pty, from the repository's parent folder (a relative path is the user's). */
function sandboxInPty(args: string[]) {
  const term = pty.spawn(process.execPath, cliArgs('--data-dir', dataDir, 'sandbox', ...args), {
    cols: 100,
    rows: 30,
    cwd: path.dirname(repo.dir),
    env: process.env as Record<string, string>,
  });
  let out = '';
  term.onData((d) => (out += d));
  const exited = new Promise<number>((r) => term.onExit((e) => r(e.exitCode)));
  const waitFor = async (re: RegExp, ms = 60_000) => {
    const end = Date.now() + ms;
    while (!re.test(out) && Date.now() < end) await new Promise((r) => setTimeout(r, 50));
    expect(out, JSON.stringify(out.slice(-600))).toMatch(re);
  };
  return { term, exited, waitFor, output: () => out };
}

async function tasks(): Promise<Task[]> {
  const r = await runCli(dataDir, ['ls', '--json']);
  return z.array(Task).parse(JSON.parse(r.stdout));
}

describe('factory sandbox on a real VM', () => {
  it('boots a quick sandbox with the repository, opens its shell here, and destroys it when the shell exits', async () => {
    const s = sandboxInPty([path.basename(repo.dir)]);
    try {
      await s.waitFor(/sandbox running/, 8 * 60_000);
      s.term.write('uname -a\r');
      await s.waitFor(/Linux \S+ \d+\.\d+\S* .*GNU\/Linux/);
      s.term.write('cat /work/repo/NOTE.md\r');
      await s.waitFor(/seeded-from-the-host/);
      expect(qemuProcessesUnder(dataDir)).toHaveLength(1);
      s.term.write('exit\r');
      expect(await s.exited).toBe(0);
    } finally {
      s.term.kill();
    }
    const quick = (await tasks()).filter((t) => t.kind === 'quick');
    expect(quick).toHaveLength(1);
    expect(quick[0]!.repoPath).toBe(repo.dir);
    // The app destroys it once the shell ended; it happens right after, not in some later sweep.
    await expect.poll(async () => (await tasks()).find((t) => t.id === quick[0]!.id)?.phase, { timeout: 60_000, interval: 500 }).toBe('closed');
    expect((await tasks()).find((t) => t.id === quick[0]!.id)?.sandbox.status).toBe('destroyed');
    await expect.poll(() => qemuProcessesUnder(dataDir).length, { timeout: 30_000 }).toBe(0);
  });

  it('with --keep and no repository the sandbox outlives its shell until factory destroy', async () => {
    const s = sandboxInPty(['--keep']);
    try {
      // Without a repository the shell may be the one the restore started, ready before the sandbox runs.
      await s.waitFor(/sandbox running|shell ready; the sandbox is still starting/, 8 * 60_000);
      s.term.write('uname -a; ls /work/repo || echo NO-REPO\r');
      await s.waitFor(/GNU\/Linux[\s\S]*NO-REPO/);
      s.term.write('exit\r');
      expect(await s.exited).toBe(0);
      await s.waitFor(/kept; `factory destroy \w+` ends it/);
    } finally {
      s.term.kill();
    }
    // Its shell may have ended before it finished starting: it runs all the same.
    await expect.poll(async () => (await tasks()).find((t) => t.kind === 'quick' && t.keep)?.phase, { timeout: 60_000, interval: 250 }).toBe('running');
    const kept = (await tasks()).find((t) => t.kind === 'quick' && t.keep);
    expect(kept).toMatchObject({ phase: 'running', sandbox: { status: 'running' }, repoPath: '' });
    // Still running a few seconds later: nothing destroyed it behind the user's back.
    await new Promise((r) => setTimeout(r, 3000));
    expect(qemuProcessesUnder(dataDir)).toHaveLength(1);
    const d = await runCli(dataDir, ['destroy', kept!.id, '--json']);
    expect(d.code, d.stderr).toBe(0);
    expect(Task.parse(JSON.parse(d.stdout))).toMatchObject({ phase: 'closed', sandbox: { status: 'destroyed' } });
    await expect.poll(() => qemuProcessesUnder(dataDir).length, { timeout: 30_000 }).toBe(0);
  });

  it('a factory sandbox killed while its shell is open leaves no sandbox running', async () => {
    const s = sandboxInPty([]);
    let id: string | undefined;
    try {
      await s.waitFor(/sandbox running|shell ready; the sandbox is still starting/, 8 * 60_000);
      s.term.write('echo UP-$((6*7))\r');
      await s.waitFor(/UP-42/);
      // It may still be starting: its shell can come before it runs.
      id = (await tasks()).find((t) => t.kind === 'quick' && t.phase !== 'closed')?.id;
      expect(id).toBeDefined();
      expect(qemuProcessesUnder(dataDir)).toHaveLength(1);
      // The terminal is closed under it: the CLI gets no chance to exit the shell.
      process.kill(s.term.pid, 'SIGKILL');
      await s.exited;
    } finally {
      s.term.kill();
    }
    await expect.poll(async () => (await tasks()).find((t) => t.id === id)?.phase, { timeout: 60_000, interval: 500 }).toBe('closed');
    await expect.poll(() => qemuProcessesUnder(dataDir).length, { timeout: 30_000 }).toBe(0);
  });

  it('names a folder that is not a repository', async () => {
    const notRepo = fs.mkdtempSync(path.join(os.tmpdir(), 'fquick-not-a-repo-'));
    try {
      const r = await runCli(dataDir, ['sandbox', notRepo]);
      expect(r.code).not.toBe(0);
      expect(r.stderr).toContain(`${notRepo} is not a git repository`);
    } finally {
      fs.rmSync(notRepo, { recursive: true, force: true });
    }
  });
});
