// One app per data dir: a lock file holding the owner's pid, taken before the app
// starts its services (a second app would reap the first one's sandboxes as
// leftovers). A lock whose pid is gone is stale and taken over.
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

export function acquireInstanceLock(dataDir: string): InstanceLock {
  fs.mkdirSync(dataDir, { recursive: true, mode: 0o700 });
  const file = path.join(dataDir, LOCK_FILE);
  for (let attempt = 0; attempt < 3; attempt++) {
    try {
      const fd = fs.openSync(file, 'wx', 0o600);
      fs.writeSync(fd, `${process.pid}\n`);
      fs.closeSync(fd);
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
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== 'EEXIST') throw err;
    }
    const holder = readPid(file);
    if (holder !== undefined && holder !== process.pid && pidAlive(holder)) throw new DataDirInUseError(dataDir, holder);
    // Stale (its process is gone) or unreadable: remove it and try again.
    fs.rmSync(file, { force: true });
  }
  throw new Error(`could not take the lock ${file}: it keeps reappearing`);
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
