// Push policy for git smart-HTTP through the proxy. The proxy sees only the
// receive-pack command list, not the objects, so it cannot prove an update is a
// fast-forward. What it enforces instead, and what this file parses:
//   - every command targets refs/heads/factory/<task-id>/<something>, a name
//     git's own rules accept (check_refname_format, checked byte for byte);
//   - every command CREATES a ref (old id all zeros): no updates of existing
//     refs at all, hence no force-push; git's own ref transaction rejects the
//     creation if the ref already exists;
//   - no deletes (new id all zeros);
//   - no signed-push certificates, nothing compressed, a capped command list.
import type { Readable } from 'node:stream';

export const MAX_COMMAND_BYTES = 64 * 1024;

export interface RefCommand {
  oldId: string;
  newId: string;
  ref: string;
}

export type CommandListParse =
  | { state: 'need-more' }
  | { state: 'done'; commands: RefCommand[]; capabilities: string[]; consumed: number }
  | { state: 'invalid'; reason: string };

const OID = /^(?:[0-9a-f]{40}|[0-9a-f]{64})$/;

/** Parses the pkt-lines before the first flush packet of a receive-pack request body. */
export function parseReceivePackCommands(buf: Buffer): CommandListParse {
  const commands: RefCommand[] = [];
  let capabilities: string[] = [];
  let pos = 0;
  for (;;) {
    if (buf.length - pos < 4) return buf.length > MAX_COMMAND_BYTES ? { state: 'invalid', reason: 'command list too long' } : { state: 'need-more' };
    const lenHex = buf.subarray(pos, pos + 4).toString('latin1');
    if (!/^[0-9a-f]{4}$/.test(lenHex)) return { state: 'invalid', reason: 'not a pkt-line stream' };
    const len = parseInt(lenHex, 16);
    if (len === 0) return { state: 'done', commands, capabilities, consumed: pos + 4 };
    if (len < 4) return { state: 'invalid', reason: `unexpected special packet ${lenHex}` };
    if (pos + len > MAX_COMMAND_BYTES) return { state: 'invalid', reason: 'command list too long' };
    if (buf.length < pos + len) return { state: 'need-more' };
    let line = buf.subarray(pos + 4, pos + len).toString('latin1');
    pos += len;
    const nul = line.indexOf('\0');
    if (nul >= 0) {
      // Capabilities follow the first command after a NUL.
      if (commands.length === 0) capabilities = line.slice(nul + 1).trim().split(' ').filter(Boolean);
      line = line.slice(0, nul);
    }
    line = line.replace(/\n$/, '');
    if (line.startsWith('shallow ')) continue;
    if (line.startsWith('push-cert')) return { state: 'invalid', reason: 'signed pushes are not supported through the proxy' };
    const parts = line.split(' ');
    if (parts.length !== 3 || !OID.test(parts[0]!) || !OID.test(parts[1]!)) {
      return { state: 'invalid', reason: 'malformed ref update command' };
    }
    commands.push({ oldId: parts[0]!, newId: parts[1]!, ref: parts[2]! });
  }
}

const isZero = (oid: string) => /^0+$/.test(oid);

/** A ref name as it may be shown: bytes outside printable ASCII escaped as \xNN. */
export function showRef(ref: string): string {
  return ref.replace(/[^\x21-\x7e]/g, (c) => `\\x${c.charCodeAt(0).toString(16).padStart(2, '0')}`);
}

/**
 * Why git itself would refuse `name` as a ref name, or undefined when it is valid:
 * git's check_refname_format (refs.c) with no flags, rule for rule, over the
 * name's bytes (one char per byte, latin1). Checked against `git check-ref-format`
 * in the tests.
 */
export function refFormatProblem(name: string): string | undefined {
  if (name === '@') return 'it is the single character "@"';
  const components = name.split('/');
  if (components.length < 2) return 'it has only one component';
  for (const c of components) {
    if (c === '') return 'it has an empty component (a leading, trailing or doubled "/")';
    if (c.startsWith('.')) return `the component "${showRef(c)}" begins with "."`;
    if (c.endsWith('.lock')) return `the component "${showRef(c)}" ends with ".lock"`;
  }
  if (name.includes('..')) return 'it contains ".."';
  if (name.includes('@{')) return 'it contains "@{"';
  const bad = /[\x00-\x20\x7f~^:?*[\\]/.exec(name);
  if (bad) return `it contains ${bad[0] === ' ' ? 'a space' : `the character ${showRef(bad[0])}`}`;
  if (name.endsWith('.')) return 'it ends with "."';
  return undefined;
}

/** Undefined when the command is allowed, else the reason it is refused. */
export function checkRefCommand(cmd: RefCommand, taskId: string): string | undefined {
  const prefix = `refs/heads/factory/${taskId}/`;
  const shown = showRef(cmd.ref);
  if (!cmd.ref.startsWith(prefix) || cmd.ref.length === prefix.length) {
    return `push to ${shown} refused: only new branches under ${prefix}* may be pushed`;
  }
  const problem = refFormatProblem(cmd.ref);
  if (problem) return `push to ${shown} refused: not a valid ref name (${problem})`;
  if (isZero(cmd.newId)) return `push to ${shown} refused: deleting refs is not allowed`;
  if (!isZero(cmd.oldId)) {
    return `push to ${shown} refused: only creating new branches is allowed (no updates, so no force-push)`;
  }
  return undefined;
}

function pkt(payload: Buffer | string): Buffer {
  const body = typeof payload === 'string' ? Buffer.from(payload, 'utf8') : payload;
  return Buffer.concat([Buffer.from((body.length + 4).toString(16).padStart(4, '0'), 'latin1'), body]);
}

/**
 * A receive-pack result that refuses every command, in git's own wire format,
 * so `git push` shows "! [remote rejected] ref (reason)" instead of a bare 403.
 */
export function receivePackRefusal(commands: RefCommand[], capabilities: string[], reasons: (string | undefined)[], banner: string): Buffer {
  const report = Buffer.concat([
    pkt('unpack ok\n'),
    ...commands.map((c, i) => pkt(`ng ${c.ref} ${(reasons[i] ?? 'refused: another update in this push was refused').replace(/\n/g, ' ')}\n`)),
    Buffer.from('0000', 'latin1'),
  ]);
  const sideband = capabilities.includes('side-band-64k') || capabilities.includes('side-band');
  if (!capabilities.includes('report-status') && !capabilities.includes('report-status-v2')) {
    return sideband ? Buffer.concat([pkt(Buffer.concat([Buffer.from([2]), Buffer.from(banner + '\n')])), Buffer.from('0000')]) : Buffer.from('0000');
  }
  if (!sideband) return report;
  const max = capabilities.includes('side-band-64k') ? 65515 : 995;
  const parts: Buffer[] = [pkt(Buffer.concat([Buffer.from([2]), Buffer.from(banner + '\n')]))];
  for (let i = 0; i < report.length; i += max) parts.push(pkt(Buffer.concat([Buffer.from([1]), report.subarray(i, i + max)])));
  parts.push(Buffer.from('0000', 'latin1'));
  return Buffer.concat(parts);
}

/** Reads a receive-pack request body until its command list ends; returns the bytes read so far. */
export function readReceivePackCommands(
  body: Readable,
): Promise<{ commands: RefCommand[]; capabilities: string[]; buffered: Buffer } | { error: string }> {
  return new Promise((resolve) => {
    const chunks: Buffer[] = [];
    let total = 0;
    let settled = false;
    const finish = (v: { commands: RefCommand[]; capabilities: string[]; buffered: Buffer } | { error: string }) => {
      if (settled) return;
      settled = true;
      body.off('data', onData);
      body.off('end', onEnd);
      body.off('close', onClose);
      body.pause();
      resolve(v);
    };
    const evaluate = (ended: boolean) => {
      const buf = Buffer.concat(chunks, total);
      const parsed = parseReceivePackCommands(buf);
      if (parsed.state === 'done') return finish({ commands: parsed.commands, capabilities: parsed.capabilities, buffered: buf });
      if (parsed.state === 'invalid') return finish({ error: parsed.reason });
      if (ended) return finish({ error: 'the command list ended early' });
    };
    const onData = (c: Buffer) => {
      chunks.push(c);
      total += c.length;
      evaluate(false);
    };
    const onEnd = () => evaluate(true);
    const onClose = () => finish({ error: 'the connection closed before the command list ended' });
    body.on('data', onData);
    body.on('end', onEnd);
    body.on('close', onClose);
  });
}
