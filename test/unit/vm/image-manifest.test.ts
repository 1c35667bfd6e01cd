import { createHash } from 'node:crypto';
import { mkdtemp, readFile, rm, stat, writeFile, mkdir, cp } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { ImageBuilder } from '../../../main/vm/image-builder.js';
import { parseManifest, parsePackageList } from '../../../main/vm/image-manifest.js';
import { findRecipeDir, loadRecipe } from '../../../main/vm/image-recipe.js';
import { ImageStore } from '../../../main/vm/image-store.js';
import type { CommandRunner } from '../../../main/vm/process-runner.js';

const dirs: string[] = [];
async function tempDir() {
  const d = await mkdtemp(path.join(os.tmpdir(), 'img-test-'));
  dirs.push(d);
  return d;
}
afterEach(async () => {
  for (const d of dirs.splice(0)) {
    await import('node:child_process').then((cp) => cp.execFileSync('chmod', ['-R', 'u+w', d]));
    await rm(d, { recursive: true, force: true });
  }
});

/** Stands in for npm, tar, mmdebstrap and qemu-img by writing what each would produce. */
function fakeTools(opts: { failMmdebstrap?: boolean } = {}): { runner: CommandRunner; calls: string[][] } {
  const calls: string[][] = [];
  const ok = (stdout = '') => ({ code: 0, signal: null, tail: [], stdout, timedOut: false });
  const runner: CommandRunner = async (cmd, args, o) => {
    calls.push([cmd, ...args]);
    if (cmd === 'npm') {
      const dest = args[args.indexOf('--pack-destination') + 1]!;
      await writeFile(path.join(dest, 'pkg.tgz'), 'x');
      const version = args[1]!.split('@').pop();
      return ok(JSON.stringify([{ filename: 'pkg.tgz', version, integrity: 'sha512-abc' }]));
    }
    if (cmd === 'tar') {
      // Extracts the one member asked for (the last argument), as tar does.
      const dir = args[args.indexOf('-C') + 1]!;
      const member = path.join(dir, args[args.length - 1]!);
      await mkdir(path.dirname(member), { recursive: true });
      await writeFile(member, 'binary');
      return ok();
    }
    if (cmd === 'mv') {
      await cp(args[0]!, args[1]!);
      return ok();
    }
    if (cmd === 'mmdebstrap') {
      const hook = args.find((a) => a.startsWith('--customize-hook='))!;
      // sh 'customize.sh' "$1" 'recipe dir' 'out dir' 'clis dir' size
      const out = [...hook.matchAll(/'([^']*)'/g)].map((m) => m[1]!)[2]!;
      for (const line of ['I: downloading packages with apt...', 'factory-step: configure', 'factory-step: disk']) o?.onLine?.(line);
      if (opts.failMmdebstrap) return { code: 25, signal: null, tail: ['E: setup failed: something broke'], stdout: '', timedOut: false };
      await writeFile(path.join(out, 'packages.tsv'), 'bash\t5.2.15-2+b7\ngit\t1:2.39.5-0+deb12u2\n');
      await writeFile(path.join(out, 'kernel-release'), '6.1.0-57-cloud-amd64\n');
      await writeFile(path.join(out, 'vmlinuz'), 'kernel');
      await writeFile(path.join(out, 'initrd.img'), 'initrd');
      await writeFile(path.join(out, 'disk.raw'), 'raw');
      return ok();
    }
    if (cmd === 'qemu-img' && args[0] === 'convert') {
      await writeFile(args[args.length - 1]!, 'qcow2');
      return ok();
    }
    if (cmd === 'qemu-img' && args[0] === 'info') return ok(JSON.stringify({ 'virtual-size': 8589934592 }));
    throw new Error(`unexpected ${cmd}`);
  };
  return { runner, calls };
}

describe('image manifest', () => {
  it('parses dpkg-query output sorted, and rejects malformed lines', () => {
    expect(parsePackageList('git\t1:2.39\nbash\t5.2\n\n')).toEqual([
      { name: 'bash', version: '5.2' },
      { name: 'git', version: '1:2.39' },
    ]);
    expect(() => parsePackageList('onlyname\n')).toThrow(/unexpected package list line/);
  });

  it('the recipe loads, pins its agent CLI, and its version changes with its files', async () => {
    const loaded = loadRecipe(findRecipeDir());
    expect(loaded.recipe.suite).toBe('bookworm');
    expect(loaded.recipe.packages).toEqual(expect.arrayContaining(['openssh-server', 'git', 'linux-image-cloud-amd64', 'initramfs-tools']));
    expect(loaded.recipe.agentClis[0]).toMatchObject({ npmPackage: '@anthropic-ai/claude-code-linux-x64', installAs: '/usr/local/bin/claude' });
    expect(loaded.recipe.agentClis[0]!.version).toMatch(/^\d+\.\d+\.\d+$/);
    const copy = await tempDir();
    await cp(loaded.dir, copy, { recursive: true });
    expect(loadRecipe(copy).version).toBe(loaded.version);
    await writeFile(path.join(copy, 'guest', 'sshd_config'), '# changed\n', { flag: 'a' });
    expect(loadRecipe(copy).version).not.toBe(loaded.version);
  });

  it('a build writes a valid manifest with checksums and packages, atomically and read-only', async () => {
    const imagesDir = await tempDir();
    const { runner, calls } = fakeTools();
    const store = new ImageStore({
      imagesDir,
      builder: new ImageBuilder({ runner, which: async (p) => `/usr/bin/${p}`, now: () => new Date('2026-01-02T03:04:05Z') }),
    });
    expect(store.status().state).toBe('missing');
    // An older build of the same recipe, read-only as built: replaced by the new one.
    const stale = path.join(imagesDir, 'debian-bookworm-r0-00000000');
    await mkdir(stale);
    await writeFile(path.join(stale, 'disk.qcow2'), 'old');
    await import('node:child_process').then((cp) => cp.execFileSync('chmod', ['-R', 'a-w', stale]));
    const progress: number[] = [];
    const steps: string[] = [];
    const image = await store.ensure((s) => {
      if (s.progress !== undefined) progress.push(s.progress);
      if (s.step) steps.push(s.step);
    });
    expect(store.status()).toMatchObject({ state: 'ready', version: store.version });
    expect(progress.every((p, i) => p >= 0 && p <= 1 && (i === 0 || p >= progress[i - 1]!))).toBe(true);
    expect(progress.at(-1)).toBe(1);
    expect(steps).toEqual(expect.arrayContaining(['fetching agent CLIs from npm', 'configuring the guest', 'making the ext4 disk (mkfs.ext4 -d)']));

    const manifest = parseManifest(JSON.parse(await readFile(path.join(image.dir, 'manifest.json'), 'utf8')));
    expect(manifest.version).toBe(store.version);
    expect(manifest.packages).toEqual([
      { name: 'bash', version: '5.2.15-2+b7' },
      { name: 'git', version: '1:2.39.5-0+deb12u2' },
    ]);
    // sha256("kernel"), the bytes the fake hook wrote.
    expect(manifest.files.kernel).toEqual({ name: 'vmlinuz', bytes: 6, sha256: createHash('sha256').update('kernel').digest('hex') });
    expect(manifest.files.disk).toMatchObject({ name: 'disk.qcow2', format: 'qcow2', virtualBytes: 8589934592, bytes: 5 });
    expect(manifest.agentClis[0]).toMatchObject({ name: 'claude', integrity: 'sha512-abc', installAs: '/usr/local/bin/claude', companions: [] });
    // Codex carries the files it needs beside it (its code-mode host), each digested in the manifest.
    const codex = manifest.agentClis.find((c) => c.name === 'codex')!;
    const digestOfFake = { sha256: createHash('sha256').update('binary').digest('hex'), bytes: 6 };
    expect(codex.companions).toEqual([
      { installAs: '/usr/local/bin/codex-code-mode-host', ...digestOfFake },
      { installAs: '/usr/local/bin/rg', ...digestOfFake },
    ]);
    expect(calls.filter((c) => c[0] === 'tar').map((c) => c.at(-1))).toContain('package/vendor/x86_64-unknown-linux-musl/bin/codex-code-mode-host');
    expect(manifest.buildDate).toBe('2026-01-02T03:04:05.000Z');
    expect(manifest.guest).toEqual({ user: 'agent', uid: 1000, home: '/home/agent', work: '/work' });

    // Read-only once built; nothing but the image folder left behind.
    expect((await stat(image.dir)).mode & 0o222).toBe(0);
    expect((await stat(image.disk)).mode & 0o222).toBe(0);
    const { readdir } = await import('node:fs/promises');
    expect((await readdir(imagesDir)).filter((n) => !n.startsWith(store.version))).toEqual([]);

    // The kernel comes from the rootfs hook, never from the host's /boot.
    expect(calls.flat().join(' ')).not.toMatch(/\/boot\/vmlinuz/);
    // A second ensure reuses it without building.
    const before = calls.length;
    await store.ensure();
    expect(calls.length).toBe(before);
  });

  it('a failed step names the step and shows the last lines, leaving no partial image', async () => {
    const imagesDir = await tempDir();
    const { runner } = fakeTools({ failMmdebstrap: true });
    const store = new ImageStore({ imagesDir, builder: new ImageBuilder({ runner, which: async (p) => `/usr/bin/${p}` }) });
    await expect(store.ensure()).rejects.toThrow(/failed at step "making the ext4 disk \(mkfs.ext4 -d\)".*\n--- last output ---\nE: setup failed: something broke/s);
    expect(store.status()).toMatchObject({ state: 'failed' });
    const { readdir } = await import('node:fs/promises');
    expect(await readdir(imagesDir)).toEqual([]);
  });

  it('a missing mmdebstrap is a clear error naming the tool and how to install it', async () => {
    const imagesDir = await tempDir();
    const store = new ImageStore({
      imagesDir,
      builder: new ImageBuilder({ runner: fakeTools().runner, which: async (p) => (p === 'mmdebstrap' ? undefined : `/usr/bin/${p}`) }),
    });
    await expect(store.ensure()).rejects.toThrow(/step "checking build tools": mmdebstrap is not installed; install it with: sudo apt-get install mmdebstrap/);
  });
});
