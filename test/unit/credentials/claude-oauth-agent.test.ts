// The Claude Code stage command in a sandbox whose Anthropic credential is a
// subscription token: the broker gave CLAUDE_CODE_OAUTH_TOKEN (a placeholder)
// and no ANTHROPIC_API_KEY, and the CLI must get exactly that.
import { describe, expect, it } from 'vitest';
import { ClaudeCodeAdapter } from '../../../main/pipeline/agents/claude-code.js';
import { renderCommand } from '../../../main/pipeline/agents/shell.js';

const inv = { promptFile: '/work/.factory-run/plan.md', cwd: '/work/repo' };

describe('Claude Code with a subscription token', () => {
  it('runs with the OAuth placeholder alone and passes it to the CLI', () => {
    const spec = new ClaudeCodeAdapter().command({ ...inv, env: { ANTHROPIC_BASE_URL: 'http://10.0.2.100/anthropic', CLAUDE_CODE_OAUTH_TOKEN: 'fiab-placeholder-abc' } });
    expect(spec.env).toMatchObject({ ANTHROPIC_BASE_URL: 'http://10.0.2.100/anthropic', CLAUDE_CODE_OAUTH_TOKEN: 'fiab-placeholder-abc' });
    expect(spec.env).not.toHaveProperty('ANTHROPIC_API_KEY');
    expect(renderCommand(spec)).toContain('CLAUDE_CODE_OAUTH_TOKEN=fiab-placeholder-abc /usr/local/bin/claude -p');
  });

  it('without either placeholder it says which variables the broker must give', () => {
    expect(() => new ClaudeCodeAdapter().command({ ...inv, env: { ANTHROPIC_BASE_URL: 'http://10.0.2.100/anthropic' } })).toThrow(
      /needs ANTHROPIC_API_KEY from the credential broker \(or CLAUDE_CODE_OAUTH_TOKEN for a subscription\)/,
    );
    expect(() => new ClaudeCodeAdapter().command({ ...inv, env: { CLAUDE_CODE_OAUTH_TOKEN: 'fiab-placeholder-abc' } })).toThrow(/ANTHROPIC_BASE_URL from the credential broker/);
  });
});
