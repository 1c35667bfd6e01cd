// A local stand-in for the OpenAI Responses API (POST /v1/responses, streamed)
// that speaks the SSE wire format the Codex CLI parses, so the real Codex can
// run offline against it: response.created, response.in_progress, per output
// item response.output_item.added → deltas → response.output_item.done, and
// response.completed with usage. Codex acts on output_item.added/.done,
// output_text.delta and completed/failed; the other events are what the real
// API sends between them and Codex skips them.
//
// Codex 0.171's default model runs in "code mode": the request carries its
// tools in `input` as an `additional_tools` item (namespaces of custom and
// function tools), and the model's one working tool is the custom tool `exec`,
// whose input is JavaScript that reaches the nested tools through the global
// `tools` object (`await tools.apply_patch(patchText)`,
// `await tools.exec_command({ cmd })`). The model calls it with a
// `custom_tool_call` output item; Codex answers in the next request with a
// `custom_tool_call_output` item of the same call_id.
//
// Every request is recorded; one without `Authorization: Bearer <apiKey>`
// gets a 401 in the API's error shape. Replies come from a script keyed on the
// pipeline stage (recognised from the default prompt text) and on the number
// of tool results already in the conversation.
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { randomBytes } from 'node:crypto';
import { startHttpsServer, type TestCa, type TestHttpsServer } from './https.js';
import { readBody, sendJson } from './stub-http.js';

export type ResponsesStage = 'plan' | 'build' | 'test-repair' | 'review' | 'document' | 'unknown';

/** One tool call of a reply: by default code mode's `exec` with JavaScript as its input. */
export interface ResponsesToolCall {
  /** The tool's input: for `exec`, JavaScript source (see codeModeJs). */
  input: string;
  /** Defaults to 'exec'. */
  name?: string;
  /** 'custom' (custom_tool_call with a free-form input, the default) or 'function' (function_call with JSON arguments). */
  kind?: 'custom' | 'function';
  /** A function tool's namespace, as the model names it (Codex's `collaboration` for spawn_agent). */
  namespace?: string;
  callId?: string;
}

/** One model turn: optional text, then optional tool calls. */
export interface ResponsesReply {
  text?: string;
  toolCalls?: ResponsesToolCall[];
  usage?: { input_tokens: number; output_tokens: number; cached_tokens?: number };
  /** Answer with this HTTP status and an API-shaped error body instead. */
  errorStatus?: number;
  /** Stream a response.failed event with this message instead of completing. */
  failMessage?: string;
  /** Answer only once this settles (the request is recorded at once). */
  hold?: Promise<unknown>;
}

export interface RecordedResponsesRequest {
  at: number;
  method: string;
  path: string;
  headers: http.IncomingHttpHeaders;
  body: unknown;
  rawBody: string;
}

export interface ResponsesScriptContext {
  stage: ResponsesStage;
  /** Tool results (custom_tool_call_output / function_call_output items) already in the conversation. */
  toolResults: number;
}

/**
 * Replies per stage, indexed by the number of tool results already in the
 * request (one tool call per reply keeps the index and the turn the same), or a
 * function with full control.
 */
export type ResponsesScript =
  | Partial<Record<ResponsesStage, ResponsesReply[]>>
  | ((req: RecordedResponsesRequest, ctx: ResponsesScriptContext) => ResponsesReply);

export interface ResponsesStubOptions {
  /** The only key accepted (Authorization: Bearer); anything else gets 401. */
  apiKey: string;
  script?: ResponsesScript;
  /** Reply when the script has nothing for the request. */
  fallbackReply?: ResponsesReply;
  /** Serve HTTPS with a certificate from this CA (for the credential proxy), else plain HTTP on 127.0.0.1. */
  ca?: TestCa;
  /** Pause between SSE events. */
  sseDelayMs?: number;
}

interface ResponsesBody {
  model?: string;
  stream?: boolean;
  input?: Array<{ type?: string; role?: string; content?: unknown }>;
}

export class ResponsesStub {
  readonly requests: RecordedResponsesRequest[] = [];

  private constructor(
    private readonly close_: () => Promise<void>,
    /** Base URL of the API: `${url}/v1` is what a client's base_url names. */
    readonly url: string,
    readonly port: number,
    private readonly opts: ResponsesStubOptions,
  ) {}

  static async start(opts: ResponsesStubOptions): Promise<ResponsesStub> {
    let stub: ResponsesStub | undefined;
    const listener: http.RequestListener = (req, res) => {
      stub!.handle(req, res).catch((err) => {
        if (!res.headersSent) res.writeHead(500, { 'content-type': 'application/json' });
        res.end(JSON.stringify({ error: { type: 'server_error', message: String(err), code: null, param: null } }));
      });
    };
    if (opts.ca) {
      const server: TestHttpsServer = await startHttpsServer(opts.ca, listener);
      stub = new ResponsesStub(() => server.close(), server.url, server.port, opts);
      return stub;
    }
    const server = http.createServer(listener);
    await new Promise<void>((resolve, reject) => {
      server.once('error', reject);
      server.listen(0, '127.0.0.1', () => resolve());
    });
    const port = (server.address() as AddressInfo).port;
    const close = () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      });
    stub = new ResponsesStub(close, `http://127.0.0.1:${port}`, port, opts);
    return stub;
  }

  /** POST …/responses requests: the model turns. */
  responseRequests(): RecordedResponsesRequest[] {
    return this.requests.filter((r) => r.method === 'POST' && r.path.endsWith('/responses'));
  }

  /** Resolves when a request matching `pred` has been recorded (or rejects after timeoutMs). */
  async waitFor(pred: (r: RecordedResponsesRequest) => boolean, timeoutMs = 30_000): Promise<RecordedResponsesRequest> {
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      const hit = this.requests.find(pred);
      if (hit) return hit;
      if (Date.now() > deadline) throw new Error(`responses stub: no matching request within ${timeoutMs} ms (${this.requests.length} seen)`);
      await new Promise((r) => setTimeout(r, 25));
    }
  }

  close(): Promise<void> {
    return this.close_();
  }

  private async handle(req: http.IncomingMessage, res: http.ServerResponse): Promise<void> {
    const rawBody = await readBody(req, 'responses stub');
    let body: unknown = undefined;
    if (rawBody.length > 0) {
      try {
        body = JSON.parse(rawBody);
      } catch {
        body = undefined;
      }
    }
    const rec: RecordedResponsesRequest = {
      at: Date.now(),
      method: req.method ?? 'GET',
      path: new URL(req.url ?? '/', 'http://stub').pathname,
      headers: req.headers,
      body,
      rawBody,
    };
    this.requests.push(rec);

    if (req.headers.authorization !== `Bearer ${this.opts.apiKey}`) {
      sendError(res, 401, 'invalid_request_error', 'Incorrect API key provided.', 'invalid_api_key');
      return;
    }
    if (rec.method === 'GET' && rec.path === '/v1/models') {
      sendJson(res, 200, { object: 'list', data: [] }, 'x-request-id');
      return;
    }
    if (rec.method === 'POST' && rec.path === '/v1/responses') {
      if (body === undefined || typeof body !== 'object') {
        sendError(res, 400, 'invalid_request_error', 'body is not JSON');
        return;
      }
      const reply = this.pickReply(rec, body as ResponsesBody);
      if (reply.hold) await reply.hold.catch(() => undefined); // a hold that fails only ends the wait
      if (res.destroyed || res.writableEnded) return;
      if (reply.errorStatus) {
        sendError(res, reply.errorStatus, reply.errorStatus >= 500 ? 'server_error' : 'invalid_request_error', reply.text ?? 'stub error');
        return;
      }
      await this.stream(res, reply, (body as ResponsesBody).model ?? 'stub-model', rec);
      return;
    }
    sendError(res, 404, 'invalid_request_error', `stub: no route for ${rec.method} ${rec.path}`);
  }

  private pickReply(rec: RecordedResponsesRequest, body: ResponsesBody): ResponsesReply {
    const fallback = this.opts.fallbackReply ?? { text: 'Done.' };
    const ctx: ResponsesScriptContext = {
      stage: stageOfResponsesRequest(rec),
      toolResults: (body.input ?? []).filter((i) => i?.type === 'custom_tool_call_output' || i?.type === 'function_call_output').length,
    };
    const script = this.opts.script ?? {};
    if (typeof script === 'function') return script(rec, ctx);
    return script[ctx.stage]?.[ctx.toolResults] ?? fallback;
  }

  private async stream(res: http.ServerResponse, reply: ResponsesReply, model: string, rec: RecordedResponsesRequest): Promise<void> {
    const responseId = `resp_${randomBytes(12).toString('hex')}`;
    res.writeHead(200, { 'content-type': 'text/event-stream; charset=utf-8', 'cache-control': 'no-cache', connection: 'keep-alive', 'x-request-id': `req_${randomBytes(8).toString('hex')}` });
    const delay = this.opts.sseDelayMs ?? 0;
    let sequence = 0;
    const send = async (type: string, data: Record<string, unknown>) => {
      res.write(`event: ${type}\ndata: ${JSON.stringify({ type, sequence_number: sequence++, ...data })}\n\n`);
      if (delay > 0) await new Promise((r) => setTimeout(r, delay));
    };
    const base = { id: responseId, object: 'response', created_at: Math.floor(Date.now() / 1000), model, output: [] as unknown[] };
    await send('response.created', { response: { ...base, status: 'in_progress' } });
    await send('response.in_progress', { response: { ...base, status: 'in_progress' } });

    const output: unknown[] = [];
    let index = 0;
    if (reply.text) {
      const id = `msg_${randomBytes(12).toString('hex')}`;
      const done = { id, type: 'message', status: 'completed', role: 'assistant', content: [{ type: 'output_text', text: reply.text, annotations: [] }] };
      await send('response.output_item.added', { output_index: index, item: { ...done, status: 'in_progress', content: [] } });
      await send('response.content_part.added', { output_index: index, item_id: id, content_index: 0, part: { type: 'output_text', text: '', annotations: [] } });
      for (const piece of chunk(reply.text, 24)) {
        await send('response.output_text.delta', { output_index: index, item_id: id, content_index: 0, delta: piece });
      }
      await send('response.output_text.done', { output_index: index, item_id: id, content_index: 0, text: reply.text });
      await send('response.content_part.done', { output_index: index, item_id: id, content_index: 0, part: done.content[0] });
      await send('response.output_item.done', { output_index: index, item: done });
      output.push(done);
      index++;
    }
    for (const call of reply.toolCalls ?? []) {
      const callId = call.callId ?? `call_${randomBytes(12).toString('hex')}`;
      const name = call.name ?? 'exec';
      if ((call.kind ?? 'custom') === 'custom') {
        const id = `ctc_${randomBytes(12).toString('hex')}`;
        const done = { id, type: 'custom_tool_call', status: 'completed', call_id: callId, name, input: call.input };
        await send('response.output_item.added', { output_index: index, item: { ...done, status: 'in_progress', input: '' } });
        for (const piece of chunk(call.input, 64)) {
          await send('response.custom_tool_call_input.delta', { output_index: index, item_id: id, delta: piece });
        }
        await send('response.custom_tool_call_input.done', { output_index: index, item_id: id, input: call.input });
        await send('response.output_item.done', { output_index: index, item: done });
        output.push(done);
      } else {
        const id = `fc_${randomBytes(12).toString('hex')}`;
        const done = { id, type: 'function_call', status: 'completed', call_id: callId, name, ...(call.namespace ? { namespace: call.namespace } : {}), arguments: call.input };
        await send('response.output_item.added', { output_index: index, item: { ...done, status: 'in_progress', arguments: '' } });
        await send('response.function_call_arguments.delta', { output_index: index, item_id: id, delta: call.input });
        await send('response.function_call_arguments.done', { output_index: index, item_id: id, arguments: call.input });
        await send('response.output_item.done', { output_index: index, item: done });
        output.push(done);
      }
      index++;
    }

    const input = reply.usage?.input_tokens ?? Math.max(1, Math.ceil(rec.rawBody.length / 4));
    const outputTokens = reply.usage?.output_tokens ?? Math.max(1, Math.ceil(JSON.stringify(output).length / 4));
    if (reply.failMessage) {
      await send('response.failed', { response: { ...base, status: 'failed', output, error: { code: 'server_error', message: reply.failMessage } } });
      res.end();
      return;
    }
    await send('response.completed', {
      response: {
        ...base,
        status: 'completed',
        output,
        usage: {
          input_tokens: input,
          input_tokens_details: { cached_tokens: reply.usage?.cached_tokens ?? 0 },
          output_tokens: outputTokens,
          output_tokens_details: { reasoning_tokens: 0 },
          total_tokens: input + outputTokens,
        },
      },
    });
    res.end();
  }
}

/** Which pipeline stage a request belongs to, from the default prompt text (main/pipeline/agents/prompts.ts) in its user messages. */
export function stageOfResponsesRequest(req: RecordedResponsesRequest): ResponsesStage {
  const input = (req.body as ResponsesBody | undefined)?.input ?? [];
  const userText = JSON.stringify(input.filter((i) => i?.type === 'message' && i.role === 'user').map((i) => i.content));
  if (userText.includes('Write an implementation plan')) return 'plan';
  if (userText.includes('failed (repair round')) return 'test-repair';
  if (userText.includes('Implement the task below')) return 'build';
  if (userText.includes('You are reviewing a change')) return 'review';
  if (userText.includes('Update the documentation')) return 'document';
  return 'unknown';
}

/** An apply_patch patch that adds one file (content lines each get the patch's '+'). */
export function addFilePatch(file: string, content: string): string {
  const lines = content.replace(/\n$/, '').split('\n');
  return ['*** Begin Patch', `*** Add File: ${file}`, ...lines.map((l) => `+${l}`), '*** End Patch', ''].join('\n');
}

/**
 * The JavaScript a code-mode model sends to `exec`: each patch through
 * `tools.apply_patch`, then each shell command through `tools.exec_command`,
 * every result handed back to the model with `text()`.
 */
export function codeModeJs(steps: { patches?: string[]; commands?: string[] }): string {
  const lines: string[] = [];
  for (const patch of steps.patches ?? []) lines.push(`text(JSON.stringify(await tools.apply_patch(${JSON.stringify(patch)})));`);
  for (const cmd of steps.commands ?? []) lines.push(`text(JSON.stringify(await tools.exec_command({ cmd: ${JSON.stringify(cmd)} })));`);
  return lines.join('\n');
}

/** The text of the tool results Codex sent back in a request (custom_tool_call_output items). */
export function toolResultsOf(req: RecordedResponsesRequest): string[] {
  const input = (req.body as { input?: Array<{ type?: string; output?: unknown }> } | undefined)?.input ?? [];
  return input
    .filter((i) => i?.type === 'custom_tool_call_output' || i?.type === 'function_call_output')
    .map((i) => (typeof i.output === 'string' ? i.output : JSON.stringify(i.output)));
}

function chunk(s: string, n: number): string[] {
  if (s.length === 0) return [''];
  const out: string[] = [];
  for (let i = 0; i < s.length; i += n) out.push(s.slice(i, i + n));
  return out;
}

function sendError(res: http.ServerResponse, status: number, type: string, message: string, code: string | null = null): void {
  sendJson(res, status, { error: { message, type, param: null, code } }, 'x-request-id');
}
