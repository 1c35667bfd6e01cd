// What the model API stubs share: the request body read under a cap, and a JSON
// answer carrying a request id under the header each API names its own way.
import { randomBytes } from 'node:crypto';
import type http from 'node:http';

const MAX_BODY = 32 * 1024 * 1024;

/** The whole request body as text; past 32 MiB the request is destroyed with an error naming `who`. */
export function readBody(req: http.IncomingMessage, who: string): Promise<string> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    let size = 0;
    req.on('data', (c: Buffer) => {
      size += c.length;
      if (size > MAX_BODY) {
        req.destroy(new Error(`${who}: request body too large`));
        return;
      }
      chunks.push(c);
    });
    req.on('end', () => resolve(Buffer.concat(chunks).toString('utf8')));
    req.on('error', reject);
  });
}

/** A JSON answer with a fresh `req_…` id under `requestIdHeader` (Anthropic: request-id, OpenAI: x-request-id). */
export function sendJson(res: http.ServerResponse, status: number, value: unknown, requestIdHeader: 'request-id' | 'x-request-id'): void {
  const text = JSON.stringify(value);
  res.writeHead(status, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(text), [requestIdHeader]: `req_${randomBytes(8).toString('hex')}` });
  res.end(text);
}
