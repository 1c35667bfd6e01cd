// A real sandbox's CPU and memory as the app reports them: its QEMU process is
// sampled on the host while it runs (the guest is never asked), a guest that spins
// shows as host CPU, and the samples stop when the sandbox is destroyed.
import fs from 'node:fs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { SandboxSample } from '../../common/sandbox-stats.js';
import { createFactoryApp, type FactoryApp } from '../../main/app.js';
import { appPaths } from '../../main/state/paths.js';
import { readProcessCounters } from '../../main/vm/vm-stats.js';
import { testImage } from '../support/image.js';
import { tempDir } from '../support/repo.js';
import { waitForTask } from '../support/wait-for-task.js';

const MiB = 2 ** 20;
let dataDir: string;
let app: FactoryApp;

beforeAll(async () => {
  await testImage();
  dataDir = tempDir('factory-data-');
  app = await createFactoryApp({ host: 'web', paths: appPaths({ ...process.env, FACTORY_DATA_DIR: dataDir }), settings: { vmMemoryMb: 512 } });
});

afterAll(async () => {
  await app?.dispose();
  if (dataDir) fs.rmSync(dataDir, { recursive: true, force: true });
});

describe('sandbox CPU and memory', () => {
  it('samples a running sandbox\u2019s QEMU every 2 s, sees a busy guest, and stops at destroy', async () => {
    const samples: Array<{ sample: SandboxSample; guestMemoryBytes?: number }> = [];
    let taskId = '';
    app.onEvent((e) => {
      if (e.type === 'sandbox.stats' && e.taskId === taskId) samples.push({ sample: e.sample, ...(e.guestMemoryBytes ? { guestMemoryBytes: e.guestMemoryBytes } : {}) });
    });
    const task = await app.api['sandboxes.quick']({ keep: true });
    taskId = task.id;
    await waitForTask(app, taskId, (t) => t.sandbox.status === 'running');
    await expect.poll(() => samples.length, { timeout: 30_000 }).toBeGreaterThanOrEqual(2);
    const first = samples.at(-1)!;
    // The guest's size as QEMU was started with it, and host memory that a 512 MiB guest plausibly takes.
    expect(first.guestMemoryBytes).toBe(512 * MiB);
    expect(first.sample.pssBytes).toBeGreaterThan(16 * MiB);
    expect(first.sample.pssBytes).toBeLessThan(2048 * MiB);
    expect(first.sample.rssBytes).toBeGreaterThanOrEqual(first.sample.pssBytes);

    // A guest that spins for a while is host CPU for its QEMU.
    const shell = await app.api['terminal.openShell']({ taskId, cols: 100, rows: 30 });
    await app.api['terminal.write']({ sessionId: shell.id, data: "timeout 20 sh -c 'while :; do :; done'\n" });
    await expect.poll(() => Math.max(0, ...samples.slice(-3).map((s) => s.sample.cpuPercent)), { timeout: 30_000 }).toBeGreaterThan(15);

    // Figures for the record: idle and busy CPU, host memory, and what one reading costs.
    const qemuPid = fs.readdirSync('/proc').filter((d) => /^\d+$/.test(d)).find((d) => {
      try {
        return fs.readFileSync(`/proc/${d}/cmdline`, 'utf8').split('\0').includes(`factory-${taskId}`);
      } catch {
        return false;
      }
    });
    const t0 = performance.now();
    for (let i = 0; i < 20; i++) await readProcessCounters(Number(qemuPid));
    const cpus = samples.map((s) => s.sample.cpuPercent);
    console.log(
      `sandbox-stats: idle CPU ${cpus[0]}%, busy CPU peak ${Math.max(...cpus)}%, PSS ${Math.round(samples.at(-1)!.sample.pssBytes / MiB)} MiB, ` +
        `RSS ${Math.round(samples.at(-1)!.sample.rssBytes / MiB)} MiB, one reading ${((performance.now() - t0) / 20).toFixed(2)} ms`,
    );

    const history = await app.api['tasks.stats']({ taskId });
    expect(history.live).toBe(true);
    expect(history.samples.length).toBeGreaterThanOrEqual(3);
    // Two seconds apart, give or take a loaded machine.
    const gaps = history.samples.slice(1).map((s, i) => s.at - history.samples[i]!.at);
    expect(Math.min(...gaps)).toBeGreaterThanOrEqual(1500);

    await app.api['tasks.destroy']({ taskId });
    await expect.poll(async () => (await app.api['tasks.stats']({ taskId })).live).toBe(false);
    const count = samples.length;
    await new Promise((r) => setTimeout(r, 5000));
    expect(samples.length).toBe(count);
    expect((await app.api['tasks.stats']({ taskId })).samples.length).toBeGreaterThanOrEqual(3);
  });

  it('refuses the stats of a task that does not exist, by name', async () => {
    await expect(app.api['tasks.stats']({ taskId: 'no-such-task' })).rejects.toThrow(/no-such-task/);
  });
});
