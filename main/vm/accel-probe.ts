// Picks how QEMU accelerates the guest. KVM (Linux) or HVF (macOS) only if a
// real guest actually runs with the exact CPU model we would use: on some hosts
// /dev/kvm exists but QEMU aborts on an MSR (-cpu host) or the guest hangs.
// The probe boots a one-sector program that writes to QEMU's debug-exit port;
// success is QEMU exiting with that program's code. Otherwise TCG with -cpu max
// (agent binaries need AVX2/SSE4.2, which the default qemu64 CPU lacks).
import { constants } from 'node:fs';
import { access, mkdtemp, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { spawn } from 'node:child_process';

export type AccelName = 'kvm' | 'hvf' | 'tcg';

export interface AccelChoice {
  accel: AccelName;
  cpu: string;
  /** Why this was chosen, e.g. why KVM was not. */
  reason: string;
}

/** An accelerator chosen by the user instead of probed, with where that came from (e.g. "FACTORY_ACCEL=tcg"). */
export interface ForcedAccel {
  accel: AccelName;
  reason: string;
}

export type ProbeOutcome =
  | { kind: 'exited'; code: number | null; signal: NodeJS.Signals | null; stderr: string }
  | { kind: 'timeout'; stderr: string }
  | { kind: 'spawn-error'; message: string };

export type ProbeRunner = (binary: string, args: string[], timeoutMs: number) => Promise<ProbeOutcome>;

export interface AccelProbeOptions {
  qemuBinary?: string;
  runner?: ProbeRunner;
  platform?: NodeJS.Platform;
  /** Whether /dev/kvm can be opened read-write. */
  kvmDeviceUsable?: () => Promise<boolean>;
  timeoutMs?: number;
  /** Skip the probe and use this (KVM and HVF then run with -cpu host). */
  forced?: ForcedAccel;
}

/** Exit status of QEMU when the probe program writes 0x31 to isa-debug-exit: (0x31 << 1) | 1. */
export const PROBE_SUCCESS_CODE = 99;

/** A boot sector: mov al,0x31; out 0xf4,al; then halt forever. */
export function probeBootSector(): Buffer {
  const sector = Buffer.alloc(512);
  Buffer.from([0xb0, 0x31, 0xe6, 0xf4, 0xf4, 0xeb, 0xfd]).copy(sector);
  sector[510] = 0x55;
  sector[511] = 0xaa;
  return sector;
}

export function probeArgs(accel: 'kvm' | 'hvf', cpu: string, bootSector: string): string[] {
  return [
    '-nodefaults', '-no-user-config', '-display', 'none', '-no-reboot',
    '-machine', 'pc', '-accel', accel, '-cpu', cpu, '-m', '32',
    '-device', 'isa-debug-exit,iobase=0xf4,iosize=0x04',
    '-drive', `file=${bootSector.replace(/,/g, ',,')},format=raw,if=ide,snapshot=on`,
  ];
}

const TCG: Omit<AccelChoice, 'reason'> = { accel: 'tcg', cpu: 'max' };

/** Per-process cache: probing costs a QEMU start. */
const cache = new Map<string, Promise<AccelChoice>>();

export class AccelProbe {
  private readonly qemuBinary: string;
  private readonly runner: ProbeRunner;
  private readonly platform: NodeJS.Platform;
  private readonly kvmDeviceUsable: () => Promise<boolean>;
  private readonly timeoutMs: number;
  private readonly forced: ForcedAccel | undefined;

  constructor(opts: AccelProbeOptions = {}) {
    this.qemuBinary = opts.qemuBinary ?? 'qemu-system-x86_64';
    this.runner = opts.runner ?? runProbeProcess;
    this.platform = opts.platform ?? process.platform;
    this.kvmDeviceUsable = opts.kvmDeviceUsable ?? (() => access('/dev/kvm', constants.R_OK | constants.W_OK).then(() => true, () => false));
    this.timeoutMs = opts.timeoutMs ?? 10_000;
    this.forced = opts.forced;
  }

  /** Probes once per process and QEMU binary (a forced choice is not probed at all). */
  static cached(opts: AccelProbeOptions = {}): Promise<AccelChoice> {
    if (opts.forced) return new AccelProbe(opts).probe();
    const key = opts.qemuBinary ?? 'qemu-system-x86_64';
    let found = cache.get(key);
    if (!found) {
      found = new AccelProbe(opts).probe();
      cache.set(key, found);
    }
    return found;
  }

  async probe(): Promise<AccelChoice> {
    const forced = this.forced;
    if (forced?.accel === 'tcg') return { ...TCG, reason: forced.reason };
    if (forced) return { accel: forced.accel, cpu: 'host', reason: forced.reason };

    let accel: 'kvm' | 'hvf';
    if (this.platform === 'linux') {
      if (!(await this.kvmDeviceUsable())) return { ...TCG, reason: '/dev/kvm is missing or not accessible' };
      accel = 'kvm';
    } else if (this.platform === 'darwin') {
      accel = 'hvf';
    } else {
      return { ...TCG, reason: `no hardware acceleration support on ${this.platform}` };
    }

    const dir = await mkdtemp(path.join(os.tmpdir(), 'factory-accel-'));
    try {
      const sector = path.join(dir, 'probe.img');
      await writeFile(sector, probeBootSector());
      const outcome = await this.runner(this.qemuBinary, probeArgs(accel, 'host', sector), this.timeoutMs);
      return decideAccel(accel, outcome, this.timeoutMs);
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  }
}

/** Turns a probe outcome into a choice; pure, so every outcome can be tested. */
export function decideAccel(accel: 'kvm' | 'hvf', outcome: ProbeOutcome, timeoutMs: number): AccelChoice {
  const name = accel.toUpperCase();
  switch (outcome.kind) {
    case 'exited':
      if (outcome.code === PROBE_SUCCESS_CODE) return { accel, cpu: 'host', reason: `${name} probe guest ran` };
      return {
        ...TCG,
        reason: `${name} is unusable: QEMU ${outcome.signal ? `was killed by ${outcome.signal}` : `exited with code ${outcome.code}`}` +
          (firstLines(outcome.stderr) ? ` (${firstLines(outcome.stderr)})` : ''),
      };
    case 'timeout':
      return { ...TCG, reason: `${name} is unusable: the probe guest did not finish within ${timeoutMs} ms` };
    case 'spawn-error':
      return { ...TCG, reason: `${name} probe could not start QEMU: ${outcome.message}` };
  }
}

function firstLines(text: string): string {
  return text
    .split('\n')
    .map((l) => l.trim())
    .filter((l) => l && !/warning: host doesn't support requested feature/.test(l))
    .slice(0, 2)
    .join('; ')
    .slice(0, 300);
}

export const runProbeProcess: ProbeRunner = (binary, args, timeoutMs) =>
  new Promise((resolve) => {
    let stderr = '';
    let settled = false;
    const child = spawn(binary, args, { stdio: ['ignore', 'ignore', 'pipe'] });
    const timer = setTimeout(() => {
      if (settled) return;
      settled = true;
      child.kill('SIGKILL');
      resolve({ kind: 'timeout', stderr });
    }, timeoutMs);
    child.stderr.on('data', (c: Buffer) => {
      if (stderr.length < 8192) stderr += c.toString('utf8');
    });
    child.on('error', (err) => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      resolve({ kind: 'spawn-error', message: err.message });
    });
    child.on('exit', (code, signal) => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      resolve({ kind: 'exited', code, signal, stderr });
    });
  });
