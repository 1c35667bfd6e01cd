// The agent's event stream read as a conversation, from the recorded output of
// the real Claude Code and Codex CLIs (test/fixtures/agents): messages, tool
// calls with input and result, errors in words, tokens and cost; lines that are
// not events (the stage's header, a wrapped or cut line) are left to the raw log.
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { errorInWords, transcriptOf } from '../../renderer/components/transcript/agent-events.js';

const fixture = (name: string) => fs.readFileSync(path.join(path.dirname(fileURLToPath(import.meta.url)), '../fixtures/agents', name), 'utf8');

describe('the agent transcript', () => {
  it("reads Claude Code's messages, its tool calls with their results, and the run's tokens and cost", () => {
    const entries = transcriptOf(`$ claude -p --output-format stream-json\n${fixture('claude-success.jsonl')}\npassed\n`);
    expect(entries.map((e) => e.kind)).toEqual(['message', 'tool', 'tool', 'message', 'end']);
    expect(entries[0]).toEqual({ kind: 'message', text: 'I will write the file.' });
    expect(entries[1]).toMatchObject({ kind: 'tool', name: 'Write', failed: false, result: expect.stringContaining('File created successfully at: /work/repo/hello.txt') });
    expect(entries[1]!.kind === 'tool' && JSON.parse(entries[1]!.input)).toMatchObject({ file_path: expect.stringContaining('hello.txt') });
    expect(entries[2]).toMatchObject({ kind: 'tool', name: 'Bash', result: '(Bash completed with no output)' });
    expect(entries[4]).toMatchObject({ kind: 'end', tokensIn: 37278, tokensOut: 126, costUsd: 0.151632 });
    expect(entries[4]).not.toHaveProperty('problem');
  });

  it("says a refused key once, in words, instead of ten retries of raw JSON", () => {
    const entries = transcriptOf(fixture('claude-auth-error.jsonl'));
    const errors = entries.filter((e) => e.kind === 'error');
    expect(errors).toEqual([{ kind: 'error', text: 'The model API refused the credential (HTTP 401): check the key stored in Credentials. (10 attempts)' }]);
    expect(entries.at(-1)).toMatchObject({ kind: 'end', problem: 'api_error', costUsd: 0 });
  });

  it("reads Codex's commands with their exit status, its message and the turn's tokens", () => {
    const entries = transcriptOf(fixture('codex-success.jsonl'));
    expect(entries).toEqual([
      { kind: 'tool', id: 'item_0', name: 'command', input: "/bin/bash -lc 'echo hi > hello.txt'", result: 'exit status 0', failed: false },
      { kind: 'message', text: 'Wrote hello.txt.' },
      { kind: 'end', tokensIn: 200, tokensOut: 40 },
    ]);
  });

  it('skips what is not an event and cuts a huge tool result, pointing at the raw log', () => {
    const big = 'x'.repeat(10_000);
    const lines = [
      '{"type":"assistant","message":{"content":[{"type":"tool_use","id":"t1","name":"Read","input":{}}]}}',
      '{"type":"user","message":{"content":[{"type":"tool_result","tool_use_id":"t1","content":"' + big + '","is_error":true}]}}',
      '{"type":"assistant","message":{"content":[{"type":"te', // cut mid-line
      'npm WARN deprecated',
    ];
    const [tool, ...rest] = transcriptOf(lines.join('\n'));
    expect(rest).toEqual([]);
    expect(tool).toMatchObject({ kind: 'tool', name: 'Read', failed: true });
    expect(tool!.kind === 'tool' && tool!.result).toMatch(/^x{4000}… \(6000 more characters in the raw log\)$/);
  });

  it('names a dropped connection and a rate limit for what they are', () => {
    expect(errorInWords('Connection dropped (Malformed_HTTP_Response)')).toContain('The connection to the model API failed');
    expect(errorInWords('rate_limit_error', 429)).toBe('The model API is busy or over its rate limit (HTTP 429): the agent retries; try again later if it gives up.');
  });
});
