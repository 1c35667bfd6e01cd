// What an agent adapter is: how one coding-agent CLI runs headless in a stage
// inside the sandbox, which placeholder environment it needs from the
// credential broker, and how its output stream becomes events and a result.
// Everything the agent prints is untrusted: adapters parse it with schemas and
// size caps and never throw on bad input.

/** Identifier of a built-in agent; 'command' means "run the stage commands as configured". */
export type AgentId = 'claude-code' | 'codex' | 'custom' | (string & {});

/** One stage run of an agent, as the stage runner describes it. */
export interface AgentInvocation {
  /** Guest path of a file holding the rendered stage prompt (delivered on stdin). */
  promptFile: string;
  /** Guest working directory (the task's repository). */
  cwd: string;
  /** Values for the adapter's brokerEnv names (placeholders from the broker) and any extra env. */
  env: Record<string, string>;
  /** Optional model override. */
  model?: string;
  /** Upper bound on agent turns, where the CLI supports one. */
  maxTurns?: number;
}

/** A command in argv form plus where its stdin comes from; rendered to one shell line by renderCommand. */
export interface AgentCommandSpec {
  cwd: string;
  env: Record<string, string>;
  argv: string[];
  /** File whose contents become the process's stdin (the prompt). */
  stdinFile?: string;
}

/** An interactive session of the agent's own TUI in the sandbox (`factory claude`, `factory codex`). */
export interface AgentSessionInvocation {
  /** Guest working directory (the task's repository). */
  cwd: string;
  /** The broker's placeholder environment, as for a stage. */
  env: Record<string, string>;
  /** The user's own arguments for the CLI. */
  args: string[];
}

/** The session's command, and the files (relative to the agent user's home) it needs before it starts. */
export interface AgentSessionSpec {
  cwd: string;
  env: Record<string, string>;
  argv: string[];
  files: Array<{ path: string; content: string }>;
}

export interface AgentTokens {
  input: number;
  output: number;
}

/** What a finished agent run reported. Fields are absent when the CLI did not say. */
export interface AgentResult {
  /** True when the agent reported success. */
  ok: boolean;
  /** The agent's final text, capped; the board shows its first line. */
  summary: string;
  turns?: number;
  tokens?: AgentTokens;
  costUsd?: number;
  durationMs?: number;
  /** Why the run is not ok, in words a user can act on. */
  error?: string;
  /**
   * What the agent itself reported as going wrong on the way (Codex's error items,
   * Claude Code's refused tool calls), capped. Codex uses error items for warnings it
   * goes on after, so these do not fail a run by themselves; a stage that did nothing
   * quotes them as the reason.
   */
  problems?: string[];
}

/** At most this many problems are kept, each capped, so a chatty agent cannot grow a task record. */
export const MAX_AGENT_PROBLEMS = 5;
export const MAX_AGENT_PROBLEM_CHARS = 300;

export type AgentEvent =
  | { kind: 'init'; model?: string; sessionId?: string; version?: string }
  | { kind: 'text'; text: string }
  | { kind: 'tool-use'; name: string; detail?: string }
  | { kind: 'tool-result'; isError: boolean }
  | { kind: 'usage'; tokens: AgentTokens }
  /** The CLI is retrying a failed model-API call (e.g. the proxy refused it). */
  | { kind: 'api-retry'; attempt: number; status?: number; error?: string }
  | { kind: 'result'; result: AgentResult };

/** Counters a parser keeps about the stream it saw. */
export interface AgentStreamStats {
  bytes: number;
  lines: number;
  /** Lines that looked like protocol (JSON) but failed to parse or validate. */
  malformed: number;
  /** Lines over the per-line cap, dropped. */
  oversize: number;
  /** Non-JSON lines (e.g. stderr merged by a pty), ignored. */
  other: number;
}

/** The outcome once the stream has ended (or been cut off). */
export interface AgentOutcome {
  result: AgentResult;
  stats: AgentStreamStats;
}

export interface AgentStreamParser {
  /** Feed raw output bytes as they arrive; returns the events completed by this chunk. */
  push(chunk: string | Uint8Array): AgentEvent[];
  /** The stream has ended: flush, then decide the outcome. Never throws. */
  end(): { events: AgentEvent[]; outcome: AgentOutcome };
  readonly stats: AgentStreamStats;
  /** Set once the whole-stream cap was hit; push() ignores further input. */
  readonly overflowed: boolean;
}

export interface ParserLimits {
  /** Longest accepted line in bytes (default 1 MiB). */
  maxLineBytes?: number;
  /** Most bytes read from the whole stream (default 64 MiB). */
  maxStreamBytes?: number;
  /** Longest summary kept (default 4000 characters). */
  maxSummaryChars?: number;
}

/** What a user may change about a built-in CLI adapter. */
export interface CliAdapterOptions {
  /** Guest path of the CLI (default: where the base image installs it). */
  binary?: string;
  /** Extra CLI flags appended to the adapter's own. */
  extraArgs?: string[];
}

export interface AgentAdapter {
  readonly id: AgentId;
  readonly displayName: string;
  /** Environment variable names the credential broker must supply (placeholders only). */
  readonly brokerEnv: readonly string[];
  /** Builds the headless command for one stage. Throws when a brokerEnv name is missing. */
  command(inv: AgentInvocation): AgentCommandSpec;
  /** A fresh incremental parser for one run's output. */
  createParser(limits?: ParserLimits): AgentStreamParser;
  /** The agent's interactive TUI, with the same broker environment as a stage; absent when the agent has none. */
  session?(inv: AgentSessionInvocation): AgentSessionSpec;
}
