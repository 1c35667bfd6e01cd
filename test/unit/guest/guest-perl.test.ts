// The perl the host runs in guests and on sandbox hosts (vm-images/perl/),
// checked by the host's own perl as it is sent: `perl -c` on each program,
// every file of the folder part of one of them, and the snapshot template's
// waiter pinned to TEMPLATE_VERSION.
import { execFile } from 'node:child_process';
import { createHash } from 'node:crypto';
import { readdirSync } from 'node:fs';
import path from 'node:path';
import { promisify } from 'node:util';
import { describe, expect, it } from 'vitest';
import { identityApplyValues, rekeyScript } from '../../../main/guest/guest-agent.js';
import { perlDir, perlFile, perlOneLine } from '../../../main/guest/guest-perl.js';
import { identityWaiterCommand } from '../../../main/guest/identity-channel.js';
import { TEMPLATE_VERSION } from '../../../main/vm/warm-state.js';

const run = promisify(execFile);

/** The program of a `perl -e '...'` command line (the programs hold no single quote). */
function programOf(command: string): string {
  const m = /perl -e '([^']*)'$/.exec(command);
  if (!m) throw new Error(`no perl -e '...' at the end of ${command.slice(0, 80)}`);
  return m[1]!;
}

async function perlCheck(args: string[]): Promise<string> {
  const r = await run('perl', ['-c', ...args]).catch((err: { stderr?: string }) => ({ stderr: `FAILED: ${err.stderr ?? String(err)}` }));
  return r.stderr.trim();
}

/** The programs as they are sent, by the file they start from. */
const PROGRAMS = {
  'rekey.pl': () => perlCheck(['-e', programOf(rekeyScript())]),
  'identity-waiter.pl': () => perlCheck(['-e', programOf(identityWaiterCommand())]),
  'remote-leak-scan.pl': () => perlCheck([path.join(perlDir(), 'remote-leak-scan.pl')]),
};

describe('the perl scripts of vm-images/perl/', () => {
  it.each(Object.keys(PROGRAMS))('%s compiles as it is sent (perl -c)', async (name) => {
    expect(await PROGRAMS[name as keyof typeof PROGRAMS]()).toMatch(/ syntax OK$/);
  });

  it('has no file that none of the checked programs is made of', () => {
    const reached = new Set<string>();
    const visit = (name: string): void => {
      if (reached.has(name)) return;
      reached.add(name);
      for (const m of perlFile(name).matchAll(/^\s*#include (\S+)\s*$/gm)) visit(m[1]!);
    };
    Object.keys(PROGRAMS).forEach(visit);
    expect([...reached].sort()).toEqual(readdirSync(perlDir()).filter((f) => f.endsWith('.pl')).sort());
  });

  it('keeps the waiter the snapshot template runs as TEMPLATE_VERSION names it', () => {
    // The template keeps the waiter in its saved memory: a waiter that changes without a new
    // TEMPLATE_VERSION meets clones of the old one. Change both, then the hash here.
    const sha256 = createHash('sha256').update(identityWaiterCommand()).digest('hex');
    expect({ TEMPLATE_VERSION, sha256 }).toEqual({ TEMPLATE_VERSION: 3, sha256: 'f8e7ace6f746ef8030f08fbd6f81a88762332af7e2fca5407104fe3ec92b4989' });
  });

  it('sends one line with every placeholder filled, and no comment', () => {
    for (const command of [rekeyScript(), identityWaiterCommand()]) {
      expect(command).not.toMatch(/\n|\{\{|#include| # /);
    }
    expect(programOf(rekeyScript())).toContain('put("/etc/machine-id", "$mid\\n");');
  });

  it('refuses a placeholder without a value, a value without a placeholder, and a name outside the folder', () => {
    expect(() => perlOneLine('rekey.pl', {})).toThrow(/rekey\.pl: no value for \{\{[A-Z_]+\}\}/);
    const values = { ...identityApplyValues(), HOST_KEY: '/k', SSHD_PID_FILE: '/p' };
    expect(() => perlOneLine('rekey.pl', values)).not.toThrow();
    expect(() => perlOneLine('rekey.pl', { ...values, NOT_THERE: 1 })).toThrow('vm-images/perl/rekey.pl has no {{NOT_THERE}}');
    expect(() => perlFile('../debian-bookworm/customize.sh')).toThrow(/not the name of a perl script/);
  });
});
