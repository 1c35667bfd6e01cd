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
import { setupScript, type SetupStepSpec } from '../../../main/tasks/setup-step.js';

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
    expect(fs.readFileSync(path.join(r.repoDir, 'where'), 'utf8').trim()).toBe(fs.realpathSync(r.repoDir));
  });

  it('ends with 100 + the index of the step that failed and runs nothing after it', () => {
    const r = run([step('one', 'true'), step('npm ci', 'echo installing; exit 3'), step('three', 'echo never')]);
    expect(r.code).toBe(101);
    expect(r.out).toContain('npm ci failed (exit status 3)');
    expect(r.out).not.toContain('never');
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
