// The snapshot template folder: what is left on disk after templates are made
// again (an update, a new image), without a guest: make() writes a stand-in.
import { existsSync } from 'node:fs';
import { mkdir, mkdtemp, readdir, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { SnapshotStore, type TemplateMeta } from '../../../main/vm/snapshot-store.js';

const dirs: string[] = [];
afterEach(async () => {
  for (const d of dirs.splice(0)) await rm(d, { recursive: true, force: true });
});

async function setup() {
  const root = await mkdtemp(path.join(os.tmpdir(), 'snapshot-store-'));
  dirs.push(root);
  const image = path.join(root, 'disk.qcow2');
  await writeFile(image, 'disk');
  const store = new SnapshotStore({ dir: path.join(root, 'snapshots') });
  const make = async (tmp: string) => writeFile(path.join(tmp, 'ram'), 'memory');
  /** A finished template as an earlier run left it. */
  const left = async (name: string, meta: TemplateMeta) => {
    const dir = path.join(root, 'snapshots', name);
    await mkdir(dir, { recursive: true });
    await writeFile(path.join(dir, 'meta.json'), JSON.stringify({ created: '2026-01-01T00:00:00.000Z', ...meta }));
    await writeFile(path.join(dir, 'ready'), '');
  };
  const names = async () => (await readdir(path.join(root, 'snapshots'))).filter((n) => !n.startsWith('.')).sort();
  return { root, image, store, make, left, names };
}

describe('the snapshot templates kept on disk', () => {
  it('removes, once a template is made, the ones no start can use any more', async () => {
    const { root, image, store, make, left, names } = await setup();
    await left('older-template', { baseDisk: image, machine: 'm1', version: 1 });
    await left('before-machines-were-recorded', { baseDisk: image });
    await left('image-gone', { baseDisk: path.join(root, 'old-disk.qcow2'), machine: 'm0', version: 2 });
    // Another memory size or CPU count is another machine: still of use.
    await left('other-machine', { baseDisk: image, machine: 'm2', version: 1 });
    await mkdir(path.join(root, 'snapshots', 'not-a-template'));
    const made = await store.ensure('newer-template', make, { baseDisk: image, machine: 'm1', version: 2 });
    expect(existsSync(path.join(made, 'ready'))).toBe(true);
    expect(await names()).toEqual(['newer-template', 'not-a-template', 'other-machine']);
  });

  it('finds a finished template again without making or pruning anything', async () => {
    const { image, store, left, names } = await setup();
    await left('t', { baseDisk: image, machine: 'm1', version: 2 });
    await left('older', { baseDisk: image, machine: 'm1', version: 1 });
    let made = 0;
    await store.ensure('t', async () => void made++, { baseDisk: image, machine: 'm1', version: 2 });
    expect(made).toBe(0);
    expect(await names()).toEqual(['older', 't']);
  });

  it('keeps every template when a template is made without a machine (nothing to compare with)', async () => {
    const { image, store, make, left, names } = await setup();
    await left('before-machines-were-recorded', { baseDisk: image });
    await store.ensure('plain', make, { baseDisk: image });
    expect(await names()).toEqual(['before-machines-were-recorded', 'plain']);
  });
});
