// `factory exec`: one command in a task's sandbox, as the agent user in the
// repository, without a pty so stdout and stderr stay apart. Output from the
// guest is untrusted: each stream is kept up to a cap and returned as bytes
// (base64), never interpreted here.
import type { ExecResult } from '../../common/contract.js';
import type { ClientChannel } from 'ssh2';
import type { GuestSsh } from '../guest/guest-ssh.js';
import { GUEST_REPO_DIR, asAgentArgv } from '../guest/guest-shell.js';

export const EXEC_MAX_STREAM_BYTES = 16 * 1024 * 1024;
const DEFAULT_TIMEOUT_SEC = 600;

export interface ExecRequest {
  argv: string[];
  /** base64 */
  stdin?: string;
  timeoutSec?: number;
}

/** The guest command line: cd into the repository, then exec argv as given (no shell parsing of the words). */
export function execCommandLine(argv: string[]): string {
  return asAgentArgv(['sh', '-c', `cd ${GUEST_REPO_DIR} && exec "$@"`, 'factory-exec', ...argv]);
}

/**
 * `feed`, when given, writes the command's stdin and ends it (a stream, e.g. a
 * hooks session's working tree carried in ahead of its command); else `req.stdin`.
 */
export async function execInSandbox(
  ssh: Pick<GuestSsh, 'exec'>,
  req: ExecRequest,
  maxBytes = EXEC_MAX_STREAM_BYTES,
  feed?: (channel: ClientChannel) => Promise<void>,
): Promise<ExecResult> {
  const channel = await ssh.exec(execCommandLine(req.argv));
  const out = capped(maxBytes);
  const err = capped(maxBytes);
  let exitCode: number | null = null;
  let signal: string | undefined;
  let timedOut = false;
  return new Promise<ExecResult>((resolve) => {
    const timer = setTimeout(() => {
      timedOut = true;
      try {
        channel.signal('KILL');
      } catch {
        // the channel may be closing already
      }
      channel.close();
    }, (req.timeoutSec ?? DEFAULT_TIMEOUT_SEC) * 1000);
    channel.on('data', (c: Buffer) => out.push(c));
    channel.stderr.on('data', (c: Buffer) => err.push(c));
    channel.on('exit', (code: number | null, sig?: string) => {
      exitCode = typeof code === 'number' ? code : null;
      if (typeof sig === 'string') signal = sig;
    });
    channel.on('close', () => {
      clearTimeout(timer);
      resolve({
        exitCode,
        ...(signal ? { signal } : timedOut ? { signal: 'KILL' } : {}),
        stdout: out.base64(),
        stderr: err.base64(),
        stdoutTruncated: out.truncated(),
        stderrTruncated: err.truncated(),
        timedOut,
      });
    });
    if (!feed) channel.end(req.stdin ? Buffer.from(req.stdin, 'base64') : undefined);
    // A feed that fails closes the channel: the command sees its stdin cut and the result says how it ended.
    else feed(channel).catch(() => channel.close());
  });
}

function capped(max: number) {
  const chunks: Buffer[] = [];
  let size = 0;
  let cut = false;
  return {
    push(c: Buffer) {
      if (size >= max) return void (cut = true);
      const take = c.subarray(0, max - size);
      if (take.length < c.length) cut = true;
      chunks.push(take);
      size += take.length;
    },
    base64: () => Buffer.concat(chunks).toString('base64'),
    truncated: () => cut,
  };
}
