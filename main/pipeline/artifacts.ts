// Agent scratch files (the plan, the review) live outside the repository, in
// the guest's artifacts folder, so they never ride along in the returned
// branch; the host copies them out as the task's artifacts. The folder is
// written by the agent, so everything in it is untrusted: only plain names,
// only regular files (no symlink is followed, no FIFO blocks the copy), read
// as the agent user, and the count and sizes are capped.
import fs from 'node:fs/promises';
import path from 'node:path';
import type { ClientChannel } from 'ssh2';
import { asAgentArgv, shellQuote } from '../guest/guest-shell.js';
import type { GuestSsh } from '../guest/guest-ssh.js';

export const GUEST_ARTIFACTS_DIR = '/work/artifacts';
export const MAX_ARTIFACTS = 32;
export const MAX_ARTIFACT_BYTES = 1024 * 1024;
export const MAX_ARTIFACTS_TOTAL_BYTES = 8 * 1024 * 1024;
const MAX_NAME_CHARS = 128;
const PLAIN_NAME = /^[A-Za-z0-9._-]+$/;

export interface CollectedArtifact {
  name: string;
  /** Bytes copied (at most the cap). */
  bytes: number;
  /** The file was larger than its share of the caps; the copy holds its start. */
  truncated: boolean;
}

export interface RefusedArtifact {
  /** The name as listed, with control characters shown as escapes; capped. */
  name: string;
  reason: string;
}

export interface CollectOptions {
  /** The guest folder (the artifacts folder by default). */
  dir?: string;
  /** Wraps a program to run as the agent user (default: runuser -u agent with a clean environment). */
  asAgentArgv?: (argv: string[]) => string;
  /** Hears of every entry that was not copied, and why. */
  onRefused?: (r: RefusedArtifact) => void;
  maxFiles?: number;
  maxFileBytes?: number;
  maxTotalBytes?: number;
}

/** Makes the folder the agent user writes its scratch files in (run as root, before the stages). */
export function prepareArtifactsDirScript(dir = GUEST_ARTIFACTS_DIR): string {
  return `install -d -o agent -g agent -m 0755 ${shellQuote(dir)}`;
}

function shown(name: string): string {
  const s = name.replace(/[\x00-\x1f\x7f-\x9f]/g, (c) => `\\x${c.charCodeAt(0).toString(16).padStart(2, '0')}`);
  return s.length > MAX_NAME_CHARS ? `${s.slice(0, MAX_NAME_CHARS - 1)}…` : s;
}

/** Why a listed entry cannot be copied, or null when it can. */
export function artifactNameProblem(name: string): string | null {
  if (!PLAIN_NAME.test(name)) return 'the name is not plain (letters, digits, dot, dash, underscore)';
  if (name === '.' || name === '..') return 'the name is not plain (letters, digits, dot, dash, underscore)';
  if (name.length > MAX_NAME_CHARS) return `the name is longer than ${MAX_NAME_CHARS} characters`;
  return null;
}

/**
 * Copies the guest's artifacts into destDir (made, owner-only, when missing:
 * the caller empties it first) over the sandbox's SSH connection; returns
 * what was copied, sorted by name.
 */
export async function collectArtifacts(ssh: GuestSsh, destDir: string, opts: CollectOptions = {}): Promise<CollectedArtifact[]> {
  const dir = opts.dir ?? GUEST_ARTIFACTS_DIR;
  const wrap = opts.asAgentArgv ?? asAgentArgv;
  const maxFiles = opts.maxFiles ?? MAX_ARTIFACTS;
  const maxFileBytes = opts.maxFileBytes ?? MAX_ARTIFACT_BYTES;
  let budget = opts.maxTotalBytes ?? MAX_ARTIFACTS_TOTAL_BYTES;
  await fs.mkdir(destDir, { recursive: true, mode: 0o700 });
  const refuse = (name: string, reason: string) => opts.onRefused?.({ name: shown(name), reason });

  // One entry per NUL: type letter, space, name. Sizes are not trusted from here (the file may still grow).
  // From /: find fails when it cannot return to the folder it started in (root's home, unreadable to the agent user).
  const list = await ssh.run(wrap(['sh', '-c', 'cd / && exec find "$@"', 'find', dir, '-mindepth', '1', '-maxdepth', '1', '-printf', '%y %f\\0']), {
    maxBytes: 256 * 1024,
    timeoutMs: 30_000,
  });
  if (list.code !== 0) {
    if (/No such file or directory/.test(list.stderr)) return [];
    throw new Error(`listing the sandbox's artifacts failed (exit ${list.code ?? 'signal'}): ${shown(list.stderr.trim()).slice(0, 200)}`);
  }
  const entries = list.stdout
    .split('\0')
    .filter((e) => e.length >= 3)
    .map((e) => ({ type: e[0]!, name: e.slice(2) }))
    .sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0));

  const copied: CollectedArtifact[] = [];
  for (const { type, name } of entries) {
    const problem = artifactNameProblem(name) ?? (type === 'f' ? null : 'not a regular file');
    if (problem) {
      refuse(name, problem);
      continue;
    }
    if (copied.length >= maxFiles) {
      refuse(name, `more than ${maxFiles} files`);
      continue;
    }
    if (budget <= 0) {
      refuse(name, `the artifacts already hold ${opts.maxTotalBytes ?? MAX_ARTIFACTS_TOTAL_BYTES} bytes`);
      continue;
    }
    const cap = Math.min(maxFileBytes, budget);
    // nofollow: a file swapped for a symlink after the listing is refused; nonblock: a FIFO reads as empty, never hangs.
    const argv = ['dd', `if=${dir}/${name}`, 'iflag=nofollow,nonblock,count_bytes', `count=${cap + 1}`, 'bs=65536', 'status=none'];
    const read = await readCapped(await ssh.exec(wrap(argv)), cap + 1);
    if (read.code !== 0) {
      refuse(name, `could not be read (${shown(read.stderr.trim()).slice(0, 120) || `exit ${read.code ?? 'signal'}`})`);
      continue;
    }
    const truncated = read.data.length > cap;
    const data = truncated ? read.data.subarray(0, cap) : read.data;
    // 'wx': never through something already at that path in the destination.
    await fs.writeFile(path.join(destDir, name), data, { flag: 'wx', mode: 0o600 });
    budget -= data.length;
    copied.push({ name, bytes: data.length, truncated });
  }
  return copied;
}

/** A guest program's stdout up to `max` bytes (the channel is closed beyond), its stderr's start and its exit status. */
function readCapped(channel: ClientChannel, max: number): Promise<{ data: Buffer; stderr: string; code: number | null }> {
  return new Promise((resolve) => {
    const chunks: Buffer[] = [];
    let bytes = 0;
    let stderr = '';
    let code: number | null = null;
    let full = false;
    channel.on('data', (d: Buffer) => {
      if (full) return;
      chunks.push(d);
      bytes += d.length;
      if (bytes >= max) {
        full = true;
        channel.close();
      }
    });
    channel.stderr.on('data', (d: Buffer) => {
      if (stderr.length < 1000) stderr += d.toString('utf8');
    });
    channel.on('exit', (c: number | null) => {
      code = typeof c === 'number' ? c : null;
    });
    channel.on('error', () => undefined);
    channel.on('close', () => {
      const data = Buffer.concat(chunks);
      // Closed by us at the cap: the exit status is not the program's verdict.
      resolve({ data: data.subarray(0, max), stderr, code: full ? 0 : code });
    });
  });
}
