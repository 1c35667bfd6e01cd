// The setup script the host writes: run by a real bash (root steps only: the
// agent steps need the guest's runuser, so they are only parsed here). A failing
// step ends the script with 100 + its index, which is how the host names it;
// a step's name from the repository is printed, never run.
import { execFileSync, spawnSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import * as pty from 'node-pty';
import { afterEach, describe, expect, it } from 'vitest';
import { LIST_PROCESSES, endLeftoversScript, setupScript, type SetupStepSpec } from '../../../main/tasks/setup-step.js';

const dirs: string[] = [];
afterEach(() => {
  for (const d of dirs.splice(0)) fs.rmSync(d, { recursive: true, force: true });
});

function prepare(steps: SetupStepSpec[], env: string) {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'setup-step-'));
  dirs.push(dir);
  const setupDir = path.join(dir, 'setup');
  const repoDir = path.join(dir, 'repo');
  fs.mkdirSync(setupDir);
  fs.mkdirSync(repoDir);
  fs.writeFileSync(path.join(setupDir, 'env.sh'), env);
  steps.forEach((s, i) => fs.writeFileSync(path.join(setupDir, `step-${i}.sh`), s.script));
  const script = path.join(setupDir, 'setup.sh');
  fs.writeFileSync(script, setupScript(steps, { setupDir, repoDir }));
  return { script, repoDir };
}

function run(steps: SetupStepSpec[], env = 'export GREETING=hello\n') {
  const { script, repoDir } = prepare(steps, env);
  const r = spawnSync('bash', [script], { encoding: 'utf8' });
  return { code: r.status, out: r.stdout + r.stderr, repoDir };
}

const step = (name: string, script: string, user: 'root' | 'agent' = 'root'): SetupStepSpec => ({ name, user, script, display: `the ${name} step`, timeoutSeconds: 30 });

describe('the setup script', () => {
  it('runs each step in the repository with the environment, in order', () => {
    const r = run([step('one', 'pwd > where; echo "first $GREETING"'), step('two', 'echo second')]);
    expect(r.code).toBe(0);
    expect(r.out).toMatch(/first hello[\s\S]*second[\s\S]*setup done/);
    // Each step says how long it took, so a slow setup names the step to look at.
    expect(r.out).toMatch(/\r\x1b\[Kone: \d+ s\n[\s\S]*\r\x1b\[Ktwo: \d+ s\n/);
    expect(fs.readFileSync(path.join(r.repoDir, 'where'), 'utf8').trim()).toBe(fs.realpathSync(r.repoDir));
  });

  it('ends with 100 + the index of the step that failed and runs nothing after it', () => {
    const r = run([step('one', 'true'), step('npm ci', 'echo installing; exit 3'), step('three', 'echo never')]);
    expect(r.code).toBe(101);
    expect(r.out).toContain('npm ci failed (exit status 3)');
    expect(r.out).not.toContain('never');
    expect(r.out).not.toMatch(/npm ci: \d+ s/);
  });

  it('fails a step on its first failing command (bash -e), not only on its last', () => {
    const r = run([step('strict', 'false\necho after-false')]);
    expect(r.code).toBe(100);
    expect(r.out).not.toContain('after-false');
  });

  it('prints a hostile step name as text and never runs it', () => {
    const r = run([step(`x'; touch pwned; echo '$(touch pwned2)`, 'true')]);
    expect(r.code).toBe(0);
    expect(fs.existsSync(path.join(r.repoDir, 'pwned'))).toBe(false);
    expect(fs.existsSync(path.join(r.repoDir, 'pwned2'))).toBe(false);
    expect(r.out).toContain('$(touch pwned2)');
  });

  it('lets a step set up the terminal, as apt and dpkg do, without being stopped (real pty)', async () => {
    const { script } = prepare([step('terminal', 'stty -echo; stty echo; echo configured')], '');
    const term = pty.spawn('bash', [script], { cols: 80, rows: 24 });
    let out = '';
    term.onData((d) => (out += d));
    const code = await new Promise<number | 'stopped'>((resolve) => {
      const timer = setTimeout(() => resolve('stopped'), 10_000);
      term.onExit(({ exitCode }) => {
        clearTimeout(timer);
        resolve(exitCode);
      });
    });
    if (code === 'stopped') term.kill('SIGKILL');
    expect(code).toBe(0);
    expect(out).toContain('configured');
  });

  it('writes agent steps that bash parses', () => {
    const text = setupScript([step('agent install', 'npm ci', 'agent'), step('root', 'apt-get update')]);
    expect(() => execFileSync('bash', ['-n'], { input: text })).not.toThrow();
    expect(text).toContain('runuser -u agent');
  });
});

// In a PID namespace of its own (bash as its PID 1, as tini is in the guest), so no process of this machine is in reach.
const canUnshare = spawnSync('unshare', ['-fp', '--mount-proc', 'true']).status === 0;

describe.skipIf(!canUnshare)('what setup leaves running', () => {
  it('is ended before the freeze; what ran before setup, and what the host runs under it, is not', () => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'setup-leftovers-'));
    dirs.push(dir);
    fs.writeFileSync(path.join(dir, 'list.sh'), LIST_PROCESSES);
    fs.writeFileSync(path.join(dir, 'end.sh'), endLeftoversScript(path.join(dir, 'before')));
    const alive = 'for f in /proc/[0-9]*; do [ "$(cut -d" " -f3 $f/stat 2>/dev/null)" = Z ] && continue; tr "\\0" " " < $f/cmdline 2>/dev/null; echo; done | grep -x "sleep 10[0-9][0-9] " | sort | tr -d "\\n"';
    const script = [
      // A service from before setup, and the host's session, which starts something while setup runs.
      'sleep 1001 & (sleep 0.3; sleep 1002 & wait) &',
      `bash ${dir}/list.sh > ${dir}/before`,
      // Setup: a daemon (its own session), a background job whose shell is gone, a daemon with a child.
      '(setsid sleep 1003 < /dev/null > /dev/null 2>&1 &)',
      '(sleep 1004 &)',
      '(bash -c "sleep 1005 & sleep 1006" &)',
      'sleep 0.6',
      `echo "before: $(${alive})"`,
      `bash ${dir}/end.sh`,
      'sleep 0.3',
      `echo "after: $(${alive})"`,
    ].join('\n');
    const r = spawnSync('unshare', ['-fp', '--mount-proc', 'bash', '-c', script], { encoding: 'utf8', timeout: 30_000 });
    expect(r.stdout, r.stderr).toContain('before: sleep 1001 sleep 1002 sleep 1003 sleep 1004 sleep 1005 sleep 1006 ');
    expect(r.stdout).toMatch(/ended \d+\n/);
    expect(r.stdout).toContain('after: sleep 1001 sleep 1002 \n');
  });

  it('refuses to guess without the list from before setup', () => {
    const r = spawnSync('bash', ['-c', endLeftoversScript('/nonexistent/before')], { encoding: 'utf8' });
    expect(r.status).toBe(1);
    expect(r.stderr).toContain('the list of processes from before setup is missing');
  });
});
