// A user-supplied agent command: any program that takes the stage prompt on
// stdin (or as a file path via {{promptFile}} in its arguments) and prints
// text. Its result is its exit status; the summary is its last output line.
import { meaningfulLines } from '../log-lines.js';
import { capText, JsonLinesParser } from './json-lines.js';
import { assertEnvName, requireBrokerEnv } from './shell.js';
import type { AgentAdapter, AgentCommandSpec, AgentEvent, AgentInvocation, AgentResult, AgentStreamParser, ParserLimits } from './types.js';

export interface CustomCommandOptions {
  /** Program and arguments; `{{promptFile}}` in an argument becomes the prompt file's path. */
  argv: string[];
  /** Placeholder env names it needs from the broker (e.g. ANTHROPIC_API_KEY). */
  brokerEnv?: string[];
  /** Fixed, non-secret environment. */
  env?: Record<string, string>;
  /** Deliver the prompt on stdin (default true). */
  promptOnStdin?: boolean;
  id?: string;
  displayName?: string;
}

export class CustomCommandAdapter implements AgentAdapter {
  readonly id: string;
  readonly displayName: string;
  readonly brokerEnv: readonly string[];

  constructor(private readonly opts: CustomCommandOptions) {
    if (opts.argv.length === 0 || opts.argv[0] === '') throw new Error('a custom agent command needs a program');
    if (opts.argv.length > 256 || opts.argv.some((a) => a.length > 8192)) throw new Error('a custom agent command is too long');
    for (const n of opts.brokerEnv ?? []) assertEnvName(n);
    for (const n of Object.keys(opts.env ?? {})) assertEnvName(n);
    this.id = opts.id ?? 'custom';
    this.displayName = opts.displayName ?? 'Custom agent';
    this.brokerEnv = [...(opts.brokerEnv ?? [])];
  }

  command(inv: AgentInvocation): AgentCommandSpec {
    const env = requireBrokerEnv(this.displayName, this.brokerEnv, inv.env);
    // split/join, not a regex replace: the path is inserted literally.
    const argv = this.opts.argv.map((a) => a.split('{{promptFile}}').join(inv.promptFile));
    return {
      cwd: inv.cwd,
      env: { ...(this.opts.env ?? {}), ...env },
      argv,
      ...(this.opts.promptOnStdin === false ? {} : { stdinFile: inv.promptFile }),
    };
  }

  createParser(limits?: ParserLimits): AgentStreamParser {
    return new PlainTextParser(limits);
  }
}

/** Any output is fine; it remembers the last line. Success is decided by the exit status. */
export class PlainTextParser extends JsonLinesParser {
  private last = '';

  override push(chunk: string | Uint8Array): AgentEvent[] {
    const text = typeof chunk === 'string' ? chunk : Buffer.from(chunk.buffer, chunk.byteOffset, chunk.byteLength).toString('utf8');
    // Spinner frames and package-manager noise are never the summary.
    const lines = meaningfulLines(text);
    if (lines.length > 0) this.last = capText(lines[lines.length - 1]!, this.maxSummaryChars);
    return super.push(chunk);
  }

  protected handleValue(): AgentEvent[] | null {
    // JSON lines from a custom agent carry no meaning we know of.
    this.stats.other++;
    return [];
  }

  protected finalResult(): AgentResult {
    return { ok: true, summary: this.last };
  }

  protected partialResult(): AgentResult {
    return { ok: false, summary: this.last };
  }
}
