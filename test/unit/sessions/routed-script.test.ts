// A hooks session's routed commands keep their shell's folder from one call to
// the next, as Claude Code's own Bash tool does: the agent runs `cd packages/a`,
// then `npm test` runs there. The routed script is run here by real bash on a
// folder standing in for the sandbox's repository (a VM cannot boot in a unit
// test; test/integration/hooks-claude-code.test.ts runs it in a real sandbox).
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { routedFolderKey, routedScript } from '../../../main/sessions/routed-script.js';

let root: string;
let repo: string;
let home: string;

beforeEach(() => {
  root = fs.realpathSync(fs.mkdtempSync(path.join(os.tmpdir(), 'routed-')));
  repo = path.join(root, 'repo');
  home = path.join(root, 'home');
  fs.mkdirSync(path.join(repo, 'packages', 'a'), { recursive: true });
  fs.mkdirSync(path.join(repo, 'docs'));
  fs.mkdirSync(home);
});
afterEach(() => fs.rmSync(root, { recursive: true, force: true }));

/** One routed command, as the session service runs it (no working-tree changes to carry). */
function run(command: string, opts: { dir?: string; agentId?: string; agent?: 'codex' } = {}) {
  const r = spawnSync('bash', ['-c', routedScript(repo), 'factory-routed', opts.dir ?? repo, command, '0', routedFolderKey(opts.agentId, opts.agent)], {
    env: { HOME: home, PATH: process.env.PATH },
    encoding: 'utf8',
  });
  return { code: r.status, out: r.stdout.trim(), err: r.stderr.trim() };
}

describe('a routed command', () => {
  it('runs where the last one of the same agent ended, as Claude Code\'s Bash tool does', () => {
    expect(run('pwd').out).toBe(repo);
    expect(run('cd packages/a').code).toBe(0);
    expect(run('pwd').out).toBe(path.join(repo, 'packages', 'a'));
    // A command that fails or exits early still leaves its folder.
    expect(run('cd ../../docs && exit 3').code).toBe(3);
    expect(run('pwd').out).toBe(path.join(repo, 'docs'));
  });

  it('keeps a folder per subagent apart from the session\'s', () => {
    run('cd packages/a');
    run('cd docs', { agentId: 'agent-1' });
    expect(run('pwd').out).toBe(path.join(repo, 'packages', 'a'));
    expect(run('pwd', { agentId: 'agent-1' }).out).toBe(path.join(repo, 'docs'));
  });

  it('keeps none for Codex, whose shell tool starts each command in the turn\'s folder', () => {
    run('cd packages/a', { agent: 'codex' });
    expect(run('pwd', { agent: 'codex' }).out).toBe(repo);
    expect(fs.readdirSync(home)).toEqual([]);
  });

  it('goes back to the session\'s folder, saying so, when the last one left the repository or is gone', () => {
    run('cd /');
    const outside = run('pwd');
    expect(outside.out).toBe(repo);
    expect(outside.err).toBe(`factory: the shell's folder was reset to ${repo} (/ is outside the repository)`);
    run('cd packages/a');
    fs.rmSync(path.join(repo, 'packages'), { recursive: true });
    const gone = run('pwd', { dir: path.join(repo, 'docs') });
    expect(gone.out).toBe(path.join(repo, 'docs'));
    expect(gone.err).toContain(`reset to ${path.join(repo, 'docs')} (${path.join(repo, 'packages', 'a')} is gone)`);
  });

  it('is the model\'s line as bash -c runs it: no arguments, its status, its syntax errors', () => {
    expect(run('echo "$0 $#"').out).toBe('bash 0');
    expect(run('false').code).toBe(1);
    const bad = run('if then');
    expect(bad.code).toBe(2);
    expect(bad.err).toMatch(/syntax error/);
    // A folder name that is a shell command is only a name.
    fs.mkdirSync(path.join(repo, '$(touch pwned)'));
    run("cd '$(touch pwned)'");
    expect(run('pwd').out).toBe(path.join(repo, '$(touch pwned)'));
    expect(fs.existsSync(path.join(repo, '$(touch pwned)', 'pwned'))).toBe(false);
  });
});
