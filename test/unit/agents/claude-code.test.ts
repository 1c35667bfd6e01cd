import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { ClaudeCodeAdapter } from '../../../main/pipeline/agents/claude-code.js';
import { renderCommand } from '../../../main/pipeline/agents/shell.js';
import type { AgentEvent, AgentStreamParser } from '../../../main/pipeline/agents/types.js';

const fixtures = path.join(path.dirname(fileURLToPath(import.meta.url)), '../../fixtures/agents');
const fixture = (name: string) => fs.readFileSync(path.join(fixtures, name), 'utf8');

function feed(parser: AgentStreamParser, text: string, chunkSize = 7): AgentEvent[] {
  const events: AgentEvent[] = [];
  for (let i = 0; i < text.length; i += chunkSize) events.push(...parser.push(text.slice(i, i + chunkSize)));
  return events;
}

describe('ClaudeCodeAdapter command', () => {
  const adapter = new ClaudeCodeAdapter();
  const inv = {
    promptFile: "/work/.factory-run/plan prompt's.md",
    cwd: '/work/repo',
    env: { ANTHROPIC_BASE_URL: 'http://10.0.2.100', ANTHROPIC_API_KEY: 'placeholder-abc' },
  };

  it('runs headless with stream-json, skipped permissions and the prompt on stdin', () => {
    const spec = adapter.command({ ...inv, maxTurns: 30, model: 'claude-x' });
    expect(spec.argv).toEqual([
      '/usr/local/bin/claude', '-p', '--output-format', 'stream-json', '--verbose', '--dangerously-skip-permissions',
      '--model', 'claude-x', '--max-turns', '30',
    ]);
    expect(spec.stdinFile).toBe(inv.promptFile);
    expect(spec.env).toMatchObject({ ...inv.env, DISABLE_TELEMETRY: '1', DISABLE_AUTOUPDATER: '1', CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC: '1' });
    const line = renderCommand(spec);
    expect(line).toBe(
      "cd /work/repo && exec env DISABLE_TELEMETRY=1 DISABLE_AUTOUPDATER=1 DISABLE_ERROR_REPORTING=1 CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1 " +
        "ANTHROPIC_BASE_URL=http://10.0.2.100 ANTHROPIC_API_KEY=placeholder-abc /usr/local/bin/claude -p --output-format stream-json --verbose " +
        "--dangerously-skip-permissions --model claude-x --max-turns 30 < '/work/.factory-run/plan prompt'\\''s.md'",
    );
  });

  it('names the broker variables it needs and refuses to run without them', () => {
    expect(adapter.brokerEnv).toEqual(['ANTHROPIC_BASE_URL', 'ANTHROPIC_API_KEY']);
    expect(() => adapter.command({ ...inv, env: { ANTHROPIC_BASE_URL: 'http://10.0.2.100' } })).toThrow(/ANTHROPIC_API_KEY from the credential broker/);
    expect(() => adapter.command({ ...inv, env: { ...inv.env, 'BAD NAME': 'x' } })).toThrow(/not an environment variable name/);
  });
});

describe('ClaudeStreamJsonParser on recorded CLI output', () => {
  it('reads a successful run: init, text, tool uses, tool results and the result', () => {
    const parser = new ClaudeCodeAdapter().createParser();
    const events = feed(parser, fixture('claude-success.jsonl'));
    const { events: tail, outcome } = parser.end();
    const all = [...events, ...tail];
    expect(all[0]).toMatchObject({ kind: 'init', model: 'claude-opus-5-5', version: '2.1.332' });
    expect(all.filter((e) => e.kind === 'tool-use')).toEqual([
      { kind: 'tool-use', name: 'Write', detail: '/work/repo/hello.txt' },
      { kind: 'tool-use', name: 'Bash', detail: 'echo bashran > /work/repo/bash.txt' },
    ]);
    expect(all.filter((e) => e.kind === 'tool-result')).toEqual([
      { kind: 'tool-result', isError: false },
      { kind: 'tool-result', isError: false },
    ]);
    expect(all.filter((e) => e.kind === 'text').map((e) => (e as { text: string }).text)).toContain('I will write the file.');
    expect(outcome.result).toMatchObject({
      ok: true,
      summary: 'Created hello.txt and bash.txt.\nBoth files are in the repository root.',
      turns: 3,
      costUsd: expect.any(Number),
      durationMs: expect.any(Number),
    });
    expect(outcome.result.tokens!.input).toBeGreaterThan(1000);
    expect(outcome.result.tokens!.output).toBeGreaterThan(0);
    expect(outcome.stats).toMatchObject({ malformed: 0, oversize: 0, lines: 8 });
    expect(all.filter((e) => e.kind === 'result')).toHaveLength(2); // the line itself, then end()
  });

  it('reports the turn limit as a failure', () => {
    const parser = new ClaudeCodeAdapter().createParser();
    feed(parser, fixture('claude-max-turns.jsonl'), 4096);
    const { outcome } = parser.end();
    expect(outcome.result.ok).toBe(false);
    expect(outcome.result.error).toBe('Claude Code stopped at its turn limit (2 turns)');
  });

  it('reports an API error (the proxy refused the key) with its status, and the retries on the way', () => {
    const parser = new ClaudeCodeAdapter().createParser();
    const events = feed(parser, fixture('claude-auth-error.jsonl'), 100);
    const { outcome } = parser.end();
    const retries = events.filter((e) => e.kind === 'api-retry');
    expect(retries).toHaveLength(10);
    expect(retries[0]).toEqual({ kind: 'api-retry', attempt: 1, status: 401, error: 'authentication_failed' });
    expect(outcome.result.ok).toBe(false);
    expect(outcome.result.error).toBe('Claude Code reported an error (model API status 401): Invalid API key · Fix external API key');
  });

  it('says the model API failed and how when no status came back (a reset, a stream cut off: found by the soak, seed 4242)', () => {
    // Recorded in a sandbox: Claude Code 2.1.332 through the proxy to a stub that cut its SSE stream off mid-event.
    const parser = new ClaudeCodeAdapter().createParser();
    const events = feed(parser, fixture('claude-api-reset.jsonl'), 100);
    expect(events.filter((e) => e.kind === 'api-retry')).toEqual([{ kind: 'api-retry', attempt: 1, status: undefined, error: 'unknown' }]);
    const { outcome } = parser.end();
    expect(outcome.result.ok).toBe(false);
    expect(outcome.result.error).toBe('Claude Code reported an error (model API failed: connection_failed): API Error: Connection to the API was lost (ECONNRESET). This is usually temporary — try again.');
    // Only the end reason: still named as the model API's failure.
    const bare = new ClaudeCodeAdapter().createParser();
    feed(bare, `${JSON.stringify({ type: 'result', subtype: 'success', is_error: true, terminal_reason: 'api_error', result: 'API Error' })}\n`);
    expect(bare.end().outcome.result.error).toBe('Claude Code reported an error (model API failed): API Error');
  });

  it('survives pty framing: CRLF endings, colour codes and stderr text between lines', () => {
    const noisy = fixture('claude-success.jsonl')
      .split('\n')
      .map((l, i) => (i === 1 ? `\x1b[33mwarning: something on stderr\x1b[0m\r\n${l}` : l))
      .join('\r\n');
    const parser = new ClaudeCodeAdapter().createParser();
    feed(parser, noisy, 13);
    const { outcome } = parser.end();
    expect(outcome.result.ok).toBe(true);
    expect(outcome.stats).toMatchObject({ malformed: 0, other: 1 });
  });

  it('counts and skips malformed lines and schema violations without failing the run', () => {
    const lines = fixture('claude-success.jsonl').split('\n');
    lines.splice(2, 0, '{"type":"assistant","message":{"content":"not an array"}}', '{not json', '{"type":"result","subtype":5}', '[1,2]');
    const parser = new ClaudeCodeAdapter().createParser();
    feed(parser, lines.join('\n'), 64);
    const { outcome } = parser.end();
    expect(outcome.stats.malformed).toBe(3);
    expect(outcome.stats.other).toBe(1);
    expect(outcome.result.ok).toBe(true);
  });

  it('fails a truncated stream with a clear message and keeps what it learned', () => {
    const text = fixture('claude-success.jsonl');
    const cut = text.slice(0, text.lastIndexOf('{"duration_api_ms"') + 40); // half of the result line
    const parser = new ClaudeCodeAdapter().createParser();
    feed(parser, cut, 512);
    const { outcome } = parser.end();
    expect(outcome.result.ok).toBe(false);
    expect(outcome.result.error).toMatch(/^Claude Code output ended without a result line \(8 lines, 1 malformed\): the stream was truncated/);
    expect(outcome.result.summary).toBe('Created hello.txt and bash.txt.\nBoth files are in the repository root.');
  });

  it('says so when nothing at all came out', () => {
    const parser = new ClaudeCodeAdapter().createParser();
    parser.push('bash: /usr/local/bin/claude: No such file or directory\r\n');
    const { outcome } = parser.end();
    expect(outcome.result.error).toMatch(/printed no stream-json output .*is the CLI installed/);
  });

  it('drops a line over the line cap and carries on with the next', () => {
    const parser = new ClaudeCodeAdapter().createParser({ maxLineBytes: 4096 });
    const huge = JSON.stringify({ type: 'assistant', message: { content: [{ type: 'text', text: 'x'.repeat(10_000) }] } });
    feed(parser, `${huge}\n${fixture('claude-success.jsonl')}`, 1000);
    const { outcome } = parser.end();
    expect(outcome.stats.oversize).toBe(1);
    expect(outcome.result.ok).toBe(true);
  });

  it('stops reading an endless stream at the stream cap and fails with a clear message', () => {
    const parser = new ClaudeCodeAdapter().createParser({ maxStreamBytes: 64 * 1024 });
    const line = `${JSON.stringify({ type: 'assistant', message: { content: [{ type: 'text', text: 'again' }] } })}\n`;
    let pushed = 0;
    while (!parser.overflowed && pushed < 10_000) {
      parser.push(line);
      pushed++;
    }
    expect(parser.overflowed).toBe(true);
    expect(parser.push(line)).toEqual([]);
    const { outcome } = parser.end();
    expect(outcome.result.ok).toBe(false);
    expect(outcome.result.error).toBe('agent output exceeded 64 KiB; stopped reading (endless or runaway stream)');
    expect(outcome.stats.bytes).toBe(64 * 1024);
  });

  it('decodes multi-byte characters split across chunks', () => {
    const line = `${JSON.stringify({ type: 'result', subtype: 'success', is_error: false, result: 'fertig ✓ — ok', num_turns: 1 })}\n`;
    const bytes = Buffer.from(line, 'utf8');
    const parser = new ClaudeCodeAdapter().createParser();
    for (let i = 0; i < bytes.length; i++) parser.push(bytes.subarray(i, i + 1));
    expect(parser.end().outcome.result.summary).toBe('fertig ✓ — ok');
  });
});
