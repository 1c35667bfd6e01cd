// Resource bounds for every git process the host starts. Git reads untrusted
// bytes (a sandbox's bundle, its objects, its diff) and a few hundred bytes
// can declare gigabytes, so each git runs under kernel limits it cannot lift:
// an address-space cap (RLIMIT_AS, so resident memory can never pass it) and a
// CPU-time cap (RLIMIT_CPU), set by util-linux `prlimit` before git is exec'd
// and inherited by every process git starts. On top, GIT_ALLOC_LIMIT makes git
// refuse any single allocation over a size, and a few settings keep git's own
// caches and threads small.
//
// Everything has a host default (generous: the user's own repository can be
// large); callers and folders holding guest data choose stricter bounds, and
// the result is always the stricter of the two.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { FactoryError } from '../../common/errors.js';

export interface GitLimits {
  /** Address-space cap of git and of each process it starts, bytes. */
  addressSpaceBytes: number;
  /** CPU seconds for git and for each process it starts; SIGXCPU after. */
  cpuSeconds: number;
  /** GIT_ALLOC_LIMIT: git dies rather than make one allocation above this. */
  allocBytes?: number;
  /** Extra `-c name=value` settings (caches, thresholds, threads). */
  config?: Readonly<Record<string, string>>;
}

const MiB = 1024 * 1024;
const GiB = 1024 * MiB;

/** For git on the user's own repository (seed bundles of big histories included). */
export const HOST_GIT_LIMITS: GitLimits = { addressSpaceBytes: 16 * GiB, cpuSeconds: 3600 };

export interface GuestDataCaps {
  /** Largest object (uncompressed) a result may hold or a diff may read. */
  maxObjectBytes: number;
  /** Text files above this are shown as binary: git's line diff costs ~45 bytes of memory per line. */
  maxDiffTextBytes: number;
  cpuSeconds: number;
}

export const DEFAULT_GUEST_DATA_CAPS: GuestDataCaps = { maxObjectBytes: 100 * MiB, maxDiffTextBytes: 4 * MiB, cpuSeconds: 60 };

/**
 * Bounds for git reading a sandbox's data. The address space leaves room for
 * the largest allowed object three times over (a delta's base, its result and
 * a diff's other side), git's own mappings, and the line diff of text files up
 * to the threshold.
 */
export function guestDataLimits(caps: GuestDataCaps = DEFAULT_GUEST_DATA_CAPS): GitLimits {
  return {
    addressSpaceBytes: 3 * caps.maxObjectBytes + 100 * caps.maxDiffTextBytes + 256 * MiB,
    cpuSeconds: caps.cpuSeconds,
    allocBytes: caps.maxObjectBytes + 32 * MiB,
    config: {
      'core.bigFileThreshold': String(caps.maxDiffTextBytes),
      'core.deltaBaseCacheLimit': String(16 * MiB),
      'core.packedGitWindowSize': String(16 * MiB),
      'core.packedGitLimit': String(128 * MiB),
      'pack.threads': '1',
      'pack.windowMemory': String(64 * MiB),
      'pack.deltaCacheSize': String(16 * MiB),
      'pack.deltaCacheLimit': '1000',
    },
  };
}

/** The stricter of two bounds, field by field (settings of `b` win). */
export function stricter(a: GitLimits, b?: GitLimits): GitLimits {
  if (!b) return a;
  const alloc = [a.allocBytes, b.allocBytes].filter((x): x is number => x !== undefined);
  return {
    addressSpaceBytes: Math.min(a.addressSpaceBytes, b.addressSpaceBytes),
    cpuSeconds: Math.min(a.cpuSeconds, b.cpuSeconds),
    ...(alloc.length ? { allocBytes: Math.min(...alloc) } : {}),
    config: { ...a.config, ...b.config },
  };
}

// Folders whose repositories hold guest data: any git whose working folder or
// GIT_DIR lies inside one runs under that folder's bounds, whoever calls it.
const guestDataRoots = new Map<string, GitLimits>();

export function boundGitUnder(dir: string, limits: GitLimits): void {
  const key = path.resolve(dir);
  guestDataRoots.set(key, stricter(guestDataRoots.get(key) ?? limits, limits));
}

/** The bounds a git run gets: the host default, any guest-data folder it works in, and the caller's. */
export function effectiveLimits(opts: { cwd?: string; gitDir?: string; limits?: GitLimits }): GitLimits {
  let out = HOST_GIT_LIMITS;
  for (const dir of [opts.cwd, opts.gitDir]) {
    if (!dir) continue;
    const abs = path.resolve(opts.cwd ?? '.', dir);
    for (const [root, limits] of guestDataRoots) {
      if (abs === root || abs.startsWith(root + path.sep)) out = stricter(out, limits);
    }
  }
  return stricter(out, opts.limits);
}

const prlimitByPath = new Map<string, string | undefined>();

function findOnPath(name: string, searchPath: string): string | undefined {
  for (const d of searchPath.split(path.delimiter)) {
    if (!d) continue;
    const p = path.join(d, name);
    try {
      fs.accessSync(p, fs.constants.X_OK);
      if (fs.statSync(p).isFile()) return p;
    } catch {
      // not here
    }
  }
  return undefined;
}

/** This process's hard limits (the kernel refuses to raise them for an unprivileged child). */
function hardLimit(name: 'Max address space' | 'Max cpu time'): number {
  try {
    const line = fs.readFileSync('/proc/self/limits', 'utf8').split('\n').find((l) => l.startsWith(name));
    const hard = line?.slice(26).trim().split(/\s+/)[1];
    return hard && /^\d+$/.test(hard) ? Number(hard) : Infinity;
  } catch {
    // No /proc (macOS): no hard limit known, so the requested bounds are used as they are.
    return Infinity;
  }
}

/**
 * The command that runs `git <args>` under `limits`: prlimit on Linux (where
 * the address-space cap is enforced); on macOS a POSIX shell's `ulimit -t`, as
 * RLIMIT_AS is not enforced there, and GIT_ALLOC_LIMIT and the quarantine's
 * object caps carry the memory bound.
 */
export function boundedGitCommand(limits: GitLimits, gitArgs: readonly string[], platform: NodeJS.Platform = process.platform): {
  command: string;
  args: string[];
  env: Record<string, string>;
} {
  const env: Record<string, string> = limits.allocBytes !== undefined ? { GIT_ALLOC_LIMIT: String(limits.allocBytes) } : {};
  const config = Object.entries(limits.config ?? {}).flatMap(([k, v]) => ['-c', `${k}=${v}`]);
  const cpuSoft = Math.max(1, Math.floor(Math.min(limits.cpuSeconds, hardLimit('Max cpu time'))));
  // Soft below hard: the kernel sends SIGXCPU at the soft limit (SIGKILL only at the hard one), so the cause is known.
  const cpuHard = Math.min(cpuSoft + 5, hardLimit('Max cpu time'));
  if (platform === 'linux') {
    const searchPath = process.env.PATH ?? '';
    if (!prlimitByPath.has(searchPath)) prlimitByPath.set(searchPath, findOnPath('prlimit', searchPath));
    const prlimitPath = prlimitByPath.get(searchPath);
    if (!prlimitPath) {
      throw new FactoryError(
        'GitUnavailable',
        'prlimit (util-linux) was not found: it is needed to bound the memory and CPU time of git on untrusted data; install util-linux',
      );
    }
    const as = Math.floor(Math.min(limits.addressSpaceBytes, hardLimit('Max address space')));
    return {
      command: prlimitPath,
      args: [`--as=${as}`, `--cpu=${cpuSoft}:${cpuHard}`, '--core=0', 'git', ...config, ...gitArgs],
      env,
    };
  }
  if (platform === 'win32') {
    // No rlimits there (Windows support comes later): GIT_ALLOC_LIMIT and the quarantine's caps still hold.
    return { command: 'git', args: [...config, ...gitArgs], env };
  }
  return {
    command: '/bin/sh',
    args: ['-c', 'ulimit -c 0; ulimit -t "$1" || exit 125; shift; exec "$@"', 'git-limits', String(cpuSoft), 'git', ...config, ...gitArgs],
    env,
  };
}

export type LimitExceeded = 'memory' | 'cpu';

/**
 * Whether a git run ended because it hit one of its bounds. A wrapper between
 * prlimit and git (a shell, GNU time) reports git's death by signal N as exit
 * 128+N, so both forms count.
 */
export function limitExceeded(signal: NodeJS.Signals | null, stderr: string, code: number | null = null): LimitExceeded | undefined {
  const sig = signal ?? (code !== null && code > 128 ? signalName(code - 128) : undefined);
  if (sig === 'SIGXCPU') return 'cpu';
  if (/attempting to allocate \d+ over limit \d+|out of memory|cannot allocate memory|mmap failed|cannot be mapped/i.test(stderr)) return 'memory';
  if (sig === 'SIGSEGV' || sig === 'SIGABRT' || sig === 'SIGBUS') return 'memory';
  return undefined;
}

function signalName(n: number): string | undefined {
  return Object.entries(os.constants.signals).find(([, v]) => v === n)?.[0];
}

export function describeLimit(kind: LimitExceeded, limits: GitLimits): string {
  if (kind === 'cpu') return `its CPU time bound of ${limits.cpuSeconds} s`;
  const alloc = limits.allocBytes !== undefined ? ` and ${formatBytes(limits.allocBytes)} per allocation` : '';
  return `its memory bound (${formatBytes(limits.addressSpaceBytes)} of address space${alloc})`;
}

export function formatBytes(n: number): string {
  if (n >= GiB) return `${(n / GiB).toFixed(n % GiB ? 1 : 0)} GiB`;
  if (n >= MiB) return `${(n / MiB).toFixed(n % MiB ? 1 : 0)} MiB`;
  if (n >= 1024) return `${(n / 1024).toFixed(n % 1024 ? 1 : 0)} KiB`;
  return `${n} bytes`;
}
