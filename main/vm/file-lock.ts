// A lock file holding the owner's pid, so two app instances (or a test run and
// the app) never build the same image or snapshot at once, and a lock left by a
// process that died mid-build is taken over instead of blocking forever.
import { open, readFile, rm, stat } from 'node:fs/promises';

/** Tries once to take the lock; removes a stale one so the next try can win. */
export async function takeLock(lockFile: string): Promise<boolean> {
  try {
    const fh = await open(lockFile, 'wx');
    await fh.writeFile(String(process.pid));
    await fh.close();
    return true;
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== 'EEXIST') throw err;
  }
  // Unreadable (gone, or being written) counts as no holder; the age check below keeps a fresh one.
  const holder = Number((await readFile(lockFile, 'utf8').catch(() => '')).trim());
  if (!holder || !processAlive(holder)) {
    // A lock without a pid may be one being written right now: only old ones are stale.
    const age = Date.now() - (await stat(lockFile).catch(() => ({ mtimeMs: 0 }))).mtimeMs;
    if (holder || age > 10_000) await rm(lockFile, { force: true });
  }
  return false;
}

/**
 * Waits until another process's work is there (`ready` gives it) or this process
 * holds the lock (undefined: build it, then remove the lock). `onWait` runs before each pause.
 */
export async function lockUnlessReady<T>(lockFile: string, ready: () => T | undefined, pollMs: number, onWait?: () => void): Promise<T | undefined> {
  for (;;) {
    const done = ready();
    if (done !== undefined) return done;
    if (await takeLock(lockFile)) {
      // The other process may have finished and let go between the look above and the lock.
      const late = ready();
      if (late === undefined) return undefined;
      await rm(lockFile, { force: true });
      return late;
    }
    onWait?.();
    await new Promise((r) => setTimeout(r, pollMs));
  }
}

export function processAlive(pid: number): boolean {
  if (pid === process.pid) return true;
  try {
    process.kill(pid, 0);
    return true;
  } catch (err) {
    return (err as NodeJS.ErrnoException).code === 'EPERM';
  }
}
