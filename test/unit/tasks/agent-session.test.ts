// Agent sessions (factory claude / codex) without a VM: the session command each
// adapter builds shares its stage's broker environment, the CLI reads its
// arguments, and a session whose terminal was closed waits its grace period for
// the user before it ends, and an abort ends it without waiting on the agent.
import { afterEach, describe, expect, it, vi } from 'vitest';
import type { FactoryEvent } from '../../../common/contract.js';
import type { Task, TerminalInfo } from '../../../common/domain.js';
import { parseCommandLine } from '../../../main/cli/args.js';
import { ClaudeCodeAdapter } from '../../../main/pipeline/agents/claude-code.js';
import { CodexAdapter } from '../../../main/pipeline/agents/codex.js';
import { AGENT_SESSION_GRACE_MS, AgentSessionWatcher, untilExitOrAbort } from '../../../main/tasks/agent-session.js';
import { planRetry } from '../../../main/tasks/retry-plan.js';
import { stderrLogger } from '../../../main/log/logger.js';

const PLACEHOLDER = 'fiab-placeholder-0123456789abcdefghijklmnop';
const CLAUDE_ENV = { ANTHROPIC_BASE_URL: 'http://10.0.2.100/anthropic', ANTHROPIC_API_KEY: PLACEHOLDER, FACTORY_GIT_URL: 'http://10.0.2.100/git/x' };

describe('the agent session command', () => {
  it('Claude Code runs its TUI with the stage environment, the user arguments, and first-run answers for the sandbox', () => {
    const adapter = new ClaudeCodeAdapter();
    const stage = adapter.command({ promptFile: '/tmp/p.md', cwd: '/work/repo', env: CLAUDE_ENV });
    const s = adapter.session({ cwd: '/work/repo', env: CLAUDE_ENV, args: ['--model', 'opus'] });
    expect(s.env).toEqual(stage.env);
    expect(s.argv).toEqual(['/usr/local/bin/claude', '--model', 'opus']);
    expect(s.argv).not.toContain('--dangerously-skip-permissions');
    expect(s.files.map((f) => f.path)).toEqual(['.claude.json']);
    const state = JSON.parse(s.files[0]!.content) as Record<string, any>;
    expect(state.hasCompletedOnboarding).toBe(true);
    expect(state.customApiKeyResponses.approved).toEqual([PLACEHOLDER.slice(-20)]);
    expect(state.projects['/work/repo'].hasTrustDialogAccepted).toBe(true);
  });

  it('a subscription sandbox has no key to approve, and a sandbox without Anthropic placeholders is refused as for a stage', () => {
    const adapter = new ClaudeCodeAdapter();
    const s = adapter.session({ cwd: '/work/repo', env: { ANTHROPIC_BASE_URL: 'http://10.0.2.100/anthropic', CLAUDE_CODE_OAUTH_TOKEN: PLACEHOLDER }, args: [] });
    expect(s.env.CLAUDE_CODE_OAUTH_TOKEN).toBe(PLACEHOLDER);
    expect(JSON.parse(s.files[0]!.content)).not.toHaveProperty('customApiKeyResponses');
    expect(() => adapter.session({ cwd: '/work/repo', env: {}, args: [] })).toThrow(/needs ANTHROPIC_API_KEY/);
  });

  it('Codex runs its TUI on the same proxy provider as a stage', () => {
    const adapter = new CodexAdapter();
    const env = { OPENAI_BASE_URL: 'http://10.0.2.100/openai/v1', OPENAI_API_KEY: PLACEHOLDER };
    const stage = adapter.command({ promptFile: '/tmp/p.md', cwd: '/work/repo', env });
    const s = adapter.session({ cwd: '/work/repo', env, args: ['--model', 'o9'] });
    expect(s.env).toEqual(stage.env);
    const provider = stage.argv.filter((w, i) => w === '-c' || stage.argv[i - 1] === '-c');
    expect(s.argv).toEqual(['/usr/local/bin/codex', '--cd', '/work/repo', ...provider, '--model', 'o9']);
    // Its trust question is answered for the sandbox's repository.
    expect(s.files).toEqual([{ path: '.codex/config.toml', content: '[projects."/work/repo"]\ntrust_level = "trusted"\n' }]);
  });

  it('factory claude takes a repository, --with-changes, --resume and the agent arguments after --', () => {
    const p = parseCommandLine(['claude', 'repo', '--with-changes', '--', '--model', 'opus', '-p']);
    expect(p).toMatchObject({ name: 'claude', positionals: ['repo'], rest: ['--model', 'opus', '-p'] });
    expect(p.values['with-changes']).toBe(true);
    expect(parseCommandLine(['codex', '--resume', 'abc']).values.resume).toBe('abc');
  });
});

describe('AgentSessionWatcher', () => {
  afterEach(() => vi.useRealTimers());

  const agentTask = { id: 't1', kind: 'agent' } as Task;
  const info = (over: Partial<TerminalInfo> = {}): TerminalInfo => ({ id: 's1', taskId: 't1', kind: 'shell', title: 'agent: Claude Code', status: 'live', exitCode: null, cols: 80, rows: 24, ...over });

  function watcher(task: Task = agentTask) {
    const closed: string[] = [];
    const w = new AgentSessionWatcher({
      task: (id) => (id === task.id ? task : undefined),
      terminal: (id) => (id === 's1' ? info() : undefined),
      closeTerminal: (id) => closed.push(id),
      log: stderrLogger('agent-session-test'),
    });
    return { w, closed };
  }

  it('ends a session nobody attached to after the grace period, not before', () => {
    vi.useFakeTimers();
    const { w, closed } = watcher();
    w.onEvent({ type: 'terminal.opened', info: info() } as FactoryEvent);
    vi.advanceTimersByTime(AGENT_SESSION_GRACE_MS - 1000);
    expect(closed).toEqual([]);
    vi.advanceTimersByTime(1000);
    expect(closed).toEqual(['s1']);
  });

  it('an attached viewer holds it; when it leaves, the grace period starts again, and a resume stops it', () => {
    vi.useFakeTimers();
    const { w, closed } = watcher();
    w.onEvent({ type: 'terminal.opened', info: info() } as FactoryEvent);
    w.attached('s1');
    vi.advanceTimersByTime(2 * AGENT_SESSION_GRACE_MS);
    expect(closed).toEqual([]);
    w.detached('s1');
    vi.advanceTimersByTime(AGENT_SESSION_GRACE_MS / 2);
    w.attached('s1');
    vi.advanceTimersByTime(2 * AGENT_SESSION_GRACE_MS);
    expect(closed).toEqual([]);
    w.detached('s1');
    vi.advanceTimersByTime(AGENT_SESSION_GRACE_MS);
    expect(closed).toEqual(['s1']);
  });

  it('leaves other shells and other tasks alone', () => {
    vi.useFakeTimers();
    const { w, closed } = watcher({ id: 't1', kind: 'quick' } as Task);
    w.onEvent({ type: 'terminal.opened', info: info() } as FactoryEvent);
    const other = watcher();
    other.w.onEvent({ type: 'terminal.opened', info: info({ title: 'shell' }) } as FactoryEvent);
    vi.advanceTimersByTime(2 * AGENT_SESSION_GRACE_MS);
    expect(closed).toEqual([]);
    expect(other.closed).toEqual([]);
  });
});

describe('waiting for the agent to exit', () => {
  it('an abort hangs up and ends the wait at once, though the agent never lets go of its terminal', async () => {
    const abort = new AbortController();
    const hangUps: string[] = [];
    const never = new Promise<never>(() => {});
    const waiting = untilExitOrAbort(never, abort.signal, () => hangUps.push('hang-up'));
    abort.abort();
    await expect(waiting).rejects.toMatchObject({ name: 'Cancelled' });
    expect(hangUps).toEqual(['hang-up']);
  });

  it('the exit, when it comes first, is the answer, and a later abort hangs up nothing', async () => {
    const abort = new AbortController();
    const hangUps: string[] = [];
    await expect(untilExitOrAbort(Promise.resolve({ code: 0, lost: false }), abort.signal, () => hangUps.push('hang-up'))).resolves.toEqual({ code: 0, lost: false });
    abort.abort();
    expect(hangUps).toEqual([]);
  });

  it('an abort before the wait hangs up at once', async () => {
    const abort = new AbortController();
    abort.abort();
    const hangUps: string[] = [];
    await expect(untilExitOrAbort(new Promise(() => {}), abort.signal, () => hangUps.push('hang-up'))).rejects.toMatchObject({ name: 'Cancelled' });
    expect(hangUps).toEqual(['hang-up']);
  });
});

describe('an agent session that ended', () => {
  it('is not retried as a pipeline', () => {
    const t = { id: 'a1', kind: 'agent', phase: 'interrupted', stages: [] } as unknown as Task;
    expect(() => planRetry(t)).toThrow(/is an agent session: it has no pipeline to run again/);
  });
});
