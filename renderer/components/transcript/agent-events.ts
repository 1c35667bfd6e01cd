// An agent's event stream as a transcript: Claude Code's stream-json and Codex's
// --json lines (as its stage terminal shows them) become messages, tool calls
// with their input and result, errors in words, and the run's tokens and cost.
// Pure: no DOM, no React. Every string here came from the sandbox; the view
// shows it as escaped text.

export type TranscriptEntry =
  | { kind: 'message'; text: string }
  | { kind: 'tool'; id: string; name: string; input: string; result?: string; failed?: boolean }
  | { kind: 'error'; text: string }
  | { kind: 'end'; tokensIn?: number; tokensOut?: number; costUsd?: number; problem?: string };

/** What a tool's input or result may show before it is cut (the raw log keeps it all). */
const SHOWN_CHARS = 4000;

type Json = Record<string, unknown>;
const isObj = (v: unknown): v is Json => typeof v === 'object' && v !== null && !Array.isArray(v);
const str = (v: unknown): string | undefined => (typeof v === 'string' ? v : undefined);
const num = (v: unknown): number | undefined => (typeof v === 'number' && Number.isFinite(v) ? v : undefined);
const cut = (s: string) => (s.length > SHOWN_CHARS ? `${s.slice(0, SHOWN_CHARS)}… (${s.length - SHOWN_CHARS} more characters in the raw log)` : s);

/** A model API's error, named for the person who can fix it. */
export function errorInWords(error: string, status?: number): string {
  const code = status !== undefined ? ` (HTTP ${status})` : '';
  if (/authentication|invalid.*key|unauthori[sz]ed/i.test(error) || status === 401) return `The model API refused the credential${code}: check the key stored in Credentials.`;
  if (/permission|forbidden/i.test(error) || status === 403) return `The model API refused this key's access${code}: the key may lack the model or the organisation.`;
  if (/rate.?limit|overloaded/i.test(error) || status === 429 || status === 529) return `The model API is busy or over its rate limit${code}: the agent retries; try again later if it gives up.`;
  if (/malformed|connection|ECONN|socket|network/i.test(error)) return `The connection to the model API failed${code}: ${error}. Check the network, the proxy's refusals and the credential's upstream.`;
  return `${error}${code}`;
}

function claudeContent(value: Json, entries: TranscriptEntry[], tools: Map<string, Extract<TranscriptEntry, { kind: 'tool' }>>): void {
  const message = isObj(value.message) ? value.message : undefined;
  const content = Array.isArray(message?.content) ? message.content : [];
  for (const part of content) {
    if (!isObj(part)) continue;
    if (part.type === 'text' && str(part.text)?.trim()) entries.push({ kind: 'message', text: cut(str(part.text)!.trim()) });
    else if (part.type === 'tool_use') {
      const tool = { kind: 'tool' as const, id: str(part.id) ?? '', name: str(part.name) ?? 'tool', input: cut(JSON.stringify(part.input ?? {}, null, 2)) };
      tools.set(tool.id, tool);
      entries.push(tool);
    } else if (part.type === 'tool_result') {
      const tool = tools.get(str(part.tool_use_id) ?? '');
      const text = typeof part.content === 'string' ? part.content : Array.isArray(part.content) ? part.content.map((c) => (isObj(c) ? (str(c.text) ?? '') : '')).join('\n') : '';
      if (tool) {
        tool.result = cut(text);
        tool.failed = part.is_error === true;
      }
    }
  }
}

/** The transcript of the event lines in a stage's terminal text; lines that are not events are left to the raw log. */
export function transcriptOf(text: string): TranscriptEntry[] {
  const entries: TranscriptEntry[] = [];
  const tools = new Map<string, Extract<TranscriptEntry, { kind: 'tool' }>>();
  let retries: { error: string; status?: number; count: number } | undefined;
  const flushRetries = () => {
    if (!retries) return;
    entries.push({ kind: 'error', text: `${errorInWords(retries.error, retries.status)} (${retries.count} attempt${retries.count === 1 ? '' : 's'})` });
    retries = undefined;
  };
  for (const raw of text.split('\n')) {
    const line = raw.trim();
    if (!line.startsWith('{')) continue;
    let value: unknown;
    try {
      value = JSON.parse(line);
    } catch {
      continue; // a cut or wrapped line: the raw log still has it
    }
    if (!isObj(value)) continue;
    const type = str(value.type);
    // Claude Code: retries of one failing call are one error, said once.
    if (type === 'system' && value.subtype === 'api_retry') {
      const error = str(value.error) ?? 'the API call failed';
      if (retries && retries.error === error) retries.count++;
      else {
        flushRetries();
        retries = { error, ...(num(value.error_status) !== undefined ? { status: num(value.error_status)! } : {}), count: 1 };
      }
      continue;
    }
    flushRetries();
    if (type === 'assistant' || type === 'user') claudeContent(value, entries, tools);
    else if (type === 'result' || num(value.total_cost_usd) !== undefined) {
      const usage = isObj(value.usage) ? value.usage : {};
      const reason = str(value.terminal_reason);
      entries.push({
        kind: 'end',
        ...(num(usage.input_tokens) !== undefined ? { tokensIn: num(usage.input_tokens)! } : {}),
        ...(num(usage.output_tokens) !== undefined ? { tokensOut: num(usage.output_tokens)! } : {}),
        ...(num(value.total_cost_usd) !== undefined ? { costUsd: num(value.total_cost_usd)! } : {}),
        ...(value.is_error === true || (reason && reason !== 'completed' && reason !== 'end_turn') ? { problem: reason ?? str(value.subtype) ?? 'ended with an error' } : {}),
      });
    }
    // Codex: items and the turn's usage.
    else if ((type === 'item.completed' || type === 'item.started') && isObj(value.item)) {
      const item = value.item;
      const id = str(item.id) ?? '';
      if (item.type === 'agent_message' && type === 'item.completed') entries.push({ kind: 'message', text: cut(str(item.text) ?? '') });
      else if (item.type === 'command_execution') {
        const known = tools.get(id);
        const tool = known ?? { kind: 'tool' as const, id, name: 'command', input: cut(str(item.command) ?? '') };
        if (!known) {
          tools.set(id, tool);
          entries.push(tool);
        }
        if (type === 'item.completed') {
          const exit = num(item.exit_code);
          tool.result = cut(`${str(item.aggregated_output) ?? ''}${exit !== undefined ? `\nexit status ${exit}` : ''}`.trim());
          tool.failed = exit !== undefined && exit !== 0;
        }
      } else if (item.type === 'error' && type === 'item.completed') entries.push({ kind: 'error', text: errorInWords(str(item.message) ?? 'error') });
    } else if (type === 'turn.completed' && isObj(value.usage)) {
      entries.push({ kind: 'end', ...(num(value.usage.input_tokens) !== undefined ? { tokensIn: num(value.usage.input_tokens)! } : {}), ...(num(value.usage.output_tokens) !== undefined ? { tokensOut: num(value.usage.output_tokens)! } : {}) });
    } else if ((type === 'turn.failed' || type === 'error') && (isObj(value.error) || str(value.message))) {
      entries.push({ kind: 'error', text: errorInWords(str(isObj(value.error) ? value.error.message : value.message) ?? 'the turn failed') });
    }
  }
  flushRetries();
  return entries;
}
