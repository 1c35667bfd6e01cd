// A local stand-in for the Anthropic Messages API that speaks the real wire
// format (JSON and SSE, text and tool_use blocks), so the real Claude Code CLI
// can run offline against it. Scripted per test; records every request.
import http from 'node:http';
import https from 'node:https';
import type net from 'node:net';
import type { AddressInfo } from 'node:net';
import { randomBytes } from 'node:crypto';
import { readBody, sendJson } from './stub-http.js';

export interface StubToolUse {
  name: string;
  input: unknown;
  id?: string;
}

/** One assistant reply: optional text, then optional tool calls. */
export interface StubReply {
  text?: string;
  toolUses?: StubToolUse[];
  /** Defaults to 'tool_use' when toolUses is non-empty, else 'end_turn'. */
  stopReason?: string;
  usage?: { input_tokens: number; output_tokens: number };
  /** Answer with this HTTP status and an Anthropic-shaped error body instead. */
  errorStatus?: number;
  /** Answer only once this settles (the request is recorded at once): an agent caught mid-request. */
  hold?: Promise<unknown>;
  /**
   * An upstream that breaks instead of answering (after any hold): 'reset' drops
   * the connection with a TCP reset before any byte of the answer; 'broken-sse'
   * starts a 200 event stream and cuts it off in the middle of an event.
   */
  fault?: 'reset' | 'broken-sse';
}

export interface RecordedRequest {
  at: number;
  method: string;
  url: string;
  path: string;
  headers: http.IncomingHttpHeaders;
  body: unknown;
  rawBody: string;
}

/**
 * How the stub picks the reply for an agent-loop request:
 * - 'by-assistant-turns' (default): the number of assistant messages already in
 *   the request's conversation indexes the script, so retries and side requests
 *   cannot shift it.
 * - 'in-order': each agent-loop request takes the next reply.
 * - a function: full control, looking at the request.
 */
export type StubScript =
  | StubReply[]
  | { mode: 'in-order' | 'by-assistant-turns'; replies: StubReply[] }
  | ((req: RecordedRequest, ctx: { agentTurn: number; assistantTurns: number }) => StubReply);

export interface AnthropicStubOptions {
  script?: StubScript;
  /** Reply for requests outside the agent loop (no tools: titles, summaries, quota probes). */
  sideReply?: StubReply;
  /** Reply when the script has run out. */
  fallbackReply?: StubReply;
  /** Delay between SSE events, to exercise incremental parsing. */
  sseDelayMs?: number;
  host?: string;
  port?: number;
  /**
   * Serve HTTPS with this certificate (e.g. from test/support/https.ts), so a
   * client that verifies certificates (the credential proxy) can reach it; the
   * URL then names `localhost`, which the certificate must cover.
   */
  tls?: { cert: string; key: string };
}

interface MessagesBody {
  model?: string;
  stream?: boolean;
  tools?: unknown[];
  messages?: Array<{ role?: string; content?: unknown }>;
}

export class AnthropicStub {
  readonly requests: RecordedRequest[] = [];
  private agentTurn = 0;
  private constructor(
    private readonly server: http.Server | https.Server,
    readonly url: string,
    readonly port: number,
    private readonly opts: AnthropicStubOptions,
  ) {}

  static async start(opts: AnthropicStubOptions = {}): Promise<AnthropicStub> {
    let stub: AnthropicStub | undefined;
    const listener: http.RequestListener = (req, res) => {
      stub!.handle(req, res).catch((err) => {
        if (!res.headersSent) res.writeHead(500, { 'content-type': 'application/json' });
        res.end(JSON.stringify({ type: 'error', error: { type: 'api_error', message: String(err) } }));
      });
    };
    const server = opts.tls ? https.createServer({ cert: opts.tls.cert, key: opts.tls.key }, listener) : http.createServer(listener);
    const host = opts.host ?? '127.0.0.1';
    await new Promise<void>((resolve, reject) => {
      server.once('error', reject);
      server.listen(opts.port ?? 0, host, () => resolve());
    });
    const port = (server.address() as AddressInfo).port;
    const url = opts.tls ? `https://${host === '127.0.0.1' ? 'localhost' : host}:${port}` : `http://${host}:${port}`;
    stub = new AnthropicStub(server, url, port, opts);
    return stub;
  }

  /** Requests to POST /v1/messages (not count_tokens). */
  messageRequests(): RecordedRequest[] {
    return this.requests.filter((r) => r.method === 'POST' && r.path === '/v1/messages');
  }

  /** Messages requests that carry tools: the agent loop, as opposed to side requests. */
  agentRequests(): RecordedRequest[] {
    return this.messageRequests().filter((r) => isAgentRequest(r.body as MessagesBody));
  }

  /** Resolves when a request matching `pred` has been recorded (or rejects after timeoutMs). */
  async waitFor(pred: (r: RecordedRequest) => boolean, timeoutMs = 30_000): Promise<RecordedRequest> {
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      const hit = this.requests.find(pred);
      if (hit) return hit;
      if (Date.now() > deadline) throw new Error(`stub: no matching request within ${timeoutMs} ms (${this.requests.length} seen)`);
      await new Promise((r) => setTimeout(r, 25));
    }
  }

  async close(): Promise<void> {
    this.server.closeAllConnections?.();
    await new Promise<void>((resolve) => this.server.close(() => resolve()));
  }

  private async handle(req: http.IncomingMessage, res: http.ServerResponse): Promise<void> {
    const rawBody = await readBody(req, 'stub');
    const url = new URL(req.url ?? '/', 'http://stub');
    let body: unknown = undefined;
    if (rawBody.length > 0) {
      try {
        body = JSON.parse(rawBody);
      } catch {
        body = undefined;
      }
    }
    const rec: RecordedRequest = {
      at: Date.now(),
      method: req.method ?? 'GET',
      url: req.url ?? '/',
      path: url.pathname,
      headers: req.headers,
      body,
      rawBody,
    };
    this.requests.push(rec);

    if (rec.method === 'HEAD' || (rec.method === 'GET' && (rec.path === '/' || rec.path === ''))) {
      res.writeHead(200, { 'content-type': 'text/plain' });
      res.end(rec.method === 'HEAD' ? undefined : 'ok');
      return;
    }
    if (rec.method === 'POST' && rec.path === '/v1/messages/count_tokens') {
      const text = JSON.stringify((body as MessagesBody | undefined)?.messages ?? '');
      sendJson(res, 200, { input_tokens: Math.max(1, Math.ceil(text.length / 4)) }, 'request-id');
      return;
    }
    if (rec.method === 'GET' && rec.path === '/v1/models') {
      sendJson(res, 200, { data: [], has_more: false, first_id: null, last_id: null }, 'request-id');
      return;
    }
    if (rec.method === 'POST' && rec.path === '/v1/messages') {
      const mb = (body ?? {}) as MessagesBody;
      if (body === undefined || typeof body !== 'object') {
        sendError(res, 400, 'invalid_request_error', 'body is not JSON');
        return;
      }
      const reply = this.pickReply(rec, mb);
      if (reply.hold) await reply.hold.catch(() => undefined); // a hold that fails only ends the wait
      if (res.destroyed || res.writableEnded) return;
      if (reply.fault === 'reset') {
        resetConnection(req);
        return;
      }
      if (reply.fault === 'broken-sse') {
        brokenStream(req, res, mb.model ?? 'claude-stub');
        return;
      }
      if (reply.errorStatus) {
        sendError(res, reply.errorStatus, errorType(reply.errorStatus), reply.text ?? 'stub error');
        return;
      }
      const message = buildMessage(reply, mb.model ?? 'claude-stub', rec);
      if (mb.stream) await this.sendSse(res, message);
      else sendJson(res, 200, message, 'request-id');
      return;
    }
    sendError(res, 404, 'not_found_error', `stub: no route for ${rec.method} ${rec.path}`);
  }

  private pickReply(rec: RecordedRequest, body: MessagesBody): StubReply {
    const fallback = this.opts.fallbackReply ?? { text: 'Done.' };
    if (!isAgentRequest(body)) return this.opts.sideReply ?? { text: 'Stub side reply.' };
    const assistantTurns = (body.messages ?? []).filter((m) => m?.role === 'assistant').length;
    const agentTurn = this.agentTurn++;
    const script = this.opts.script ?? [];
    if (typeof script === 'function') return script(rec, { agentTurn, assistantTurns });
    const { mode, replies } = Array.isArray(script) ? { mode: 'by-assistant-turns' as const, replies: script } : script;
    const index = mode === 'in-order' ? agentTurn : assistantTurns;
    return replies[index] ?? fallback;
  }

  private async sendSse(res: http.ServerResponse, message: AnthropicMessage): Promise<void> {
    res.writeHead(200, {
      'content-type': 'text/event-stream; charset=utf-8',
      'cache-control': 'no-cache',
      connection: 'keep-alive',
      'request-id': message.id.replace('msg_', 'req_'),
    });
    const delay = this.opts.sseDelayMs ?? 0;
    const send = async (event: string, data: unknown) => {
      res.write(`event: ${event}\ndata: ${JSON.stringify(data)}\n\n`);
      if (delay > 0) await new Promise((r) => setTimeout(r, delay));
    };
    await send('message_start', {
      type: 'message_start',
      message: { ...message, content: [], stop_reason: null, stop_sequence: null, usage: { ...message.usage, output_tokens: 1 } },
    });
    await send('ping', { type: 'ping' });
    for (const [index, block] of message.content.entries()) {
      if (block.type === 'text') {
        await send('content_block_start', { type: 'content_block_start', index, content_block: { type: 'text', text: '' } });
        for (const piece of chunk(block.text, 24)) {
          await send('content_block_delta', { type: 'content_block_delta', index, delta: { type: 'text_delta', text: piece } });
        }
      } else {
        await send('content_block_start', {
          type: 'content_block_start',
          index,
          content_block: { type: 'tool_use', id: block.id, name: block.name, input: {} },
        });
        for (const piece of chunk(JSON.stringify(block.input), 32)) {
          await send('content_block_delta', { type: 'content_block_delta', index, delta: { type: 'input_json_delta', partial_json: piece } });
        }
      }
      await send('content_block_stop', { type: 'content_block_stop', index });
    }
    await send('message_delta', {
      type: 'message_delta',
      delta: { stop_reason: message.stop_reason, stop_sequence: null },
      usage: { output_tokens: message.usage.output_tokens },
    });
    await send('message_stop', { type: 'message_stop' });
    res.end();
  }
}

type ContentBlock = { type: 'text'; text: string } | { type: 'tool_use'; id: string; name: string; input: unknown };
interface AnthropicMessage {
  id: string;
  type: 'message';
  role: 'assistant';
  model: string;
  content: ContentBlock[];
  stop_reason: string;
  stop_sequence: null;
  usage: { input_tokens: number; output_tokens: number; cache_creation_input_tokens: number; cache_read_input_tokens: number };
}

function buildMessage(reply: StubReply, model: string, rec: RecordedRequest): AnthropicMessage {
  const content: ContentBlock[] = [];
  if (reply.text !== undefined && reply.text !== '') content.push({ type: 'text', text: reply.text });
  for (const t of reply.toolUses ?? []) {
    content.push({ type: 'tool_use', id: t.id ?? `toolu_${randomBytes(12).toString('hex')}`, name: t.name, input: t.input ?? {} });
  }
  if (content.length === 0) content.push({ type: 'text', text: '' });
  const hasTools = (reply.toolUses?.length ?? 0) > 0;
  const input = reply.usage?.input_tokens ?? Math.max(1, Math.ceil(rec.rawBody.length / 4));
  const output = reply.usage?.output_tokens ?? Math.max(1, Math.ceil(JSON.stringify(content).length / 4));
  return {
    id: `msg_${randomBytes(12).toString('hex')}`,
    type: 'message',
    role: 'assistant',
    model,
    content,
    stop_reason: reply.stopReason ?? (hasTools ? 'tool_use' : 'end_turn'),
    stop_sequence: null,
    usage: { input_tokens: input, output_tokens: output, cache_creation_input_tokens: 0, cache_read_input_tokens: 0 },
  };
}

function isAgentRequest(body: MessagesBody | undefined): boolean {
  return Array.isArray(body?.tools) && body.tools.length > 0;
}

function chunk(s: string, n: number): string[] {
  if (s.length === 0) return [''];
  const out: string[] = [];
  for (let i = 0; i < s.length; i += n) out.push(s.slice(i, i + n));
  return out;
}

function errorType(status: number): string {
  if (status === 401) return 'authentication_error';
  if (status === 403) return 'permission_error';
  if (status === 404) return 'not_found_error';
  if (status === 429) return 'rate_limit_error';
  if (status === 529) return 'overloaded_error';
  if (status >= 500) return 'api_error';
  return 'invalid_request_error';
}

/** A TCP reset (RST, not a clean close) on the request's connection; under TLS, on the TCP socket beneath it. */
function resetConnection(req: http.IncomingMessage): void {
  type Resettable = net.Socket & { _parent?: net.Socket };
  const socket = req.socket as Resettable | null;
  if (!socket) return;
  const tcp = socket._parent ?? socket;
  try {
    tcp.resetAndDestroy();
  } catch {
    socket.destroy(); // no TCP handle to reset (already closing): a plain close is the nearest
  }
  if (tcp !== socket) socket.destroy();
}

/** A 200 event stream that starts like a real answer and is cut off in the middle of an event. */
function brokenStream(req: http.IncomingMessage, res: http.ServerResponse, model: string): void {
  res.writeHead(200, { 'content-type': 'text/event-stream; charset=utf-8', 'cache-control': 'no-cache' });
  const id = `msg_${randomBytes(12).toString('hex')}`;
  const start = { type: 'message_start', message: { id, type: 'message', role: 'assistant', model, content: [], stop_reason: null, stop_sequence: null, usage: { input_tokens: 1, output_tokens: 1 } } };
  res.write(`event: message_start\ndata: ${JSON.stringify(start)}\n\n`);
  res.write('event: content_block_start\ndata: {"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}\n\n');
  res.write('event: content_block_delta\ndata: {"type":"content_block_delta","index":0,"delta":{"type":"text_de', () => resetConnection(req));
}

function sendError(res: http.ServerResponse, status: number, type: string, message: string): void {
  sendJson(res, status, { type: 'error', error: { type, message } }, 'request-id');
}

/**
 * Which pipeline stage an agent-loop request belongs to, from the default prompt
 * text the agent executor rendered (main/pipeline/agents/prompts.ts).
 */
export function stageOfRequest(req: RecordedRequest): 'plan' | 'build' | 'test-repair' | 'review' | 'document' | 'unknown' {
  const body = req.body as { messages?: Array<{ role: string; content: unknown }> } | undefined;
  const firstUser = JSON.stringify(body?.messages?.find((m) => m.role === 'user')?.content ?? '');
  if (firstUser.includes('Write an implementation plan')) return 'plan';
  if (firstUser.includes('failed (repair round')) return 'test-repair';
  if (firstUser.includes('Implement the task below')) return 'build';
  if (firstUser.includes('You are reviewing a change')) return 'review';
  if (firstUser.includes('Update the documentation')) return 'document';
  return 'unknown';
}
