// The environment layer store with real qcow2 files made by qemu-img (no VM):
// what a user sees (find, list, remove, a byte budget) and what a tampered or
// half-written layer folder must never do (be handed out to a sandbox).
import { existsSync } from 'node:fs';
import { chmod, mkdir, mkdtemp, open, readFile, rm, stat, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { LayerStore } from '../../../main/vm/layer-store.js';
import { runCommand } from '../../../main/vm/process-runner.js';

const dirs: string[] = [];
afterEach(async () => {
  for (const d of dirs.splice(0)) await rm(d, { recursive: true, force: true });
});

async function qemuImg(...args: string[]) {
  const r = await runCommand(args[0] === 'io' ? 'qemu-io' : 'qemu-img', args[0] === 'io' ? args.slice(1) : args);
  expect(r.code, r.tail.join('\n')).toBe(0);
}

/** A base image, a layers root, and a clock the test moves. */
async function setup() {
  const dir = await mkdtemp(path.join(os.tmpdir(), 'layer-store-'));
  dirs.push(dir);
  const base = path.join(dir, 'base.qcow2');
  await qemuImg('create', '-q', '-f', 'qcow2', base, '64M');
  let clock = Date.parse('2026-01-01T00:00:00Z');
  const refused: Array<{ id: string; reason: string }> = [];
  const store = new LayerStore({
    root: path.join(dir, 'layers'),
    baseDisk: () => base,
    now: () => new Date(clock),
    onRefused: (id, reason) => refused.push({ id, reason }),
  });
  let n = 0;
  /** A sandbox disk after setup: an overlay on the base with `mb` MiB written into it. */
  const frozenDisk = async (mb = 0, backing = base) => {
    const file = path.join(dir, `frozen-${++n}.qcow2`);
    await qemuImg('create', '-q', '-f', 'qcow2', '-b', backing, '-F', 'qcow2', file);
    if (mb > 0) await qemuImg('io', '-f', 'qcow2', '-c', `write -P 0x5a 0 ${mb}M`, file);
    return file;
  };
  const tick = (ms = 1000) => {
    clock += ms;
  };
  return { dir, base, store, refused, frozenDisk, tick };
}

const meta = (key: string) => ({ key, repo: '/home/u/project', imageVersion: 'debian-r1', summary: ['npm ci (package-lock.json)'] });

describe('LayerStore', () => {
  it('a committed layer is found by its key, read-only, backed by the base, with its real size', async () => {
    const { store, frozenDisk, base } = await setup();
    const frozen = await frozenDisk(3);
    const layer = await store.commit({ ...meta('k1'), frozenDisk: frozen });
    expect(layer).toMatchObject({ key: 'k1', repo: '/home/u/project', imageVersion: 'debian-r1', summary: ['npm ci (package-lock.json)'] });
    const st = await stat(layer.disk);
    expect(st.mode & 0o777).toBe(0o444);
    // Real bytes: at least the 3 MiB written, far below the 64 MiB virtual size.
    expect(layer.sizeBytes).toBe(st.blocks * 512);
    expect(layer.sizeBytes).toBeGreaterThanOrEqual(3 * 1024 * 1024);
    expect(layer.sizeBytes).toBeLessThan(16 * 1024 * 1024);
    const found = await store.find('k1');
    expect(found?.id).toBe(layer.id);
    expect(found?.disk).toBe(layer.disk);
    expect(await store.find('other-key')).toBeUndefined();
    const info = await runCommand('qemu-img', ['info', '--output=json', found!.disk]);
    expect(JSON.parse(info.stdout)['backing-filename']).toBe(base);
  });

  it('records the commit and tree whose setup made the layer, and keeps them through find and list', async () => {
    const { store, frozenDisk } = await setup();
    const made = { commit: 'a'.repeat(40), tree: 'b'.repeat(40) };
    const layer = await store.commit({ ...meta('k1'), frozenDisk: await frozenDisk(), made });
    expect(layer.made).toEqual(made);
    expect((await store.find('k1'))?.made).toEqual(made);
    expect((await store.list()).layers[0]?.made).toEqual(made);
    // A layer from before this records neither, and is still listed.
    const older = await store.commit({ ...meta('k2'), frozenDisk: await frozenDisk() });
    expect(older.made).toBeUndefined();
    await expect(store.commit({ ...meta('k3'), frozenDisk: await frozenDisk(), made: { commit: 'HEAD', tree: made.tree } })).rejects.toThrow(/"commit"/);
  });

  it('find() records the last use, and a new commit of the same key replaces the old layer', async () => {
    const { store, frozenDisk, tick } = await setup();
    const first = await store.commit({ ...meta('k1'), frozenDisk: await frozenDisk() });
    tick(60_000);
    const found = await store.find('k1');
    expect(found!.lastUsedAt > first.lastUsedAt).toBe(true);
    const onDisk = JSON.parse(await readFile(path.join(found!.dir, 'layer.json'), 'utf8'));
    expect(onDisk.lastUsedAt).toBe(found!.lastUsedAt);
    tick();
    const second = await store.commit({ ...meta('k1'), frozenDisk: await frozenDisk() });
    expect((await store.find('k1'))?.id).toBe(second.id);
    expect((await store.list()).layers.map((l) => l.id)).toEqual([second.id]);
  });

  it('evicts least recently used layers first until the total fits the budget', async () => {
    const { store, frozenDisk, tick } = await setup();
    const a = await store.commit({ ...meta('a'), frozenDisk: await frozenDisk(2) });
    tick();
    const b = await store.commit({ ...meta('b'), frozenDisk: await frozenDisk(2) });
    tick();
    const c = await store.commit({ ...meta('c'), frozenDisk: await frozenDisk(2) });
    tick();
    // a is used again: b is now the least recently used.
    await store.find('a');
    const total = a.sizeBytes + b.sizeBytes + c.sizeBytes;
    expect(await store.evict(total)).toEqual([]);
    expect(await store.evict(total - 1)).toEqual([b.id]);
    expect(await store.evict(a.sizeBytes)).toEqual([c.id]);
    expect((await store.list()).layers.map((l) => l.id)).toEqual([a.id]);
    expect(await store.evict(0)).toEqual([a.id]);
    expect(await store.find('a')).toBeUndefined();
  });

  it('never evicts a layer a running sandbox holds, nor the one asked to keep', async () => {
    const { store, frozenDisk, tick } = await setup();
    const a = await store.commit({ ...meta('a'), frozenDisk: await frozenDisk(1) });
    tick();
    const b = await store.commit({ ...meta('b'), frozenDisk: await frozenDisk(1) });
    tick();
    const c = await store.commit({ ...meta('c'), frozenDisk: await frozenDisk(1) });
    const release = store.acquire(a.id);
    expect(await store.evict(0, c.id)).toEqual([b.id]);
    await expect(store.remove(a.id)).rejects.toThrow(/in use/);
    release();
    release(); // a second call does not release another holder
    expect(await store.evict(0)).toEqual([a.id, c.id]);
  });

  it('a layer folder without its json (a crash mid-commit) is never found; it is listed as broken and removable', async () => {
    const { store, frozenDisk, refused, dir } = await setup();
    const good = await store.commit({ ...meta('k1'), frozenDisk: await frozenDisk() });
    await rm(path.join(good.dir, 'layer.json'));
    expect(await store.find('k1')).toBeUndefined();
    const { layers, broken } = await store.list();
    expect(layers).toEqual([]);
    expect(broken).toEqual([{ id: good.id, reason: 'layer.json is missing' }]);
    expect(refused.some((r) => r.id === good.id)).toBe(true);
    await store.remove(good.id);
    expect(existsSync(good.dir)).toBe(false);

    // A commit folder left by a crash, json and all, is not a layer either.
    const half = path.join(dir, 'layers', '.tmp-abc');
    await mkdir(half);
    await writeFile(path.join(half, 'layer.json'), JSON.stringify({ ...meta('k1'), id: 'abc' }));
    expect(await store.find('k1')).toBeUndefined();
    expect((await store.list()).broken).toEqual([]);
  });

  it('a json that is not valid (hand-edited, truncated, other id) makes the folder broken, not a layer', async () => {
    const { store, frozenDisk } = await setup();
    const layer = await store.commit({ ...meta('k1'), frozenDisk: await frozenDisk() });
    const file = path.join(layer.dir, 'layer.json');
    const good = await readFile(file, 'utf8');
    for (const [text, reason] of [
      [good.slice(0, 20), /unreadable/],
      [JSON.stringify({ ...JSON.parse(good), sizeBytes: -1 }), /invalid: sizeBytes/],
      [JSON.stringify({ ...JSON.parse(good), extra: 1 }), /invalid/],
      [JSON.stringify({ ...JSON.parse(good), id: 'other' }), /names layer other/],
    ] as const) {
      await writeFile(file, text);
      expect(await store.find('k1')).toBeUndefined();
      expect((await store.list()).broken[0]?.reason).toMatch(reason);
    }
  });

  it('refuses a disk backed by anything but the base image, at commit and when found', async () => {
    const { store, frozenDisk, refused, dir, base } = await setup();
    const elsewhere = path.join(dir, 'elsewhere.qcow2');
    await qemuImg('create', '-q', '-f', 'qcow2', elsewhere, '64M');
    await expect(store.commit({ ...meta('k1'), frozenDisk: await frozenDisk(0, elsewhere) })).rejects.toThrow(/backed by .*elsewhere\.qcow2, not the base image/);
    expect((await store.list()).layers).toEqual([]);
    expect(existsSync(path.join(dir, 'layers'))).toBe(true);

    // A layer whose disk was swapped after the commit for one on another file.
    const layer = await store.commit({ ...meta('k1'), frozenDisk: await frozenDisk() });
    await rm(layer.disk, { force: true });
    await qemuImg('create', '-q', '-f', 'qcow2', '-b', elsewhere, '-F', 'qcow2', layer.disk);
    await chmod(layer.disk, 0o444);
    expect(await store.find('k1')).toBeUndefined();
    expect(refused.at(-1)).toEqual({ id: layer.id, reason: expect.stringMatching(/backed by .*elsewhere\.qcow2, not the base image/) });

    // No backing file at all (a full disk someone put there).
    await rm(layer.disk, { force: true });
    await qemuImg('create', '-q', '-f', 'qcow2', layer.disk, '64M');
    await chmod(layer.disk, 0o444);
    expect(await store.find('k1')).toBeUndefined();
    expect(refused.at(-1)?.reason).toMatch(/no backing file/);

    // A raw file, or a qcow2 whose data lives in another host file.
    await rm(layer.disk, { force: true });
    await qemuImg('create', '-q', '-f', 'qcow2', '-b', base, '-F', 'qcow2', '-o', `data_file=${path.join(dir, 'data.raw')}`, layer.disk);
    await chmod(layer.disk, 0o444);
    expect(await store.find('k1')).toBeUndefined();
    expect(refused.at(-1)?.reason).toMatch(/another file/);
  });

  it('refuses to commit a damaged disk (its L1 table points past the end of the file)', async () => {
    const { store, frozenDisk } = await setup();
    const frozen = await frozenDisk(2);
    const fh = await open(frozen, 'r+');
    try {
      const header = Buffer.alloc(8);
      await fh.read(header, 0, 8, 40); // qcow2 header: l1_table_offset
      await fh.write(Buffer.from('800000007fff0000', 'hex'), 0, 8, Number(header.readBigUInt64BE()));
    } finally {
      await fh.close();
    }
    await expect(store.commit({ ...meta('k1'), frozenDisk: frozen })).rejects.toThrow(/qemu-img check found it damaged \(exit 2\)/);
    expect(await store.find('k1')).toBeUndefined();
    expect(await store.list()).toEqual({ layers: [], broken: [] });
  });

  it('refuses a layer whose disk QEMU has since marked corrupt', async () => {
    const { store, frozenDisk, refused } = await setup();
    const layer = await store.commit({ ...meta('k1'), frozenDisk: await frozenDisk(1) });
    // qcow2 header: incompatible_features at byte 72, bit 1 = corrupt.
    const fh = await open(layer.disk, 'r+');
    try {
      await fh.write(Buffer.from('0000000000000002', 'hex'), 0, 8, 72);
    } finally {
      await fh.close();
    }
    expect(await store.find('k1')).toBeUndefined();
    expect(refused.at(-1)?.reason).toMatch(/marked corrupt/);
  });

  it('refuses a layer whose disk became writable (it may have changed since the commit)', async () => {
    const { store, frozenDisk, refused } = await setup();
    const layer = await store.commit({ ...meta('k1'), frozenDisk: await frozenDisk() });
    await chmod(layer.disk, 0o644);
    expect(await store.find('k1')).toBeUndefined();
    expect(refused.at(-1)?.reason).toMatch(/writable \(mode 644\)/);
  });

  it('refuses ids that are paths, so remove() cannot reach outside the layers folder', async () => {
    const { store, frozenDisk, dir } = await setup();
    const victim = path.join(dir, 'victim');
    await mkdir(victim);
    await store.commit({ ...meta('k1'), frozenDisk: await frozenDisk() });
    for (const id of ['../victim', '..', '.', '/etc', 'a/b', '', '.tmp-x', 'A'.repeat(65), 'x\0y', 'ABC']) {
      await expect(store.remove(id), id).rejects.toThrow(/is not a layer id/);
      expect(() => store.acquire(id)).toThrow(/is not a layer id/);
    }
    expect(existsSync(victim)).toBe(true);
    await expect(store.commit({ ...meta('../k'), frozenDisk: await frozenDisk() })).rejects.toThrow(/key/);
  });

  it('keeps summary lines from the repository short and free of control characters', async () => {
    const { store, frozenDisk } = await setup();
    const layer = await store.commit({ ...meta('k1'), summary: ['npm ci\u001b[2J\r\nfake line', 'x'.repeat(10_000), ...Array(300).fill('y')], frozenDisk: await frozenDisk() });
    const found = await store.find('k1');
    expect(found?.summary[0]).toBe('npm ci [2J  fake line');
    expect(found?.summary[1]).toBe('x'.repeat(500));
    expect(found?.summary).toHaveLength(200);
    expect(found?.id).toBe(layer.id);
  });

  it('refuses a frozen disk that is not a regular file', async () => {
    const { store, dir } = await setup();
    await expect(store.commit({ ...meta('k1'), frozenDisk: path.join(dir, 'missing.qcow2') })).rejects.toThrow(/not a regular file/);
    await expect(store.commit({ ...meta('k1'), frozenDisk: dir })).rejects.toThrow(/not a regular file/);
  });
});
