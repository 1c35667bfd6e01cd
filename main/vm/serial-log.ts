// The sandbox's serial console log: one file across boots, each boot after a
// marker line, read back (for error messages) as plain text from the marker on.
import { closeSync, openSync, readSync, statSync } from 'node:fs';
import { appendFile, chmod, stat } from 'node:fs/promises';

/** Appends a marker line to the serial log and returns the offset the new boot starts at. */
export async function appendMarker(file: string, text: string): Promise<number> {
  await appendFile(file, `\n=== factory: ${text} ===\n`);
  // Best effort: the folder is already 0700; the mode only narrows it further.
  await chmod(file, 0o600).catch(() => {});
  return (await stat(file)).size;
}

/** Last lines of a log written by the guest, from an offset, with control characters removed. */
export function readTail(file: string, fromOffset: number, lines: number, maxBytes = 64 * 1024): string {
  let fd: number;
  try {
    fd = openSync(file, 'r');
  } catch {
    // No log yet: the guest has printed nothing.
    return '';
  }
  try {
    const size = statSync(file).size;
    const start = Math.max(fromOffset, size - maxBytes);
    const length = Math.max(0, size - start);
    const buf = Buffer.alloc(length);
    readSync(fd, buf, 0, length, start);
    const text = buf
      .toString('utf8')
      .replace(/\x1b\[[0-9;?]*[A-Za-z]/g, '')
      .replace(/\r/g, '')
      .replace(/[\x00-\x08\x0b-\x1f\x7f]/g, '');
    return text.split('\n').filter((l) => l.trim()).slice(-lines).join('\n');
  } finally {
    closeSync(fd);
  }
}
