// A layer's saved guest memory (a "warm" layer) in the layer store, with real
// qcow2 files made by qemu-img and a memory state folder laid out as a VM's
// freeze leaves it (its bytes stand in for QEMU's migration stream: the store
// never reads them). A layer hands out its memory only while every file of it
// is there; otherwise it is a layer that boots cold, as before.
import { chmod, mkdir, mkdtemp, readFile, rm, stat, truncate, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { LayerStore } from '../../../main/vm/layer-store.js';
import { runCommand } from '../../../main/vm/process-runner.js';
import { warmFileList, warmFiles } from '../../../main/vm/warm-state.js';

const dirs: string[] = [];
afterEach(async () => {
  for (const d of dirs.splice(0)) await rm(d, { recursive: true, force: true });
});

async function qemuImg(...args: string[]) {
  const r = await runCommand('qemu-img', args);
  expect(r.code, r.tail.join('\n')).toBe(0);
}

async function setup() {
  const dir = await mkdtemp(path.join(os.tmpdir(), 'layer-warm-'));
  dirs.push(dir);
  const base = path.join(dir, 'base.qcow2');
  await qemuImg('create', '-q', '-f', 'qcow2', base, '64M');
  let clock = Date.parse('2026-01-01T00:00:00Z');
  const refused: Array<{ id: string; reason: string }> = [];
  const store = new LayerStore({ root: path.join(dir, 'layers'), baseDisk: () => base, now: () => new Date((clock += 1000)), onRefused: (id, reason) => refused.push({ id, reason }) });
  let n = 0;
  const frozenDisk = async () => {
    const file = path.join(dir, `frozen-${++n}.qcow2`);
    await qemuImg('create', '-q', '-f', 'qcow2', '-b', base, '-F', 'qcow2', file);
    return file;
  };
  /** A memory state folder as a freeze leaves it: a state of `mb` MiB, fw_cfg files and guest keys. */
  const memory = async (mb = 2) => {
    const warm = path.join(dir, `warm-${++n}`);
    for (const rel of warmFileList(warm)) {
      await mkdir(path.dirname(path.join(warm, rel)), { recursive: true });
      await writeFile(path.join(warm, rel), rel === 'state' ? Buffer.alloc(mb * 1024 * 1024, 0x5a) : `${rel}\n`, { mode: 0o600 });
    }
    return { dir: warm, machineKey: '0123456789abcdef' };
  };
  return { dir, store, refused, frozenDisk, memory };
}

const meta = (key: string) => ({ key, repo: '/home/u/project', imageVersion: 'debian-r1', summary: ['npm ci'] });

describe('LayerStore with a saved memory state', () => {
  it('keeps the memory with the disk, read-only, counts it in the size, and hands it out with the machine it belongs to', async () => {
    const { store, frozenDisk, memory } = await setup();
    const layer = await store.commit({ ...meta('k1'), frozenDisk: await frozenDisk(), memory: await memory(3) });
    expect(layer.memory).toEqual({ machineKey: '0123456789abcdef' });
    const diskBytes = (await stat(layer.disk)).blocks * 512;
    const stateBytes = (await stat(path.join(layer.dir, 'warm', 'state'))).blocks * 512;
    expect(stateBytes).toBeGreaterThanOrEqual(3 * 1024 * 1024);
    expect(layer.sizeBytes).toBeGreaterThanOrEqual(diskBytes + stateBytes);
    for (const rel of warmFileList(path.join(layer.dir, 'warm'))) expect((await stat(path.join(layer.dir, 'warm', rel))).mode & 0o777).toBe(0o400);
    const found = await store.find('k1');
    expect(found?.warm).toEqual({ dir: path.join(layer.dir, 'warm'), machineKey: '0123456789abcdef', shared: true });
    expect(await readFile(warmFiles(found!.warm!.dir).guest.clientKey, 'utf8')).toBe('guest/keys/client_ed25519\n');
    // The json names the machine only; the folder is found by the layer's own path.
    expect(JSON.parse(await readFile(path.join(layer.dir, 'layer.json'), 'utf8')).memory).toEqual({ machineKey: '0123456789abcdef' });
  });

  it('a layer committed without memory is not warm', async () => {
    const { store, frozenDisk } = await setup();
    await store.commit({ ...meta('k1'), frozenDisk: await frozenDisk() });
    const found = await store.find('k1');
    expect(found).toBeDefined();
    expect(found!.warm).toBeUndefined();
  });

  it('a layer whose memory state went missing or empty is still found, but not warm, and says why', async () => {
    const { store, frozenDisk, memory, refused } = await setup();
    const layer = await store.commit({ ...meta('k1'), frozenDisk: await frozenDisk(), memory: await memory() });
    const state = path.join(layer.dir, 'warm', 'state');
    await chmod(state, 0o600);
    await truncate(state, 0);
    const emptied = await store.find('k1');
    expect(emptied?.id).toBe(layer.id);
    expect(emptied!.warm).toBeUndefined();
    expect(refused.at(-1)).toEqual({ id: layer.id, reason: 'its memory state is not used: the memory state is empty' });
    await rm(state);
    const gone = await store.find('k1');
    expect(gone?.id).toBe(layer.id);
    expect(gone!.warm).toBeUndefined();
    expect(refused.at(-1)?.reason).toMatch(/state of the memory state is missing/);
    // A key file swapped for a link to elsewhere is no key file.
    const other = await store.commit({ ...meta('k2'), frozenDisk: await frozenDisk(), memory: await memory() });
    const hostKey = warmFiles(path.join(other.dir, 'warm')).fwCfg.hostKey;
    await rm(hostKey);
    await runCommand('ln', ['-s', '/etc/hostname', hostKey]);
    expect((await store.find('k2'))!.warm).toBeUndefined();
  });

  it('a memory state that cannot be kept leaves a layer that boots cold rather than no layer', async () => {
    const { store, frozenDisk, memory, refused } = await setup();
    const half = await memory();
    await rm(warmFiles(half.dir).guest.clientKey);
    const layer = await store.commit({ ...meta('k1'), frozenDisk: await frozenDisk(), memory: half });
    expect(layer.memory).toBeUndefined();
    expect(refused.some((r) => r.id === layer.id && /client_ed25519 of the memory state is missing/.test(r.reason))).toBe(true);
    expect((await store.find('k1'))?.warm).toBeUndefined();
    await expect(stat(path.join(layer.dir, 'warm'))).rejects.toMatchObject({ code: 'ENOENT' });
  });

  it('eviction counts the memory: a warm layer that fits by its disk alone but not with its memory goes', async () => {
    const { store, frozenDisk, memory } = await setup();
    const old = await store.commit({ ...meta('old'), frozenDisk: await frozenDisk(), memory: await memory(4) });
    const recent = await store.commit({ ...meta('new'), frozenDisk: await frozenDisk() });
    const oldDiskOnly = (await stat(old.disk)).blocks * 512;
    expect(await store.evict(recent.sizeBytes + oldDiskOnly)).toEqual([old.id]);
    expect((await store.list()).layers.map((l) => l.id)).toEqual([recent.id]);
  });

  it('a json whose machine key is not a key makes the folder broken', async () => {
    const { store, frozenDisk, memory } = await setup();
    const layer = await store.commit({ ...meta('k1'), frozenDisk: await frozenDisk(), memory: await memory() });
    const file = path.join(layer.dir, 'layer.json');
    const json = JSON.parse(await readFile(file, 'utf8'));
    await writeFile(file, JSON.stringify({ ...json, memory: { machineKey: '../../x' } }));
    const { layers, broken } = await store.list();
    expect(layers).toEqual([]);
    expect(broken[0]?.reason).toMatch(/memory\.machineKey/);
  });
});
