// A stub of the model APIs that speaks the real wire formats: Anthropic
// Messages (JSON and the SSE stream message_start → content_block_delta →
// message_stop) and OpenAI chat completions (JSON). It answers 401 unless the
// request carries the expected real key, and records every request it saw.
import type http from 'node:http';
import { startHttpsServer, type TestCa, type TestHttpsServer } from './https.js';
import { readBody } from './stub-http.js';

export interface RecordedRequest {
  method: string;
  path: string;
  headers: http.IncomingHttpHeaders;
  body: string;
}

export interface ModelStub extends TestHttpsServer {
  requests: RecordedRequest[];
}

export interface ModelStubOptions {
  anthropicKey: string;
  openaiKey?: string;
  /** Pause between SSE events, so a test can see the first event before the last. */
  sseDelayMs?: number;
  /** Number of text deltas in a streamed answer. */
  deltas?: number;
}

function sse(res: http.ServerResponse, event: string, data: unknown): void {
  res.write(`event: ${event}\ndata: ${JSON.stringify(data)}\n\n`);
}

export async function startModelStub(ca: TestCa, opts: ModelStubOptions): Promise<ModelStub> {
  const requests: RecordedRequest[] = [];
  const delay = opts.sseDelayMs ?? 20;
  const deltas = opts.deltas ?? 5;
  const server = await startHttpsServer(ca, (req, res) => {
    // The handler awaits between SSE events; errors end the response (not a floating promise).
    void (async () => {
      const body = await readBody(req, 'model stub');
      const url = req.url ?? '/';
      requests.push({ method: req.method ?? '', path: url, headers: req.headers, body });
      const json = (status: number, value: unknown) => {
        const text = JSON.stringify(value);
        res.writeHead(status, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(text) });
        res.end(text);
      };
      const pathOnly = url.split('?')[0];
      if (pathOnly === '/v1/messages' || pathOnly === '/v1/models') {
        if (req.headers['x-api-key'] !== opts.anthropicKey) {
          return json(401, { type: 'error', error: { type: 'authentication_error', message: 'invalid x-api-key' } });
        }
        if (pathOnly === '/v1/models') return json(200, { data: [{ id: 'claude-stub', type: 'model' }], has_more: false });
        let parsed: { stream?: boolean; model?: string } = {};
        try {
          parsed = JSON.parse(body || '{}');
        } catch {
          return json(400, { type: 'error', error: { type: 'invalid_request_error', message: 'body is not JSON' } });
        }
        const id = `msg_stub_${requests.length}`;
        const model = parsed.model ?? 'claude-stub';
        if (!parsed.stream) {
          return json(200, {
            id, type: 'message', role: 'assistant', model,
            content: [{ type: 'text', text: 'Hello from the stub.' }],
            stop_reason: 'end_turn', stop_sequence: null,
            usage: { input_tokens: 5, output_tokens: 5 },
          });
        }
        res.writeHead(200, { 'content-type': 'text/event-stream', 'cache-control': 'no-cache' });
        const wait = () => new Promise((r) => setTimeout(r, delay));
        sse(res, 'message_start', {
          type: 'message_start',
          message: { id, type: 'message', role: 'assistant', model, content: [], stop_reason: null, stop_sequence: null, usage: { input_tokens: 5, output_tokens: 1 } },
        });
        await wait();
        sse(res, 'content_block_start', { type: 'content_block_start', index: 0, content_block: { type: 'text', text: '' } });
        for (let i = 0; i < deltas; i++) {
          await wait();
          sse(res, 'content_block_delta', { type: 'content_block_delta', index: 0, delta: { type: 'text_delta', text: `part${i} ` } });
        }
        sse(res, 'content_block_stop', { type: 'content_block_stop', index: 0 });
        sse(res, 'message_delta', { type: 'message_delta', delta: { stop_reason: 'end_turn', stop_sequence: null }, usage: { output_tokens: deltas } });
        await wait();
        sse(res, 'message_stop', { type: 'message_stop' });
        return res.end();
      }
      if (pathOnly === '/v1/chat/completions' || pathOnly === '/v1/models-openai') {
        if (req.headers.authorization !== `Bearer ${opts.openaiKey}`) {
          return json(401, { error: { message: 'Incorrect API key provided', type: 'invalid_request_error' } });
        }
        return json(200, {
          id: 'chatcmpl-stub', object: 'chat.completion', created: 0, model: 'gpt-stub',
          choices: [{ index: 0, message: { role: 'assistant', content: 'Hello from the stub.' }, finish_reason: 'stop' }],
          usage: { prompt_tokens: 1, completion_tokens: 1, total_tokens: 2 },
        });
      }
      json(404, { type: 'error', error: { type: 'not_found_error', message: `no route ${pathOnly}` } });
    })().catch(() => res.destroy());
  });
  return Object.assign(server, { requests });
}
