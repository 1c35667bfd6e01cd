// The files of one sandbox folder: overlay, keys, logs, pidfile, QMP socket.
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
