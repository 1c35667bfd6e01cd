// Claude Code, headless: `claude -p --output-format stream-json --verbose`
// with the prompt on stdin. Permission prompts are skipped: the sandbox VM is
// the boundary, and the CLI refuses that flag as root, so the stage runs as the
// unprivileged guest user. The broker supplies ANTHROPIC_BASE_URL (the proxy)
// and a per-sandbox placeholder: ANTHROPIC_API_KEY for an API key, or
// CLAUDE_CODE_OAUTH_TOKEN for a subscription token (never both).
import { z } from 'zod';
import { capText, firstLine, JsonLinesParser, keepProblem } from './json-lines.js';
import { requireBrokerEnv } from './shell.js';
import type {
  AgentAdapter,
  AgentCommandSpec,
  AgentEvent,
  AgentInvocation,
  AgentResult,
  AgentSessionInvocation,
  AgentSessionSpec,
  AgentStreamParser,
  AgentTokens,
  ParserLimits,
  CliAdapterOptions,
} from './types.js';

export const CLAUDE_CODE_GUEST_BINARY = '/usr/local/bin/claude';

/** Keeps the CLI to the model API only: no telemetry, updates, error reports or other traffic. */
export const CLAUDE_CODE_QUIET_ENV: Readonly<Record<string, string>> = {
  DISABLE_TELEMETRY: '1',
  DISABLE_AUTOUPDATER: '1',
  DISABLE_ERROR_REPORTING: '1',
  CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC: '1',
};

/**
 * ~/.claude.json of the agent user for an interactive session in a fresh sandbox:
 * onboarding done, the repository folder trusted (the VM is the boundary) and the
 * placeholder key approved (the CLI asks about a key in the environment once, by
 * its last 20 characters), so the TUI opens at its prompt. Tool permission prompts stay.
 */
export function claudeCodeSessionState(cwd: string, env: Record<string, string>): Record<string, unknown> {
  const key = env.ANTHROPIC_API_KEY;
  return {
    hasCompletedOnboarding: true,
    ...(key ? { customApiKeyResponses: { approved: [key.slice(-20)], rejected: [] } } : {}),
    projects: { [cwd]: { hasTrustDialogAccepted: true, hasCompletedProjectOnboarding: true } },
  };
}

const count = z.number().finite().nonnegative();
const shortText = z.string().max(4 * 1024 * 1024);

const Usage = z.looseObject({
  input_tokens: count.optional(),
  output_tokens: count.optional(),
  cache_creation_input_tokens: count.nullable().optional(),
  cache_read_input_tokens: count.nullable().optional(),
});

const ContentBlock = z.union([
  z.looseObject({ type: z.literal('text'), text: shortText }),
  z.looseObject({ type: z.literal('tool_use'), name: z.string().max(256), input: z.unknown().optional() }),
  z.looseObject({ type: z.string().max(64) }),
]);

const SystemLine = z.looseObject({
  type: z.literal('system'),
  subtype: z.string().max(64).optional(),
  model: z.string().max(256).optional(),
  session_id: z.string().max(256).optional(),
  claude_code_version: z.string().max(64).optional(),
});

const ApiRetry = z.looseObject({
  attempt: count,
  error_status: z.number().nullable().optional(),
  error: z.string().max(256).optional(),
});

const AssistantLine = z.looseObject({
  type: z.literal('assistant'),
  message: z.looseObject({
    content: z.array(ContentBlock).max(10_000),
    usage: Usage.nullable().optional(),
  }),
});

const UserLine = z.looseObject({
  type: z.literal('user'),
  message: z.looseObject({
    content: z.union([shortText, z.array(z.looseObject({ type: z.string().max(64), is_error: z.boolean().nullable().optional() })).max(10_000)]),
  }),
});

const ResultLine = z.looseObject({
  type: z.literal('result'),
  subtype: z.string().max(64),
  is_error: z.boolean().optional(),
  result: shortText.optional(),
  num_turns: count.optional(),
  total_cost_usd: count.optional(),
  duration_ms: count.optional(),
  usage: Usage.optional(),
  errors: z.array(z.unknown()).max(1000).optional(),
  // Tool calls the CLI refused (its permission rules): the agent wanted to act and could not.
  permission_denials: z.array(z.looseObject({ tool_name: z.string().max(256).optional() })).max(10_000).optional(),
  api_error_status: z.number().nullable().optional(),
  // How the model API failed when no status came back: e.g. "connection_failed" for a reset or a stream cut off.
  api_error: z.string().max(256).nullable().optional(),
  terminal_reason: z.string().max(64).nullable().optional(),
});

const AnyLine = z.looseObject({ type: z.string().max(64) });

export type ClaudeCodeAdapterOptions = CliAdapterOptions;

export class ClaudeCodeAdapter implements AgentAdapter {
  readonly id = 'claude-code';
  readonly displayName = 'Claude Code';
  readonly brokerEnv = ['ANTHROPIC_BASE_URL', 'ANTHROPIC_API_KEY'] as const;

  constructor(private readonly opts: ClaudeCodeAdapterOptions = {}) {}

  command(inv: AgentInvocation): AgentCommandSpec {
    const env = this.environment(inv.env);
    const argv = [
      this.opts.binary ?? CLAUDE_CODE_GUEST_BINARY,
      '-p',
      '--output-format',
      'stream-json',
      '--verbose',
      '--dangerously-skip-permissions',
    ];
    if (inv.model) argv.push('--model', inv.model);
    if (inv.maxTurns !== undefined) argv.push('--max-turns', String(Math.max(1, Math.floor(inv.maxTurns))));
    argv.push(...(this.opts.extraArgs ?? []));
    return { cwd: inv.cwd, env, argv, stdinFile: inv.promptFile };
  }

  /** The interactive TUI: the stage's environment, the user's arguments, and a state file that skips the first-run questions. */
  session(inv: AgentSessionInvocation): AgentSessionSpec {
    const env = this.environment(inv.env);
    const state = claudeCodeSessionState(inv.cwd, env);
    return { cwd: inv.cwd, env, argv: [this.opts.binary ?? CLAUDE_CODE_GUEST_BINARY, ...inv.args], files: [{ path: '.claude.json', content: `${JSON.stringify(state, null, 2)}\n` }] };
  }

  /** What every run of the CLI gets, headless or interactive: the proxy, a placeholder, and no other traffic. */
  private environment(brokerEnv: Record<string, string>): Record<string, string> {
    // A subscription sandbox has the OAuth placeholder instead of the API key's.
    const auth = brokerEnv.ANTHROPIC_API_KEY ? 'ANTHROPIC_API_KEY' : brokerEnv.CLAUDE_CODE_OAUTH_TOKEN ? 'CLAUDE_CODE_OAUTH_TOKEN' : undefined;
    if (!auth) {
      throw new Error(`${this.displayName} needs ANTHROPIC_API_KEY from the credential broker (or CLAUDE_CODE_OAUTH_TOKEN for a subscription); none was given`);
    }
    return { ...CLAUDE_CODE_QUIET_ENV, ...requireBrokerEnv(this.displayName, ['ANTHROPIC_BASE_URL', auth], brokerEnv) };
  }

  createParser(limits?: ParserLimits): AgentStreamParser {
    return new ClaudeStreamJsonParser(limits);
  }
}

/** Reads `--output-format stream-json --verbose` lines. */
export class ClaudeStreamJsonParser extends JsonLinesParser {
  private result: AgentResult | undefined;
  private lastText = '';
  private assistantMessages = 0;
  private tokens: AgentTokens = { input: 0, output: 0 };
  private sawInit = false;

  protected handleValue(value: unknown): AgentEvent[] | null {
    const head = AnyLine.safeParse(value);
    if (!head.success) return null;
    switch (head.data.type) {
      case 'system': {
        const line = SystemLine.safeParse(value);
        if (!line.success) return null;
        if (line.data.subtype === 'api_retry') {
          const retry = ApiRetry.safeParse(value);
          if (!retry.success) return null;
          return [{ kind: 'api-retry', attempt: retry.data.attempt, status: retry.data.error_status ?? undefined, error: retry.data.error }];
        }
        if (line.data.subtype !== 'init') return [];
        this.sawInit = true;
        return [{ kind: 'init', model: line.data.model, sessionId: line.data.session_id, version: line.data.claude_code_version }];
      }
      case 'assistant': {
        const line = AssistantLine.safeParse(value);
        if (!line.success) return null;
        this.assistantMessages++;
        const events: AgentEvent[] = [];
        for (const block of line.data.message.content) {
          if (block.type === 'text' && typeof block.text === 'string') {
            if (block.text.trim() !== '') {
              this.lastText = capText(block.text, this.maxSummaryChars);
              events.push({ kind: 'text', text: capText(block.text, this.maxSummaryChars) });
            }
          } else if (block.type === 'tool_use' && typeof block.name === 'string') {
            events.push({ kind: 'tool-use', name: block.name, detail: toolDetail(block.input) });
          }
        }
        return events;
      }
      case 'user': {
        const line = UserLine.safeParse(value);
        if (!line.success) return null;
        const content = line.data.message.content;
        if (typeof content === 'string') return [];
        return content.filter((c) => c.type === 'tool_result').map((c) => ({ kind: 'tool-result', isError: c.is_error === true }));
      }
      case 'result': {
        const line = ResultLine.safeParse(value);
        if (!line.success) return null;
        const r = line.data;
        const tokens = r.usage ? usageTokens(r.usage) : undefined;
        if (tokens) this.tokens = tokens;
        const isError = r.is_error === true || r.subtype !== 'success';
        const text = r.result ?? this.lastText;
        const problems: string[] = [];
        for (const d of r.permission_denials ?? []) keepProblem(problems, `the ${d.tool_name ?? 'unnamed'} tool call was refused`);
        this.result = {
          ok: !isError,
          summary: capText(text, this.maxSummaryChars),
          turns: r.num_turns,
          tokens,
          costUsd: r.total_cost_usd,
          durationMs: r.duration_ms,
          ...(isError ? { error: describeError(r.subtype, text, r.num_turns, apiFailure(r.api_error_status, r.api_error, r.terminal_reason)) } : {}),
          ...(problems.length ? { problems } : {}),
        };
        return [{ kind: 'result', result: this.result }];
      }
      default:
        // Newer CLI versions add line types (stream_event, rate limits, ...): not an error.
        this.stats.other++;
        return [];
    }
  }

  protected finalResult(): AgentResult {
    if (this.result) return this.result;
    return {
      ...this.partialResult(),
      error: this.sawInit
        ? `Claude Code output ended without a result line (${this.describeStats()}): the stream was truncated or the agent was stopped`
        : `Claude Code printed no stream-json output (${this.describeStats()}): is the CLI installed and was the prompt delivered?`,
    };
  }

  protected partialResult(): AgentResult {
    return {
      ok: false,
      summary: this.lastText,
      turns: this.assistantMessages || undefined,
      tokens: this.tokens.input || this.tokens.output ? this.tokens : undefined,
    };
  }
}

function usageTokens(u: z.infer<typeof Usage>): AgentTokens {
  return {
    input: (u.input_tokens ?? 0) + (u.cache_creation_input_tokens ?? 0) + (u.cache_read_input_tokens ?? 0),
    output: u.output_tokens ?? 0,
  };
}

/**
 * What the result line says of the model API: its status, else how the call failed
 * without one (a reset, a stream cut off: "connection_failed"), so a stage that ended
 * on the API never reads as the agent's own failure. Undefined when the API was not the cause.
 */
function apiFailure(status: number | null | undefined, error: string | null | undefined, terminalReason: string | null | undefined): string | undefined {
  if (status) return `model API status ${status}`;
  const how = error?.replace(/[^A-Za-z0-9_ .:-]/g, '').slice(0, 64);
  if (how) return `model API failed: ${how}`;
  if (terminalReason === 'api_error') return 'model API failed';
  return undefined;
}

function describeError(subtype: string, text: string, turns?: number, apiFailure?: string): string {
  if (subtype === 'error_max_turns') return `Claude Code stopped at its turn limit${turns !== undefined ? ` (${turns} turns)` : ''}`;
  if (subtype === 'error_during_execution') return `Claude Code failed during execution${text ? `: ${firstLine(text)}` : ''}`;
  return `Claude Code reported an error${apiFailure ? ` (${apiFailure})` : ''}${text ? `: ${firstLine(text)}` : ''}`;
}

/** A short, display-only hint of what a tool call touches (command or path). */
export function toolDetail(input: unknown): string | undefined {
  if (!input || typeof input !== 'object') return undefined;
  const o = input as Record<string, unknown>;
  for (const key of ['command', 'file_path', 'path', 'pattern', 'url', 'description']) {
    const v = o[key];
    if (typeof v === 'string' && v !== '') return capText(v.replace(/\s+/g, ' '), 200);
  }
  return undefined;
}
