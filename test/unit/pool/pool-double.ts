// A QEMU driver double for the warm pool's ordering and budget logic: QEMU
// itself cannot run in a unit test, so each "VM" here is a record that starts
// when the test lets it and ends when destroyed. What a real VM does is checked
// by test/integration/warm-pool.test.ts.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { createFileLogger } from '../../../main/log/logger.js';
import { WarmPool, type WarmPoolDeps } from '../../../main/pool/warm-pool.js';
import { SettingsSchema, type Settings } from '../../../main/state/settings.js';
import type { GuestForwardSpec, RunningVmPort } from '../../../main/sandbox/sandbox-ports.js';

/** A connection record: no guest answers it; it only says whether it was closed. */
export interface FakeSsh {
  isClosed: boolean;
  close(): void;
}

export interface FakeVm extends RunningVmPort {
  destroyed: boolean;
  /** Every connection asked of it. */
  connections: FakeSsh[];
  /** Ends the VM as if QEMU crashed. */
  crash(): void;
}

interface PendingStart {
  dir: string;
  resolve: () => void;
  reject: (err: Error) => void;
}

export class DriverDouble {
  readonly started: Array<{ dir: string; memoryMb?: number; cpus?: number; guestForwards?: GuestForwardSpec[]; backingDisk?: string }> = [];
  readonly vms: FakeVm[] = [];
  readonly pending: PendingStart[] = [];
  inFlight = 0;
  maxInFlight = 0;
  /** Starts finish by themselves when true; otherwise the test releases each (release()). */
  auto = true;
  failNext: Error | undefined;

  async start(opts: { sandboxDir: string; memoryMb?: number; cpus?: number; guestForwards?: GuestForwardSpec[]; backingDisk?: string }): Promise<RunningVmPort> {
    this.inFlight++;
    this.maxInFlight = Math.max(this.maxInFlight, this.inFlight);
    this.started.push({ dir: opts.sandboxDir, ...(opts.memoryMb ? { memoryMb: opts.memoryMb } : {}), ...(opts.cpus ? { cpus: opts.cpus } : {}), ...(opts.guestForwards ? { guestForwards: opts.guestForwards } : {}), ...(opts.backingDisk ? { backingDisk: opts.backingDisk } : {}) });
    try {
      if (this.auto) await new Promise((r) => setTimeout(r, 5));
      else await new Promise<void>((resolve, reject) => this.pending.push({ dir: opts.sandboxDir, resolve, reject }));
      if (this.failNext) {
        const err = this.failNext;
        this.failNext = undefined;
        throw err;
      }
      fs.writeFileSync(path.join(opts.sandboxDir, 'overlay.qcow2'), 'disk');
      let end!: () => void;
      const exited = new Promise<void>((r) => (end = r));
      const vm: FakeVm = {
        pid: 100000 + this.vms.length,
        accel: 'tcg',
        sshPort: 2200 + this.vms.length,
        bootMs: 20_000, // as a start under software emulation may take
        sandboxDir: opts.sandboxDir,
        destroyed: false,
        connections: [],
        exited,
        ssh: async () => {
          const ssh: FakeSsh = { isClosed: false, close: () => void (ssh.isClosed = true) };
          vm.connections.push(ssh);
          return ssh as unknown as Awaited<ReturnType<RunningVmPort['ssh']>>;
        },
        stop: async () => end(),
        destroy: async () => {
          vm.destroyed = true;
          fs.rmSync(path.join(opts.sandboxDir, 'overlay.qcow2'), { force: true });
          end();
        },
        serialTail: () => '',
        crash: () => end(),
      };
      this.vms.push(vm);
      return vm;
    } finally {
      this.inFlight--;
    }
  }

  /** Lets the oldest waiting start finish. */
  release(): void {
    this.pending.shift()?.resolve();
  }
}

export interface PoolHarness {
  pool: WarmPool;
  driver: DriverDouble;
  root: string;
  settings: Settings;
  running: { mb: number };
  killed: string[];
  statuses: Array<ReturnType<WarmPool['status']>>;
  cleanup(): void;
}

export function poolHarness(patch: Partial<Settings> = {}, deps: Partial<WarmPoolDeps<unknown>> = {}): PoolHarness {
  const base = fs.mkdtempSync(path.join(os.tmpdir(), 'fiab-pool-test-'));
  const root = path.join(base, 'pool');
  fs.mkdirSync(root);
  const driver = new DriverDouble();
  const settings = SettingsSchema.parse({ warmPoolMemoryBudgetMb: 64 * 1024, ...patch });
  const running = { mb: 0 };
  const killed: string[] = [];
  const statuses: PoolHarness['statuses'] = [];
  const pool = new WarmPool({
    root,
    images: { status: () => ({ state: 'ready', version: 'test' }), ensure: async () => ({}) },
    qemu: driver,
    settings: () => settings,
    runningMemoryMb: () => running.mb,
    guestForwards: (socketPath) => [{ guestAddress: '10.0.2.100', guestPort: 80, command: `socat - UNIX-CONNECT:${socketPath}` }],
    socketPathFits: (p) => p.length <= 100,
    killLeftovers: async (dir) => {
      killed.push(dir);
      return [];
    },
    onStatus: (s) => statuses.push(s),
    log: createFileLogger({ dir: path.join(base, 'logs') }),
    retryMs: 50,
    refillDelayMs: 20,
    ...deps,
  });
  return { pool, driver, root, settings, running, killed, statuses, cleanup: () => fs.rmSync(base, { recursive: true, force: true }) };
}

export async function until(what: string, check: () => boolean, timeoutMs = 5000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!check()) {
    if (Date.now() > deadline) throw new Error(`timed out waiting until ${what}`);
    await new Promise((r) => setTimeout(r, 5));
  }
}
