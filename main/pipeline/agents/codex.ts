// OpenAI Codex CLI, headless: `codex exec --json -` with the prompt on stdin.
// Its own sandbox and approval prompts are bypassed: the VM is the sandbox.
// The broker supplies OPENAI_BASE_URL (the proxy) and OPENAI_API_KEY (a
// per-sandbox placeholder). `--json` prints one event per line: thread.started,
// turn.started, item.started / item.updated / item.completed (agent_message,
// reasoning, command_execution, file_change, mcp_tool_call, web_search,
// todo_list, error), turn.completed with usage, turn.failed, error.
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

export const CODEX_GUEST_BINARY = '/usr/local/bin/codex';
const CODEX_PROVIDER_ID = 'factory';
/**
 * Codex's housekeeping, off: its update check (`check_for_update_on_startup`),
 * analytics (`analytics.enabled`) and plugins (`features.plugins`: at every start
 * Codex 0.171 syncs its plugin marketplace from github.com and api.github.com and
 * lists remote plugins at chatgpt.com; stages use no plugin).
 */
export const CODEX_QUIET_CONFIG = ['check_for_update_on_startup=false', 'analytics.enabled=false', 'features.plugins=false'] as const;

const count = z.number().finite().nonnegative();
const text = z.string().max(4 * 1024 * 1024);

const Item = z.looseObject({
  id: z.string().max(256).optional(),
  type: z.string().max(64),
  text: text.optional(),
  message: text.optional(),
  command: text.optional(),
  exit_code: z.number().nullable().optional(),
  status: z.string().max(64).optional(),
  tool: z.string().max(256).optional(),
  server: z.string().max(256).optional(),
  query: text.optional(),
  changes: z.array(z.looseObject({ path: z.string().max(4096), kind: z.string().max(64).optional() })).max(10_000).optional(),
});

const Line = z.discriminatedUnion('type', [
  z.looseObject({ type: z.literal('thread.started'), thread_id: z.string().max(256).optional() }),
  z.looseObject({ type: z.literal('turn.started') }),
  z.looseObject({
    type: z.literal('turn.completed'),
    usage: z
      .looseObject({ input_tokens: count.optional(), cached_input_tokens: count.optional(), output_tokens: count.optional() })
      .optional(),
  }),
  z.looseObject({ type: z.literal('turn.failed'), error: z.looseObject({ message: text }).optional() }),
  z.looseObject({ type: z.literal('error'), message: text.optional() }),
  z.looseObject({ type: z.literal('item.started'), item: Item }),
  z.looseObject({ type: z.literal('item.updated'), item: Item }),
  z.looseObject({ type: z.literal('item.completed'), item: Item }),
]);

const KNOWN = new Set(['thread.started', 'turn.started', 'turn.completed', 'turn.failed', 'error', 'item.started', 'item.updated', 'item.completed']);

export type CodexAdapterOptions = CliAdapterOptions;

export class CodexAdapter implements AgentAdapter {
  readonly id = 'codex';
  readonly displayName = 'Codex';
  readonly brokerEnv = ['OPENAI_BASE_URL', 'OPENAI_API_KEY'] as const;

  constructor(private readonly opts: CodexAdapterOptions = {}) {}

  command(inv: AgentInvocation): AgentCommandSpec {
    const { env, baseUrl } = this.environment(inv.env);
    const argv = [
      this.opts.binary ?? CODEX_GUEST_BINARY,
      'exec',
      '--json',
      '--dangerously-bypass-approvals-and-sandbox',
      '--skip-git-repo-check',
      '--cd',
      inv.cwd,
      ...codexProviderArgs(baseUrl),
    ];
    if (inv.model) argv.push('--model', inv.model);
    argv.push(...(this.opts.extraArgs ?? []), '-');
    // Codex has no turn limit flag; maxTurns is left to the stage timeout.
    return { cwd: inv.cwd, env: { ...env }, argv, stdinFile: inv.promptFile };
  }

  createParser(limits?: ParserLimits): AgentStreamParser {
    return new CodexJsonParser(limits);
  }

  /** The interactive TUI, pointed at the proxy like a stage, with the user's arguments. */
  session(inv: AgentSessionInvocation): AgentSessionSpec {
    const { env, baseUrl } = this.environment(inv.env);
    // The repository folder is trusted (the VM is the boundary): the TUI opens at its prompt, not at its trust question.
    const config = `[projects.${JSON.stringify(inv.cwd)}]\ntrust_level = "trusted"\n`;
    return {
      cwd: inv.cwd,
      env: { ...env },
      argv: [this.opts.binary ?? CODEX_GUEST_BINARY, '--cd', inv.cwd, ...codexProviderArgs(baseUrl), ...inv.args],
      files: [{ path: '.codex/config.toml', content: config }],
    };
  }

  private environment(brokerEnv: Record<string, string>): { env: Record<string, string>; baseUrl: string } {
    const env = requireBrokerEnv(this.displayName, this.brokerEnv, brokerEnv);
    const baseUrl = env.OPENAI_BASE_URL!;
    if (!/^https?:\/\/[^\s"'\\]+$/.test(baseUrl)) throw new Error(`OPENAI_BASE_URL is not a plain http(s) URL: ${JSON.stringify(baseUrl).slice(0, 120)}`);
    return { env, baseUrl };
  }
}

/**
 * The built-in provider ignores OPENAI_BASE_URL in current releases; a provider
 * of our own points Codex at the proxy with the placeholder key.
 */
function codexProviderArgs(baseUrl: string): string[] {
  return [
    '-c',
    `model_provider=${CODEX_PROVIDER_ID}`,
    '-c',
    `model_providers.${CODEX_PROVIDER_ID}.name=${CODEX_PROVIDER_ID}`,
    '-c',
    `model_providers.${CODEX_PROVIDER_ID}.base_url="${baseUrl}"`,
    '-c',
    `model_providers.${CODEX_PROVIDER_ID}.env_key=OPENAI_API_KEY`,
    '-c',
    `model_providers.${CODEX_PROVIDER_ID}.wire_api=responses`,
    // Housekeeping the sandbox cannot reach anyway: every attempt is a refusal on the task's egress list.
    ...CODEX_QUIET_CONFIG.flatMap((kv) => ['-c', kv]),
  ];
}

export class CodexJsonParser extends JsonLinesParser {
  private lastMessage = '';
  private turns = 0;
  private tokens: AgentTokens | undefined;
  private failure: string | undefined;
  private completed = false;
  private started = false;
  private readonly problems: string[] = [];

  protected handleValue(value: unknown): AgentEvent[] | null {
    const type = (value as { type?: unknown } | null)?.type;
    if (typeof type === 'string' && !KNOWN.has(type)) {
      this.stats.other++;
      return [];
    }
    const parsed = Line.safeParse(value);
    if (!parsed.success) return null;
    const line = parsed.data;
    switch (line.type) {
      case 'thread.started':
        this.started = true;
        return [{ kind: 'init', sessionId: line.thread_id }];
      case 'turn.started':
        this.started = true;
        return [];
      case 'turn.completed': {
        this.turns++;
        this.completed = true;
        if (!line.usage) return [];
        const u = line.usage;
        // input_tokens already includes cached_input_tokens in Codex's accounting.
        const add: AgentTokens = { input: u.input_tokens ?? 0, output: u.output_tokens ?? 0 };
        this.tokens = { input: (this.tokens?.input ?? 0) + add.input, output: (this.tokens?.output ?? 0) + add.output };
        return [{ kind: 'usage', tokens: add }];
      }
      case 'turn.failed':
        this.failure = line.error?.message ?? 'turn failed';
        return [];
      case 'error':
        this.failure = line.message ?? 'error';
        return [];
      case 'item.started':
      case 'item.updated':
        if (line.type === 'item.started') return itemStarted(line.item);
        return [];
      case 'item.completed':
        return this.itemCompleted(line.item);
    }
  }

  private itemCompleted(item: z.infer<typeof Item>): AgentEvent[] {
    switch (item.type) {
      case 'agent_message':
        if (!item.text?.trim()) return [];
        this.lastMessage = capText(item.text, this.maxSummaryChars);
        return [{ kind: 'text', text: this.lastMessage }];
      case 'command_execution':
        return [{ kind: 'tool-result', isError: item.status === 'failed' || (typeof item.exit_code === 'number' && item.exit_code !== 0) }];
      case 'file_change':
        return [
          { kind: 'tool-use', name: 'file_change', detail: capText((item.changes ?? []).map((c) => c.path).join(', '), 200) || undefined },
          { kind: 'tool-result', isError: item.status === 'failed' },
        ];
      case 'mcp_tool_call':
        return [{ kind: 'tool-result', isError: item.status === 'failed' }];
      case 'error':
        // Codex's warnings (config, reroutes, refused tools) come as error items and it goes on after them.
        if (item.message?.trim()) keepProblem(this.problems, item.message);
        return [{ kind: 'text', text: capText(`error: ${item.message ?? ''}`, this.maxSummaryChars) }];
      default:
        return [];
    }
  }

  protected finalResult(): AgentResult {
    const base = this.partialResult();
    if (this.failure) return { ...base, ok: false, error: `Codex failed: ${firstLine(this.failure)}` };
    if (this.completed) return { ...base, ok: true };
    return {
      ...base,
      ok: false,
      error: this.started
        ? `Codex output ended before its turn completed (${this.describeStats()}): the stream was truncated or the agent was stopped`
        : `Codex printed no --json output (${this.describeStats()}): is the CLI installed and was the prompt delivered?`,
    };
  }

  protected partialResult(): AgentResult {
    return { ok: false, summary: this.lastMessage, turns: this.turns || undefined, tokens: this.tokens, ...(this.problems.length ? { problems: [...this.problems] } : {}) };
  }
}

function itemStarted(item: z.infer<typeof Item>): AgentEvent[] {
  switch (item.type) {
    case 'command_execution':
      return [{ kind: 'tool-use', name: 'command', detail: item.command ? capText(item.command.replace(/\s+/g, ' '), 200) : undefined }];
    case 'mcp_tool_call':
      return [{ kind: 'tool-use', name: `${item.server ?? 'mcp'}.${item.tool ?? 'tool'}` }];
    case 'web_search':
      return [{ kind: 'tool-use', name: 'web_search', detail: item.query ? capText(item.query, 200) : undefined }];
    default:
      return [];
  }
}
