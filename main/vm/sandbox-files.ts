// The files of one sandbox folder (overlay, keys, logs, pidfile, QMP socket)
// and how a QEMU process started for that folder names itself, so that a crash
// cleanup can recognise it later without any state but the folder.
import { randomBytes } from 'node:crypto';
import { readdirSync } from 'node:fs';
import { readFile, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import type { SandboxKeys } from '../ssh/sandbox-keys.js';

export type SandboxFiles = ReturnType<typeof sandboxFiles>;

/** Files of a sandbox folder. */
export function sandboxFiles(sandboxDir: string) {
  return {
    overlay: path.join(sandboxDir, 'overlay.qcow2'),
    keysDir: path.join(sandboxDir, 'keys'),
    clientKey: path.join(sandboxDir, 'keys', 'client_ed25519'),
    authorizedKeys: path.join(sandboxDir, 'keys', 'authorized_keys'),
    hostKey: path.join(sandboxDir, 'keys', 'ssh_host_ed25519_key'),
    hostPublicKey: path.join(sandboxDir, 'keys', 'ssh_host_ed25519_key.pub'),
    serialLog: path.join(sandboxDir, 'serial.log'),
    qemuLog: path.join(sandboxDir, 'qemu.log'),
    pidFile: path.join(sandboxDir, 'qemu.pid'),
    qmpSocket: path.join(sandboxDir, 'qmp.sock'),
    identitySocket: path.join(sandboxDir, 'identity.sock'),
  };
}

/**
 * The disks of a sandbox, oldest first: overlay.qcow2, then one
 * overlay-<n>.qcow2 per freezeDisk(), each backed by the one before. The last
 * is the disk the guest writes to (a crash between QEMU creating the next one
 * and switching to it leaves it empty on top of the others: booting it is
 * still right).
 */
export function sandboxDisks(files: SandboxFiles): string[] {
  const dir = path.dirname(files.overlay);
  let names: string[];
  try {
    names = readdirSync(dir);
  } catch {
    // No sandbox folder: no disks.
    return [];
  }
  const numbered = names
    .map((n) => /^overlay-([1-9][0-9]{0,5})\.qcow2$/.exec(n))
    .filter((m): m is RegExpExecArray => m !== null)
    .map((m) => Number(m[1]))
    .sort((a, b) => a - b)
    .map((n) => path.join(dir, `overlay-${n}.qcow2`));
  return [...(names.includes(path.basename(files.overlay)) ? [files.overlay] : []), ...numbered];
}

/** The disk the guest writes to: the newest of sandboxDisks, overlay.qcow2 when there is none yet. */
export function activeDisk(files: SandboxFiles): string {
  return sandboxDisks(files).at(-1) ?? files.overlay;
}

/** Where the next freezeDisk() sends the guest's writes. */
export function nextDisk(files: SandboxFiles): string {
  const last = activeDisk(files);
  const n = /overlay-(\d+)\.qcow2$/.exec(last);
  return path.join(path.dirname(files.overlay), `overlay-${n ? Number(n[1]) + 1 : 1}.qcow2`);
}

/**
 * The first arguments of every QEMU the driver starts for a sandbox folder:
 * a guest name carrying the sandbox id (shown by ps and QMP) and the folder's
 * own pidfile. Together they say "the QEMU of this folder" in the process's
 * command line, which `ps` shows on Linux and macOS alike.
 */
export function qemuIdentityArgs(sandboxDir: string): string[] {
  const dir = path.resolve(sandboxDir);
  return ['-name', qemuGuestName(dir), '-pidfile', sandboxFiles(dir).pidFile];
}

/** `factory-<folder name>`, reduced to characters QEMU's option parser and ps show unchanged. */
export function qemuGuestName(sandboxDir: string): string {
  const id = path.basename(path.resolve(sandboxDir)).replace(/[^A-Za-z0-9._-]/g, '_').slice(0, 64);
  return `factory-${id || 'sandbox'}`;
}

export async function writeKeys(files: SandboxFiles, keys: SandboxKeys): Promise<void> {
  await writeFile(files.clientKey, keys.clientPrivateKey, { mode: 0o600 });
  await writeFile(files.authorizedKeys, keys.clientPublicKey, { mode: 0o600 });
  await writeFile(files.hostKey, keys.hostPrivateKey, { mode: 0o600 });
  await writeFile(files.hostPublicKey, keys.hostPublicKey + '\n', { mode: 0o600 });
}

export async function readKeys(files: SandboxFiles): Promise<SandboxKeys> {
  return {
    clientPrivateKey: await readFile(files.clientKey, 'utf8'),
    clientPublicKey: await readFile(files.authorizedKeys, 'utf8'),
    hostPrivateKey: await readFile(files.hostKey, 'utf8'),
    hostPublicKey: (await readFile(files.hostPublicKey, 'utf8')).trim(),
  };
}

/** Unix socket paths are limited to ~107 bytes; fall back to a short private path. */
export function qmpSocketFor(files: SandboxFiles): string {
  return shortSocket(files.qmpSocket, 'qmp');
}

/** The identity port's socket (qemu-args.ts), with the same fallback. */
export function identitySocketFor(files: SandboxFiles): string {
  return shortSocket(files.identitySocket, 'identity');
}

function shortSocket(wanted: string, kind: string): string {
  return Buffer.byteLength(wanted) <= 100 ? wanted : path.join(os.tmpdir(), `factory-${kind}-${randomBytes(6).toString('hex')}.sock`);
}
