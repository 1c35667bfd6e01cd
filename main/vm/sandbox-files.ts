// The files of one sandbox folder (overlay, keys, logs, pidfile, QMP socket)
// and how a QEMU process started for that folder names itself, so that a crash
// cleanup can recognise it later without any state but the folder.
import { randomBytes } from 'node:crypto';
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
  };
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
  return Buffer.byteLength(files.qmpSocket) <= 100 ? files.qmpSocket : path.join(os.tmpdir(), `factory-qmp-${randomBytes(6).toString('hex')}.sock`);
}
