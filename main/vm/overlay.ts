// A sandbox's disk: a qcow2 overlay whose backing file is the read-only base,
// so a fresh sandbox costs only the blocks it writes.
import path from 'node:path';
import { runCommand, type CommandRunner } from './process-runner.js';

export function overlayArgs(baseDisk: string, overlay: string): string[] {
  return ['create', '-q', '-f', 'qcow2', '-b', path.resolve(baseDisk), '-F', 'qcow2', overlay];
}

export async function createOverlay(baseDisk: string, overlay: string, opts: { qemuImg?: string; runner?: CommandRunner } = {}): Promise<void> {
  const runner = opts.runner ?? runCommand;
  const r = await runner(opts.qemuImg ?? 'qemu-img', overlayArgs(baseDisk, overlay), { timeoutMs: 60_000 });
  if (r.code !== 0) throw new Error(`qemu-img could not create the overlay ${overlay}: ${r.tail.slice(-5).join(' / ')}`);
}
