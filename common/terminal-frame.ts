// Binary WebSocket frame for terminal output (web host → browser). JSON would
// cost a base64 round trip per batch; a tiny header keeps bytes as bytes.
//   byte 0: frame kind (1 = terminal data)
//   byte 1: length N of the session id (ASCII, 1..128)
//   bytes 2..2+N: session id
//   rest: the terminal bytes
export const TERMINAL_DATA_FRAME = 1;
const MAX_ID = 128;

export function encodeTerminalFrame(sessionId: string, data: Uint8Array): Uint8Array {
  if (sessionId.length < 1 || sessionId.length > MAX_ID || !/^[\x21-\x7e]+$/.test(sessionId)) {
    throw new Error(`terminal frame: invalid session id ${JSON.stringify(sessionId).slice(0, 40)}`);
  }
  const out = new Uint8Array(2 + sessionId.length + data.byteLength);
  out[0] = TERMINAL_DATA_FRAME;
  out[1] = sessionId.length;
  for (let i = 0; i < sessionId.length; i++) out[2 + i] = sessionId.charCodeAt(i);
  out.set(data, 2 + sessionId.length);
  return out;
}

export function decodeTerminalFrame(frame: Uint8Array): { sessionId: string; data: Uint8Array } {
  if (frame.byteLength < 2 || frame[0] !== TERMINAL_DATA_FRAME) throw new Error('terminal frame: unknown kind');
  const n = frame[1]!;
  if (n < 1 || n > MAX_ID || frame.byteLength < 2 + n) throw new Error('terminal frame: bad session id length');
  let sessionId = '';
  for (let i = 0; i < n; i++) sessionId += String.fromCharCode(frame[2 + i]!);
  return { sessionId, data: frame.subarray(2 + n) };
}
