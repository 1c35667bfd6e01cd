import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { CodexAdapter } from '../../../main/pipeline/agents/codex.js';
import { CustomCommandAdapter } from '../../../main/pipeline/agents/custom-command.js';
import { builtInAgents } from '../../../main/pipeline/agents/registry.js';
import { renderCommand } from '../../../main/pipeline/agents/shell.js';

const fixtures = path.join(path.dirname(fileURLToPath(import.meta.url)), '../../fixtures/agents');
const codexSuccess = fs.readFileSync(path.join(fixtures, 'codex-success.jsonl'), 'utf8');
const env = { OPENAI_BASE_URL: 'http://10.0.2.100/v1', OPENAI_API_KEY: 'placeholder-1' };

describe('CodexAdapter', () => {
  it('runs codex exec --json with the prompt on stdin and a provider pointing at the proxy', () => {
    const spec = new CodexAdapter().command({ promptFile: '/work/.factory/p.md', cwd: '/work/repo', env });
    expect(spec.argv.slice(0, 7)).toEqual(['/usr/local/bin/codex', 'exec', '--json', '--dangerously-bypass-approvals-and-sandbox', '--skip-git-repo-check', '--cd', '/work/repo']);
    expect(spec.argv).toContain('model_providers.factory.base_url="http://10.0.2.100/v1"');
    // Its update check, analytics and plugin sync are off, each as a -c override.
    for (const kv of ['check_for_update_on_startup=false', 'analytics.enabled=false', 'features.plugins=false']) expect(spec.argv[spec.argv.indexOf(kv) - 1]).toBe('-c');
    expect(spec.argv.at(-1)).toBe('-');
    expect(spec.stdinFile).toBe('/work/.factory/p.md');
    expect(renderCommand(spec)).toContain(`-c 'model_providers.factory.base_url="http://10.0.2.100/v1"'`);
  });

  it('refuses a base URL that could break out of its TOML string, and missing broker env', () => {
    expect(() => new CodexAdapter().command({ promptFile: 'p', cwd: '/w', env: { ...env, OPENAI_BASE_URL: 'http://x/"\nmodel="evil' } })).toThrow(/not a plain http\(s\) URL/);
    expect(() => new CodexAdapter().command({ promptFile: 'p', cwd: '/w', env: { OPENAI_BASE_URL: 'http://x' } })).toThrow(/Codex needs OPENAI_API_KEY/);
  });

  it('reads recorded --json output: command, message, usage', () => {
    const p = new CodexAdapter().createParser();
    const events = [...p.push(codexSuccess.slice(0, 100)), ...p.push(codexSuccess.slice(100))];
    const { outcome } = p.end();
    expect(events.filter((e) => e.kind === 'tool-use')).toEqual([{ kind: 'tool-use', name: 'command', detail: "/bin/bash -lc 'echo hi > hello.txt'" }]);
    expect(events.filter((e) => e.kind === 'tool-result')).toEqual([{ kind: 'tool-result', isError: false }]);
    expect(outcome.result).toEqual({ ok: true, summary: 'Wrote hello.txt.', turns: 1, tokens: { input: 200, output: 40 } });
  });

  it('fails on turn.failed, and on a stream that stops before the turn completes', () => {
    const failed = new CodexAdapter().createParser();
    failed.push('{"type":"thread.started","thread_id":"t"}\n{"type":"turn.started"}\n{"type":"turn.failed","error":{"message":"unexpected status 401 Unauthorized"}}\n');
    expect(failed.end().outcome.result).toMatchObject({ ok: false, error: 'Codex failed: unexpected status 401 Unauthorized' });

    const cut = new CodexAdapter().createParser();
    cut.push(codexSuccess.split('\n').slice(0, 5).join('\n'));
    const r = cut.end().outcome.result;
    expect(r.ok).toBe(false);
    expect(r.error).toMatch(/^Codex output ended before its turn completed/);
    expect(r.summary).toBe('Wrote hello.txt.');
  });

  it('counts malformed lines and ignores unknown event types', () => {
    const p = new CodexAdapter().createParser();
    p.push('{"type":"item.completed","item":{"type":5}}\n{"type":"future.event"}\n{oops\n' + codexSuccess);
    const { outcome } = p.end();
    expect(outcome.stats).toMatchObject({ malformed: 2, other: 1 });
    expect(outcome.result.ok).toBe(true);
  });
});

describe('CustomCommandAdapter', () => {
  it('substitutes the prompt file literally, keeps stdin delivery, and checks its broker env', () => {
    const a = new CustomCommandAdapter({ argv: ['my-agent', '--prompt-file={{promptFile}}', '$(x)'], brokerEnv: ['ANTHROPIC_API_KEY'], env: { MODE: 'ci' } });
    const spec = a.command({ promptFile: "/p/it's.md", cwd: '/work/repo', env: { ANTHROPIC_API_KEY: 'ph' } });
    expect(spec.argv).toEqual(['my-agent', "--prompt-file=/p/it's.md", '$(x)']);
    expect(renderCommand(spec)).toBe(`cd /work/repo && exec env MODE=ci ANTHROPIC_API_KEY=ph my-agent '--prompt-file=/p/it'\\''s.md' '$(x)' < '/p/it'\\''s.md'`);
    expect(() => a.command({ promptFile: 'p', cwd: '/w', env: {} })).toThrow(/needs ANTHROPIC_API_KEY/);
    expect(() => new CustomCommandAdapter({ argv: [] })).toThrow(/needs a program/);
    expect(() => new CustomCommandAdapter({ argv: ['x'], brokerEnv: ['A-B'] })).toThrow(/not an environment variable name/);
  });

  it('keeps the last output line as its summary', () => {
    const p = new CustomCommandAdapter({ argv: ['x'] }).createParser();
    p.push('working...\r\n\x1b[32mall done\x1b[0m\r\n');
    expect(p.end().outcome.result).toEqual({ ok: true, summary: 'all done' });
  });
});

describe('builtInAgents', () => {
  it('lists Claude Code and Codex, and a custom agent only when configured', () => {
    expect([...builtInAgents().keys()]).toEqual(['claude-code', 'codex']);
    expect([...builtInAgents({ custom: { argv: ['a'] } }).keys()]).toEqual(['claude-code', 'codex', 'custom']);
  });
});
