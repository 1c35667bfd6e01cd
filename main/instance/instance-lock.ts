// One app per data dir: a lock file holding the owner's pid, taken before the app
// starts its services (a second app would reap the first one's sandboxes as
// leftovers). A lock whose pid is gone is stale and taken over. The file appears
// with its pid already in it (hard-linked into place), so no app ever reads a
// half-made lock as stale; on a file system without hard links (FAT, some network
// shares) it is created exclusively and then written, and an empty lock younger
// than LOCK_BIRTH_MS is taken to be one being written.
import { randomBytes } from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';

export class DataDirInUseError extends Error {
  constructor(
    readonly dataDir: string,
    readonly pid: number,
  ) {
    super(`another Factory in a Box app (pid ${pid}) is already using the data folder ${dataDir}; use that one (the factory CLI talks to it) or stop it first`);
    this.name = 'DataDirInUse';
  }
}

export interface InstanceLock {
  file: string;
  release(): void;
}

export const LOCK_FILE = 'factory.lock';

/** How long an empty lock is taken to be one another app is writing (no hard links: create, then write). */
export const LOCK_BIRTH_MS = 2_000;

export interface InstanceLockOptions {
  /** fs.linkSync; tests give one that fails as on a file system without hard links. */
  link?: (existing: string, newPath: string) => void;
}

export function acquireInstanceLock(dataDir: string, opts: InstanceLockOptions = {}): InstanceLock {
  fs.mkdirSync(dataDir, { recursive: true, mode: 0o700 });
  const file = path.join(dataDir, LOCK_FILE);
  for (let attempt = 0; attempt < 400; attempt++) {
    if (createWithPid(file, opts.link ?? fs.linkSync)) {
      let released = false;
      return {
        file,
        release() {
          if (released) return;
          released = true;
          // Only our own lock: never one a later app took over.
          if (readPid(file) === process.pid) fs.rmSync(file, { force: true });
        },
      };
    }
    const holder = readPid(file);
    if (holder !== undefined && holder !== process.pid && pidAlive(holder)) throw new DataDirInUseError(dataDir, holder);
    if (holder === undefined && beingWritten(file)) {
      sleepMs(10);
      continue;
    }
    // Stale (its process is gone) or unreadable. Apps started at the same moment all see it so: one at a time
    // removes it, and only while it is still the lock that was seen, never one another app has just made.
    const removed = whileHoldingTakeover(file, () => removeIfStill(file, holder));
    if (!removed) sleepMs(10);
  }
  throw new Error(`could not take the lock ${file}: it keeps reappearing`);
}

/**
 * Removes the lock only while it is still the one seen as stale: the same pid, or,
 * when it was seen unreadable or gone, a file there that is neither missing nor one
 * being written (without hard links a new lock is empty for a moment, and reads as
 * unreadable as the one seen). Called holding the takeover mutex.
 */
export function removeIfStill(file: string, seen: number | undefined): void {
  if (readPid(file) !== seen) return;
  if (seen === undefined && (!fs.existsSync(file) || beingWritten(file))) return;
  fs.rmSync(file, { force: true });
}

/** Errors of link() on a file system that has no hard links (vfat and exfat say EPERM). */
const NO_HARD_LINKS = new Set(['EPERM', 'ENOTSUP', 'EOPNOTSUPP', 'ENOSYS']);

/** Makes the lock file with our pid in one step (a private file hard-linked into place); false if one exists. */
function createWithPid(file: string, link: (existing: string, newPath: string) => void): boolean {
  const own = `${file}.${process.pid}.${randomBytes(4).toString('hex')}`;
  fs.writeFileSync(own, `${process.pid}\n`, { mode: 0o600, flag: 'wx' });
  try {
    link(own, file);
    return true;
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code ?? '';
    if (code === 'EEXIST') return false;
    if (NO_HARD_LINKS.has(code)) return createExclusive(file);
    throw err;
  } finally {
    fs.rmSync(own, { force: true });
  }
}

/** Without hard links: create the lock only if there is none, then write the pid (empty for a moment; see beingWritten). */
function createExclusive(file: string): boolean {
  let fd: number;
  try {
    fd = fs.openSync(file, 'wx', 0o600);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'EEXIST') return false;
    throw err;
  }
  try {
    fs.writeSync(fd, `${process.pid}\n`);
  } catch (err) {
    // Ours and empty: leave no lock that others would wait on.
    fs.rmSync(file, { force: true });
    throw err;
  } finally {
    fs.closeSync(fd);
  }
  return true;
}

/** An empty lock made moments ago: another app has created it and is about to write its pid. */
function beingWritten(file: string): boolean {
  const st = fs.statSync(file, { throwIfNoEntry: false });
  return st !== undefined && st.size === 0 && Date.now() - st.mtimeMs < LOCK_BIRTH_MS;
}

/** Runs `fn` holding a short-lived mutex next to the lock (a folder: mkdir is atomic); false if another app holds it. */
function whileHoldingTakeover(file: string, fn: () => void): boolean {
  const takeover = `${file}.takeover`;
  try {
    fs.mkdirSync(takeover, { mode: 0o700 });
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== 'EEXIST') throw err;
    // Held for microseconds: one this old was left by an app that died holding it.
    const age = Date.now() - (fs.statSync(takeover, { throwIfNoEntry: false })?.mtimeMs ?? Date.now());
    if (age > 10_000) fs.rmSync(takeover, { recursive: true, force: true });
    return false;
  }
  try {
    fn();
    return true;
  } finally {
    fs.rmSync(takeover, { recursive: true, force: true });
  }
}

function sleepMs(ms: number): void {
  Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, ms);
}

export function readPid(file: string): number | undefined {
  let text: string;
  try {
    text = fs.readFileSync(file, 'utf8');
  } catch {
    // No lock file (or unreadable): nobody holds the data folder.
    return undefined;
  }
  const pid = Number(text.trim());
  return Number.isInteger(pid) && pid > 0 ? pid : undefined;
}

export function pidAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (err) {
    // EPERM: it exists, it is just not ours.
    return (err as NodeJS.ErrnoException).code === 'EPERM';
  }
}
