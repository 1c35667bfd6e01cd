// Measures the peak resident memory of every git process the code under test
// starts. A `git` wrapper placed first on PATH runs the real git under GNU
// time, which reports the child's ru_maxrss (exact, from wait4, including the
// processes git itself starts and waits for), its exit status and the
// address-space limit the child was given. Nothing is estimated or polled.
//
// A run that the code under test kills itself (output cap, wall-clock
// timeout) kills GNU time rather than git, so it leaves no record; git then
// ends on its broken pipe. The bomb tests never hit either.
//
// The wrapper also caps each git at an address space of its own
// (`safetyCapKiB`, only ever lowering a limit) so that a run of the old,
// unbounded code cannot make the machine swap.
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { tempDir } from './repo.js';

export interface GitRun {
  /** Peak resident set size, KiB. */
  maxRssKiB: number;
  elapsedS: number;
  exitStatus: number;
  /** The git subcommand line as run (arguments after the -c options are kept). */
  command: string;
  /** `ulimit -v` as the git process saw it: KiB, or 'unlimited'. */
  addressLimit: string;
}

export interface GitRssProbe {
  runs(): GitRun[];
  reset(): void;
  restore(): void;
}

const GNU_TIME = '/usr/bin/time';

/** Puts the measuring wrapper first on PATH until `restore()`. */
export function installGitRssProbe(opts: { safetyCapKiB?: number } = {}): GitRssProbe {
  if (!fs.existsSync(GNU_TIME)) {
    throw new Error(`${GNU_TIME} (GNU time, Debian package "time") is needed to measure the peak memory of git`);
  }
  const realGit = execFileSync('sh', ['-c', 'command -v git']).toString().trim();
  const dir = tempDir('factory-git-rss-');
  const log = path.join(dir, 'runs.log');
  const cap = opts.safetyCapKiB ?? 6 * 1024 * 1024;
  const q = (s: string) => `'${s.replace(/'/g, `'\\''`)}'`;
  fs.writeFileSync(path.join(dir, 'git'), [
    '#!/bin/sh',
    `cur=$(ulimit -v)`,
    `if [ "$cur" = unlimited ] || [ "$cur" -gt ${cap} ]; then ulimit -v ${cap}; fi`,
    `lim=$(ulimit -v)`,
    // One line per run: RSS KiB, seconds, exit status, limit, then the command.
    `exec ${GNU_TIME} -q -a -o ${q(log)} -f "RUN %M %e %x $lim %C" ${q(realGit)} "$@"`,
    '',
  ].join('\n'), { mode: 0o755 });
  const savedPath = process.env.PATH;
  process.env.PATH = `${dir}${path.delimiter}${savedPath ?? ''}`;
  return {
    runs() {
      if (!fs.existsSync(log)) return [];
      return fs.readFileSync(log, 'utf8').split('\n').filter((l) => l.startsWith('RUN ')).map((l) => {
        const [, rss, elapsed, status, limit, ...cmd] = l.split(' ');
        return {
          maxRssKiB: Number(rss),
          elapsedS: Number(elapsed),
          exitStatus: Number(status),
          addressLimit: limit ?? '',
          command: cmd.join(' ').replace(/(-c \S+ )+/g, '').replace(/^\S*git --no-pager /, 'git '),
        };
      });
    },
    reset() {
      fs.rmSync(log, { force: true });
    },
    restore() {
      process.env.PATH = savedPath;
      fs.rmSync(dir, { recursive: true, force: true });
    },
  };
}

/** The run with the largest peak RSS, for messages. */
export function largest(runs: GitRun[]): GitRun | undefined {
  return runs.reduce<GitRun | undefined>((a, b) => (a && a.maxRssKiB >= b.maxRssKiB ? a : b), undefined);
}
